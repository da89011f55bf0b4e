/* Byte-level BPE tokenizer built from GGUF metadata (public API in include/wgml-model.h,
 * "tokenizer and chat template"). */
#ifndef WGML_MODEL_TOKENIZER_H
#define WGML_MODEL_TOKENIZER_H

#include "wgml.h"

#endif
