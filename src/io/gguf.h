/* GGUF reader (the public API is in include/wgml-model.h, "GGUF files"). */
#ifndef WGML_MODEL_GGUF_H
#define WGML_MODEL_GGUF_H

#include "wgml.h"

#endif
