"""ctypes binding of include/wgml-program.h for the ExecuTorch tests: load a .pte, set inputs from
numpy arrays (or CPU torch tensors), run once, read outputs back as numpy arrays. One wgml context
per process. Only numpy is imported.

    rt = Runtime(lib_path)             # libwgml.so of the build under test
    outs = rt.run(pte_bytes, inputs)   # list of numpy arrays, or raises ProgramError
"""
import ctypes
from ctypes import POINTER, Structure, c_char_p, c_double, c_int, c_int64, c_size_t, c_void_p

import numpy as np

MAX_RANK = 8
# wgml_program_dtype (ExecuTorch ScalarType numbering) -> numpy / torch
NP = {0: np.uint8, 1: np.int8, 2: np.int16, 3: np.int32, 4: np.int64, 5: np.float16, 6: np.float32, 7: np.float64,
      11: np.bool_}


class ProgramIO(Structure):
    _fields_ = [("dtype", c_int), ("rank", c_int), ("shape", c_int64 * MAX_RANK), ("numel", c_int64),
                ("nbytes", c_size_t)]


class CtxOptions(Structure):
    _fields_ = [("adapter", c_char_p), ("poison_outputs", c_int), ("timeout_s", c_double), ("verbose", c_int),
                ("checked_shaders", c_int)]


class TrainConfig(Structure):
    """wgml_program_train_config: optimizer 1 = SGD, 2 = AdamW."""
    _fields_ = [("optimizer", c_int), ("lr", c_double), ("beta1", c_double), ("beta2", c_double), ("eps", c_double),
                ("weight_decay", c_double), ("momentum", c_double), ("max_grad_norm", c_double), ("n_params", c_int),
                ("grad_outputs", POINTER(c_int)), ("param_constants", POINTER(c_int))]


SGD, ADAMW = 1, 2


def as_array(x, dtype):
    """x (a numpy array, or a CPU torch tensor) as a contiguous array of dtype."""
    if hasattr(x, "detach"):
        x = x.detach().cpu().numpy()
    return np.ascontiguousarray(np.asarray(x).astype(dtype))


class ProgramError(Exception):
    """wgml refused or failed a program; .stage is 'load', 'input', 'run' or 'output'."""

    def __init__(self, stage, msg):
        super().__init__(msg)
        self.stage = stage


class Runtime:
    def __init__(self, lib_path, poison=True):
        lib = ctypes.CDLL(str(lib_path))
        self.lib = lib
        lib.wgml_ctx_create.argtypes = [POINTER(CtxOptions), POINTER(c_void_p)]
        lib.wgml_ctx_destroy.argtypes = [c_void_p]
        lib.wgml_last_error.argtypes = [c_void_p]
        lib.wgml_last_error.restype = c_char_p
        lib.wgml_create_error.restype = c_char_p
        lib.wgml_program_load_bytes.argtypes = [c_void_p, c_void_p, c_size_t, c_char_p]
        lib.wgml_program_load_bytes.restype = c_void_p
        lib.wgml_program_free.argtypes = [c_void_p]
        for f in ("wgml_program_input_count", "wgml_program_output_count"):
            getattr(lib, f).argtypes = [c_void_p]
        for f in ("wgml_program_input_info", "wgml_program_output_info"):
            getattr(lib, f).argtypes = [c_void_p, c_int, POINTER(ProgramIO)]
        lib.wgml_program_set_input.argtypes = [c_void_p, c_int, c_void_p, c_size_t]
        lib.wgml_program_get_output.argtypes = [c_void_p, c_int, c_void_p, c_size_t]
        lib.wgml_program_run.argtypes = [c_void_p, POINTER(c_double)]
        lib.wgml_program_constant_count.argtypes = [c_void_p]
        lib.wgml_program_constant_info.argtypes = [c_void_p, c_int, POINTER(ProgramIO), POINTER(c_char_p)]
        lib.wgml_program_write_constant.argtypes = [c_void_p, c_int, c_void_p, c_size_t]
        lib.wgml_program_read_constant.argtypes = [c_void_p, c_int, c_void_p, c_size_t]
        lib.wgml_program_train_defaults.argtypes = [c_int]
        lib.wgml_program_train_defaults.restype = TrainConfig
        lib.wgml_program_load_training.argtypes = [c_void_p, c_void_p, c_size_t, c_char_p, POINTER(TrainConfig)]
        lib.wgml_program_load_training.restype = c_void_p
        lib.wgml_program_param_count.argtypes = [c_void_p]
        lib.wgml_program_param_info.argtypes = [c_void_p, c_int, POINTER(c_int), POINTER(c_int), POINTER(c_char_p)]
        lib.wgml_program_set_lr.argtypes = [c_void_p, c_double]
        lib.wgml_program_steps.argtypes = [c_void_p, POINTER(c_int64)]
        opts = CtxOptions(poison_outputs=1 if poison else 0)
        ctx = c_void_p()
        if lib.wgml_ctx_create(ctypes.byref(opts), ctypes.byref(ctx)) != 0:
            raise RuntimeError("wgml: no context: " + lib.wgml_create_error().decode())
        self.ctx = ctx

    def close(self):
        if self.ctx:
            self.lib.wgml_ctx_destroy(self.ctx)
            self.ctx = None

    def err(self):
        return self.lib.wgml_last_error(self.ctx).decode(errors="replace")

    def run(self, pte, inputs, runs=1):
        """Outputs (numpy arrays) of the program on inputs (arrays or tensors, in order)."""
        lib = self.lib
        buf = ctypes.create_string_buffer(bytes(pte), len(pte))
        p = lib.wgml_program_load_bytes(self.ctx, buf, len(pte), None)
        if not p:
            raise ProgramError("load", self.err())
        try:
            n_in = lib.wgml_program_input_count(p)
            if n_in != len(inputs):
                raise ProgramError("input", "the program takes %d inputs, %d given" % (n_in, len(inputs)))
            for i, x in enumerate(inputs):
                io = ProgramIO()
                lib.wgml_program_input_info(p, i, ctypes.byref(io))
                want = tuple(io.shape[:io.rank])
                if tuple(x.shape) != want:
                    raise ProgramError("input", "input %d: shape %s, the program takes %s" % (i, tuple(x.shape), want))
                a = as_array(x, NP[io.dtype])
                if lib.wgml_program_set_input(p, i, a.ctypes.data, a.nbytes) != 0:
                    raise ProgramError("input", self.err())
            t = c_double()
            for _ in range(runs):
                if lib.wgml_program_run(p, ctypes.byref(t)) != 0:
                    raise ProgramError("run", self.err())
            outs = []
            for i in range(lib.wgml_program_output_count(p)):
                io = ProgramIO()
                lib.wgml_program_output_info(p, i, ctypes.byref(io))
                a = np.empty(tuple(io.shape[:io.rank]), dtype=NP[io.dtype])
                if lib.wgml_program_get_output(p, i, a.ctypes.data, a.nbytes) != 0:
                    raise ProgramError("output", self.err())
                outs.append(a)
            self.last_seconds = t.value
            return outs
        finally:
            lib.wgml_program_free(p)


class Program:
    """A loaded program kept across runs (training loops): inputs, runs, outputs, constants.
    With optimizer=SGD or ADAMW it is loaded for training (wgml_program_load_training): every
    run() is the method and then one optimizer step on the GPU; the keyword arguments set the
    config's fields (lr, momentum, weight_decay, ..., grad_outputs, param_constants: lists)."""

    def __init__(self, rt, pte, optimizer=None, **train):
        self.rt, self.lib = rt, rt.lib
        self._buf = ctypes.create_string_buffer(bytes(pte), len(pte))
        if optimizer is None:
            self.p = self.lib.wgml_program_load_bytes(rt.ctx, self._buf, len(pte), None)
        else:
            cfg = self.lib.wgml_program_train_defaults(optimizer)
            keep = []
            for k, v in train.items():
                if k in ("grad_outputs", "param_constants"):
                    arr = (c_int * len(v))(*v)
                    keep.append(arr)
                    setattr(cfg, k, ctypes.cast(arr, POINTER(c_int)))
                    cfg.n_params = len(v)
                else:
                    setattr(cfg, k, v)
            self.p = self.lib.wgml_program_load_training(rt.ctx, self._buf, len(pte), None, ctypes.byref(cfg))
        if not self.p:
            raise ProgramError("load", rt.err())

    def close(self):
        if self.p:
            self.lib.wgml_program_free(self.p)
            self.p = None

    def set_input(self, i, x):
        io = ProgramIO()
        self.lib.wgml_program_input_info(self.p, i, ctypes.byref(io))
        a = as_array(x, NP[io.dtype])
        if self.lib.wgml_program_set_input(self.p, i, a.ctypes.data, a.nbytes) != 0:
            raise ProgramError("input", self.rt.err())

    def run(self):
        t = c_double()
        if self.lib.wgml_program_run(self.p, ctypes.byref(t)) != 0:
            raise ProgramError("run", self.rt.err())
        return t.value

    def output(self, i):
        io = ProgramIO()
        if self.lib.wgml_program_output_info(self.p, i, ctypes.byref(io)) != 0:
            raise ProgramError("output", self.rt.err())
        a = np.empty(tuple(io.shape[:io.rank]), dtype=NP[io.dtype])
        if self.lib.wgml_program_get_output(self.p, i, a.ctypes.data, a.nbytes) != 0:
            raise ProgramError("output", self.rt.err())
        return a

    def constants(self):
        """[(shape, numpy dtype, name)] of every constant, by index."""
        out = []
        for i in range(self.lib.wgml_program_constant_count(self.p)):
            io, name = ProgramIO(), c_char_p()
            self.lib.wgml_program_constant_info(self.p, i, ctypes.byref(io), ctypes.byref(name))
            out.append((tuple(io.shape[:io.rank]), NP.get(io.dtype), (name.value or b"").decode()))
        return out

    def write_constant(self, i, x):
        a = np.ascontiguousarray(np.asarray(x))
        if self.lib.wgml_program_write_constant(self.p, i, a.ctypes.data, a.nbytes) != 0:
            raise ProgramError("constant", self.rt.err())

    def read_constant(self, i):
        shape, dtype, _ = self.constants()[i]
        a = np.empty(shape, dtype=dtype)
        if self.lib.wgml_program_read_constant(self.p, i, a.ctypes.data, a.nbytes) != 0:
            raise ProgramError("constant", self.rt.err())
        return a

    def params(self):
        """[(constant index, gradient output index, name)] of a program loaded for training."""
        out = []
        for j in range(self.lib.wgml_program_param_count(self.p)):
            c, g, name = c_int(), c_int(), c_char_p()
            if self.lib.wgml_program_param_info(self.p, j, ctypes.byref(c), ctypes.byref(g), ctypes.byref(name)) != 0:
                raise ProgramError("param", self.rt.err())
            out.append((c.value, g.value, (name.value or b"").decode()))
        return out

    def set_lr(self, lr):
        if self.lib.wgml_program_set_lr(self.p, lr) != 0:
            raise ProgramError("param", self.rt.err())

    def steps(self):
        n = c_int64()
        if self.lib.wgml_program_steps(self.p, ctypes.byref(n)) != 0:
            raise ProgramError("param", self.rt.err())
        return n.value
