"""Loading libwgml.so and the ctypes prototypes of the public C API (include/wgml.h, wgml-io.h, wgml-optim.h, wgml-model.h, wgml-train.h).

Only functions declared in the public header are used. The library is a ctypes.CDLL, so every
foreign call releases the GIL for its duration: other Python threads run while the GPU works.
"""
from __future__ import annotations

import ctypes
import os
from ctypes import (POINTER, Structure, c_char, c_char_p, c_double, c_float, c_int, c_int32, c_int64, c_size_t,
                    c_uint, c_uint32, c_uint64, c_void_p)
from pathlib import Path
from typing import Optional

LIB_NAME = "libwgml.so"


def _candidates() -> list:
    """Where libwgml.so is looked for, in order: $WGML_LIBRARY, next to this package, the
    source tree's build directories (python/wgml -> ../../build)."""
    out = []
    env = os.environ.get("WGML_LIBRARY")
    if env:
        out.append(Path(env))
    here = Path(__file__).resolve().parent
    out.append(here / LIB_NAME)
    root = here.parent.parent
    out.append(root / "build" / LIB_NAME)  # (not build-asan: an ASan library needs its runtime preloaded)
    return out


def _load() -> ctypes.CDLL:
    tried = []
    for p in _candidates():
        if p.is_file():
            return ctypes.CDLL(str(p))
        tried.append(str(p))
    raise OSError("wgml: %s not found (tried %s); build it with `bash scripts/build.sh build` or set WGML_LIBRARY"
                  % (LIB_NAME, ", ".join(tried)))


lib = _load()
path = getattr(lib, "_name", LIB_NAME)

# ---- structs mirrored from the public headers (same field order and types; tests/py/test_python_abi.py
# compares each with the C compiler's layout) ----


class CtxOptions(Structure):
    _fields_ = [("adapter", c_char_p), ("poison_outputs", c_int), ("timeout_s", c_double), ("verbose", c_int),
                ("checked_shaders", c_int)]


class DeviceInfoC(Structure):
    _fields_ = [("adapter", c_char * 256), ("vendor", c_char * 128), ("architecture", c_char * 128),
                ("driver", c_char * 256), ("backend", c_char * 32), ("type", c_char * 32), ("wgpu_version", c_uint32),
                ("max_storage_binding", c_uint64), ("max_buffer_size", c_uint64), ("max_workgroup_storage", c_uint32),
                ("max_invocations", c_uint32), ("max_workgroup_size_x", c_uint32), ("max_workgroups_per_dim", c_uint32),
                ("max_storage_buffers_per_stage", c_uint32), ("min_storage_offset_align", c_uint32),
                ("min_uniform_offset_align", c_uint32), ("has_f16", c_int), ("has_subgroups", c_int),
                ("has_timestamps", c_int), ("has_f32_atomics", c_int), ("subgroup_min", c_uint32),
                ("subgroup_max", c_uint32)]


class MemoryStats(Structure):
    _fields_ = [("in_use", c_uint64), ("pool_idle", c_uint64), ("peak", c_uint64)]


class LlamaConfig(Structure):
    _fields_ = [("n_vocab", c_int64), ("n_embd", c_int64), ("n_layer", c_int64), ("n_ff", c_int64),
                ("n_head", c_int64), ("n_head_kv", c_int64), ("head_dim", c_int64), ("n_ctx_train", c_int64),
                ("n_ctx", c_int64), ("rope_base", c_float), ("rms_eps", c_float), ("tied_output", c_int),
                ("tok_embd_type", c_uint32), ("kv_f16", c_int)]


class ModelOptions(Structure):
    _fields_ = [("n_ctx", c_int64), ("kv_type", c_int)]


class Sampler(Structure):
    _fields_ = [("temperature", c_float), ("top_k", c_int), ("top_p", c_float)]


class GenOptions(Structure):
    _fields_ = [("max_tokens", c_int), ("sampler", Sampler), ("seed", c_uint64), ("decode_batch", c_int)]


class GenStats(Structure):
    _fields_ = [("prompt_tokens", c_size_t), ("generated_tokens", c_size_t), ("decode_steps", c_size_t),
                ("prefill_s", c_double), ("decode_s", c_double), ("prefill_wall_s", c_double),
                ("decode_wall_s", c_double), ("stopped", c_int), ("decode_submits", c_uint64)]


class TrainConfig(Structure):
    _fields_ = [("mode", c_int), ("lora_rank", c_int), ("lora_alpha", c_float), ("targets", c_uint),
                ("batch", c_int), ("seq_len", c_int), ("lr", c_float), ("weight_decay", c_float), ("beta1", c_float),
                ("beta2", c_float), ("eps", c_float), ("clip_norm", c_float), ("seed", c_uint64),
                ("grad_accum", c_int)]


class AdamWConfig(Structure):
    _fields_ = [("lr", c_double), ("beta1", c_double), ("beta2", c_double), ("eps", c_double),
                ("weight_decay", c_double), ("max_grad_norm", c_double), ("capacity", c_int64),
                ("momentum", c_double)]


class CeOptions(Structure):
    _fields_ = [("grad_scale", c_void_p), ("status", c_void_p)]


class Lora(Structure):
    _fields_ = [("a", c_void_p), ("b", c_void_p), ("n", c_int64), ("k", c_int64), ("r", c_int64), ("scale", c_float)]


TEXT_FN = ctypes.CFUNCTYPE(c_int, c_void_p, POINTER(c_char), c_size_t)

P = c_void_p  # every opaque handle (ctx, graph, tensor, model, trainer, optimizer)
I64P = POINTER(c_int64)
IP = POINTER(c_int)
st = c_int  # wgml_status

_PROTOS = {
    # context
    "wgml_ctx_create": (st, [POINTER(CtxOptions), POINTER(P)]),
    "wgml_ctx_destroy": (None, [P]),
    "wgml_last_error": (c_char_p, [P]),
    "wgml_last_status": (st, [P]),
    "wgml_clear_error": (None, [P]),
    "wgml_status_name": (c_char_p, [st]),
    "wgml_create_error": (c_char_p, []),
    "wgml_device_get_info": (None, [P, POINTER(DeviceInfoC)]),
    "wgml_submit_count": (c_uint64, [P]),
    "wgml_read_bytes": (c_uint64, [P]),
    "wgml_memory_get": (None, [P, POINTER(MemoryStats)]),
    # graphs
    "wgml_eager": (P, [P]),
    "wgml_sync": (st, [P]),
    "wgml_graph_new": (P, [P]),
    "wgml_graph_free": (None, [P]),
    "wgml_graph_keep": (st, [P, P]),
    "wgml_graph_compile": (st, [P]),
    "wgml_graph_run": (st, [P]),
    "wgml_graph_run_timed": (st, [P, POINTER(c_double)]),
    "wgml_graph_dispatch_count": (c_size_t, [P]),
    "wgml_graph_arena_bytes": (c_uint64, [P]),
    # tensors
    "wgml_tensor_new": (P, [P, c_int, c_int, I64P]),
    "wgml_tensor_write": (st, [P, c_void_p, c_size_t]),
    "wgml_tensor_read": (st, [P, c_void_p, c_size_t]),
    "wgml_tensor_free": (None, [P]),
    "wgml_reshape": (P, [P, P, c_int, I64P]),
    "wgml_tensor_view": (P, [P, c_int64, c_int, I64P]),
    "wgml_tensor_dtype": (c_int, [P]),
    "wgml_tensor_rank": (c_int, [P]),
    "wgml_tensor_dim": (c_int64, [P, c_int]),
    "wgml_tensor_numel": (c_int64, [P]),
    "wgml_tensor_nbytes": (c_size_t, [P]),
    "wgml_full": (P, [P, c_int, c_int, I64P, c_double]),
    "wgml_fill": (st, [P, P, c_double]),
    "wgml_full_like": (P, [P, P, c_double]),
    # matmuls
    "wgml_mm": (P, [P, P, P]),
    "wgml_bmm": (P, [P, P, P]),
    "wgml_linear": (P, [P, P, P, P]),
    "wgml_addmm": (P, [P, P, P, P, c_float, c_float]),
    "wgml_matmul": (P, [P, P, P, c_int, c_int]),
    "wgml_linear_dw": (st, [P, P, P, P, c_int]),
    # reductions, norms
    "wgml_sum": (P, [P, P, IP, c_int, c_int]),
    "wgml_mean": (P, [P, P, IP, c_int, c_int]),
    "wgml_amax": (P, [P, P, IP, c_int, c_int]),
    "wgml_argmax": (P, [P, P, c_int, c_int]),
    "wgml_softmax": (P, [P, P, c_int]),
    "wgml_log_softmax": (P, [P, P, c_int]),
    "wgml_rms_norm": (P, [P, P, P, c_float]),
    "wgml_layer_norm": (P, [P, P, P, P, c_float, POINTER(P), POINTER(P)]),
    # index and shape
    "wgml_gather": (P, [P, P, c_int, P]),
    "wgml_embedding": (P, [P, P, P]),
    "wgml_index_select": (P, [P, P, c_int, P]),
    "wgml_slice": (P, [P, P, c_int, c_int64, c_int64, c_int64]),
    "wgml_cat": (P, [P, POINTER(P), c_int, c_int]),
    "wgml_permute": (P, [P, P, IP]),
    "wgml_transpose": (P, [P, P, c_int, c_int]),
    "wgml_expand_copy": (P, [P, P, c_int, I64P]),
    "wgml_clone": (P, [P, P]),
    # transformer
    "wgml_rope": (P, [P, P, P, c_float, c_int]),
    "wgml_sdpa": (P, [P, P, P, P, c_int, c_float]),
    # convolution
    "wgml_conv": (P, [P, P, P, P, c_int, I64P, I64P, I64P, c_int, I64P, c_int64]),
    # elementwise
    "wgml_binary": (P, [P, c_int, P, P, c_float]),
    "wgml_binary_scalar": (P, [P, c_int, P, c_float, c_float]),
    "wgml_unary": (P, [P, c_int, P]),
    "wgml_unary_op_name": (c_char_p, [c_int]),
    "wgml_binary_op_name": (c_char_p, [c_int]),
    "wgml_compare_op_name": (c_char_p, [c_int]),
    "wgml_clamp": (P, [P, P, c_float, c_float]),
    "wgml_compare": (P, [P, c_int, P, P]),
    "wgml_compare_scalar": (P, [P, c_int, P, c_float]),
    "wgml_logical_not": (P, [P, P]),
    "wgml_logical_and": (P, [P, P, P]),
    "wgml_logical_or": (P, [P, P, P]),
    "wgml_where": (P, [P, P, P, P]),
    # training ops, autograd, AdamW, LoRA
    "wgml_cross_entropy_ex": (P, [P, P, P, POINTER(CeOptions), POINTER(P)]),
    "wgml_tensor_set_trainable": (st, [P, c_int]),
    "wgml_tensor_set_grad": (st, [P, P, c_int]),
    "wgml_backward": (st, [P, P, c_float]),
    "wgml_tensor_grad": (P, [P]),
    "wgml_adamw_defaults": (AdamWConfig, []),
    "wgml_adamw_padded": (c_int64, [c_int64]),
    "wgml_adamw_new": (P, [P, POINTER(AdamWConfig)]),
    "wgml_adamw_free": (None, [P]),
    "wgml_adamw_param": (P, [P, c_int, I64P]),
    "wgml_adamw_grad": (P, [P, P]),
    "wgml_adamw_step": (st, [P, P]),
    "wgml_adamw_zero_grad": (st, [P, P]),
    "wgml_adamw_set_lr": (st, [P, c_double]),
    "wgml_adamw_set_weight_decay": (st, [P, c_double]),
    "wgml_adamw_stats": (st, [P, I64P, I64P, POINTER(c_float)]),
    "wgml_lora_new": (POINTER(Lora), [P, c_int64, c_int64, c_int, c_float, c_uint64]),
    "wgml_lora_free": (None, [POINTER(Lora)]),
    "wgml_lora_apply": (P, [P, P, P, POINTER(Lora)]),
    "wgml_lora_linear": (P, [P, P, P, P, POINTER(Lora)]),
    # model, tokenizer, generation
    "wgml_model_load": (P, [P, c_char_p, POINTER(ModelOptions)]),
    "wgml_model_free": (None, [P]),
    "wgml_model_config": (POINTER(LlamaConfig), [P]),
    "wgml_model_tokenizer": (P, [P]),
    "wgml_model_reset": (None, [P]),
    "wgml_model_pos": (c_int64, [P]),
    "wgml_model_prefill": (st, [P, POINTER(c_int32), c_size_t, POINTER(c_float), POINTER(c_int32)]),
    "wgml_model_decode": (st, [P, c_int32, POINTER(c_float), POINTER(c_int32)]),
    "wgml_model_set_lora": (st, [P, c_int, c_float, c_int, POINTER(c_char_p), POINTER(POINTER(c_float))]),
    "wgml_generate": (st, [P, POINTER(c_int32), c_size_t, POINTER(GenOptions), TEXT_FN, c_void_p, POINTER(GenStats),
                           POINTER(POINTER(c_int32)), POINTER(c_size_t)]),
    "wgml_tokenizer_encode": (st, [P, c_char_p, c_size_t, c_int, POINTER(POINTER(c_int32)), POINTER(c_size_t)]),
    "wgml_tokenizer_decode": (st, [P, POINTER(c_int32), c_size_t, c_int, POINTER(c_void_p), POINTER(c_size_t)]),
    "wgml_tokenizer_vocab_size": (c_int32, [P]),
    "wgml_tokenizer_bos": (c_int32, [P]),
    "wgml_tokenizer_eos": (c_int32, [P]),
    "wgml_tokenizer_error": (c_char_p, [P]),
    "wgml_chat_apply": (st, [P, c_void_p, c_size_t, c_int, POINTER(c_void_p), POINTER(c_size_t)]),
    # trainer
    "wgml_train_defaults": (TrainConfig, []),
    "wgml_trainer_new": (P, [P, POINTER(TrainConfig)]),
    "wgml_trainer_free": (None, [P]),
    "wgml_trainer_step": (st, [P, POINTER(c_int32), POINTER(c_int32), c_float, POINTER(c_float)]),
    "wgml_trainer_pending": (c_int, [P]),
    "wgml_trainer_eval": (st, [P, POINTER(c_int32), POINTER(c_int32), POINTER(c_double), I64P]),
    "wgml_trainer_tensor_count": (c_int, [P]),
    "wgml_trainer_tensor_name": (c_char_p, [P, c_int]),
    "wgml_trainer_tensor_shape": (st, [P, c_int, IP, I64P]),
    "wgml_trainer_read_state": (st, [P, c_int, c_int, POINTER(c_float)]),
    "wgml_trainer_write_state": (st, [P, c_int, c_int, POINTER(c_float)]),
    "wgml_trainer_read_opt_state": (st, [P, c_void_p, POINTER(c_size_t)]),
    "wgml_trainer_write_opt_state": (st, [P, c_void_p, c_size_t]),
    "wgml_trainer_attach_lora": (st, [P]),
}

for _name, (_res, _args) in _PROTOS.items():
    _f = getattr(lib, _name)
    _f.restype = _res
    _f.argtypes = _args

libc = ctypes.CDLL(None)
libc.free.argtypes = [c_void_p]
libc.free.restype = None


def status_name(s: int) -> str:
    """The C name of a wgml_status ("WGML_ERR_SHAPE", ...)."""
    n: Optional[bytes] = lib.wgml_status_name(s)
    return n.decode() if n else "status %d" % s
