/* Llama model from GGUF (public API in include/wgml.h, block "model: Llama and generation"). */
#ifndef WGML_MODEL_LLAMA_H
#define WGML_MODEL_LLAMA_H

#include "wgml.h"

wgml_ctx *llama_ctx(const wgml_model *m);

#endif
