/* Adapter files (adapter.safetensors + adapter_config.json) from host arrays, the layer under
 * the public wgml_trainer_save_adapter / wgml_adapter_load (include/wgml-train.h). */
#ifndef WGML_TRAIN_ADAPTER_H
#define WGML_TRAIN_ADAPTER_H

#include "io/safetensors.h"
#include "wgml-train.h"

#define ADAPTER_FORMAT "wgml-lora-1"
#define ADAPTER_FILE "adapter.safetensors"
#define ADAPTER_CONFIG_FILE "adapter_config.json"

/* Writes dir/ADAPTER_FILE (the n tensors t, F32, with the metadata format, rank, alpha,
 * targets and base_model_sha256) and dir/ADAPTER_CONFIG_FILE (cfg's mode, rank, alpha and
 * targets, info's base model, data and steps, and n), each atomically. dir must exist. */
wgml_status adapter_write(const char *dir, const wgml_train_config *cfg, const wgml_adapter_info *info, int n,
                          const st_write_tensor *t, char *err, size_t errlen);

#endif
