/* Llama model from GGUF (public API in include/wgml.h, block "model: Llama and generation"). */
#ifndef WGML_MODEL_LLAMA_H
#define WGML_MODEL_LLAMA_H

#include "wgml.h"

wgml_ctx *llama_ctx(const wgml_model *m);
/* Length of the longest prefix of s[0..n) that does not end inside an incomplete UTF-8
 * sequence (the streaming hold-back of wgml_generate). */
size_t llama_utf8_complete(const unsigned char *s, size_t n);

#endif
