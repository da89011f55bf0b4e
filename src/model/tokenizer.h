/* The tokenizer built from GGUF metadata, byte-level BPE or SentencePiece BPE (public API in
 * include/wgml-model.h, "tokenizer and chat template"; its files share tokenizer_internal.h). */
#ifndef WGML_MODEL_TOKENIZER_H
#define WGML_MODEL_TOKENIZER_H

#include "wgml.h"

#endif
