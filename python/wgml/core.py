"""Contexts, graphs and tensors: the core of the wgml Python API."""
from __future__ import annotations

import weakref
from ctypes import byref, c_double, c_float, c_int, c_int64, c_void_p
from dataclasses import dataclass
from typing import Optional, Sequence, Tuple, Union

import numpy as np

from . import _lib
from ._lib import lib

# wgml_status values (include/wgml.h)
_STATUS = ["WGML_OK", "WGML_ERR_ARG", "WGML_ERR_SHAPE", "WGML_ERR_DTYPE", "WGML_ERR_LIMIT", "WGML_ERR_OOM",
           "WGML_ERR_GPU", "WGML_ERR_DEVICE_LOST", "WGML_ERR_TIMEOUT", "WGML_ERR_NO_ADAPTER", "WGML_ERR_VERSION",
           "WGML_ERR_IO", "WGML_ERR_FORMAT", "WGML_ERR_UNSUPPORTED", "WGML_ERR_STATE"]

#: NumPy dtype of each wgml dtype (WGML_F32, WGML_I32, WGML_U32, WGML_BOOL), in enum order.
DTYPES = [np.dtype(np.float32), np.dtype(np.int32), np.dtype(np.uint32), np.dtype(np.bool_)]
DTypeLike = Union[str, type, np.dtype]


class _NoPickle:
    """wgml objects wrap device pointers of this process: pickling one (e.g. into another
    process) would carry dangling addresses, so it is refused."""

    def __reduce__(self):
        raise TypeError("wgml: a %s holds GPU state of this process and cannot be pickled; "
                        "make it in the process that uses it" % type(self).__name__)


class _Closable(_NoPickle):
    """A wgml object with close(): usable as a context manager (`with`), and closed when
    collected (errors then are swallowed: the interpreter may be shutting down)."""

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


class WgmlError(RuntimeError):
    """A failed wgml call. ``str(e)`` is wgml's own message (wgml_last_error: the op, the
    argument and the shapes); ``e.status`` the C status name (e.g. ``"WGML_ERR_SHAPE"``)."""

    def __init__(self, message: str, status: str = "WGML_ERR_ARG"):
        super().__init__(message)
        self.status = status


def _dtype_code(dtype: DTypeLike) -> int:
    d = np.dtype(dtype)
    for i, x in enumerate(DTYPES):
        if x == d:
            return i
    raise TypeError("wgml: dtype %s is not one of float32, int32, uint32, bool" % d)


def _shape_arg(shape: Sequence[int]):
    shape = tuple(int(s) for s in shape)
    return len(shape), (c_int64 * max(1, len(shape)))(*shape)


@dataclass(frozen=True)
class DeviceInfo:
    """What the adapter is and offers (wgml_device_get_info)."""
    adapter: str
    vendor: str
    architecture: str
    driver: str
    backend: str
    type: str
    wgpu_version: str
    max_storage_binding: int
    max_buffer_size: int
    has_f16: bool
    has_subgroups: bool
    has_timestamps: bool


class Context(_Closable):
    """A GPU device, its caches and the last error (wgml_ctx).

    ``Context()`` picks the adapter as wgml does ($WGML_ADAPTER, else a discrete GPU, then an
    integrated one, then a CPU adapter such as lavapipe). Use it as a context manager or call
    :meth:`close`; everything made on it (graphs, tensors, models, trainers) must not be used
    after that.
    """

    def __init__(self, adapter: Optional[str] = None, *, poison_outputs: bool = False, timeout_s: float = 0.0,
                 verbose: bool = False, checked_shaders: bool = False):
        opts = _lib.CtxOptions(adapter.encode() if adapter else None, int(poison_outputs), float(timeout_s),
                               int(verbose), int(checked_shaders))
        p = c_void_p()
        s = lib.wgml_ctx_create(byref(opts), byref(p))
        if s:
            raise WgmlError(lib.wgml_create_error().decode(errors="replace"), _STATUS[s] if 0 <= s < len(_STATUS) else str(s))
        self._ptr: Optional[int] = p.value
        self._children: "weakref.WeakSet" = weakref.WeakSet()
        self._eager = Graph(self, lib.wgml_eager(self._ptr), eager=True)

    # -- lifetime --
    @property
    def ptr(self) -> int:
        if not self._ptr:
            raise WgmlError("wgml: the context is closed", "WGML_ERR_STATE")
        return self._ptr

    def _adopt(self, child) -> None:
        self._children.add(child)

    def close(self) -> None:
        """Frees everything made on this context, then the device. Idempotent."""
        if not self._ptr:
            return
        for c in sorted(list(self._children), key=lambda c: -getattr(c, "_close_order", 0)):
            c.close()
        self._eager._ptr = None
        lib.wgml_ctx_destroy(self._ptr)
        self._ptr = None

    # -- errors --
    @property
    def last_error(self) -> str:
        """wgml_last_error: the message of the last error on this context ("" when none)."""
        return lib.wgml_last_error(self.ptr).decode(errors="replace")

    def _raise(self, what: str = "") -> "None":
        msg = self.last_error or (what + " failed")
        s = lib.wgml_last_status(self.ptr)
        lib.wgml_clear_error(self.ptr)
        raise WgmlError(msg, _STATUS[s] if 0 <= s < len(_STATUS) else str(s))

    def _check(self, s: int, what: str = "") -> None:
        if s:
            self._raise(what)

    def _out(self, p: Optional[int], graph: "Graph", what: str = "") -> "Tensor":
        if not p:
            self._raise(what)
        return Tensor(graph, p, owned=graph.eager)

    # -- device --
    @property
    def info(self) -> DeviceInfo:
        """The adapter, backend, driver and the limits and features obtained."""
        d = _lib.DeviceInfoC()
        lib.wgml_device_get_info(self.ptr, byref(d))
        v = d.wgpu_version
        return DeviceInfo(d.adapter.decode(errors="replace"), d.vendor.decode(errors="replace"),
                          d.architecture.decode(errors="replace"), d.driver.decode(errors="replace"),
                          d.backend.decode(errors="replace"), d.type.decode(errors="replace"),
                          "%d.%d.%d.%d" % (v >> 24, (v >> 16) & 255, (v >> 8) & 255, v & 255),
                          int(d.max_storage_binding), int(d.max_buffer_size), bool(d.has_f16),
                          bool(d.has_subgroups), bool(d.has_timestamps))

    @property
    def submit_count(self) -> int:
        """Queue submits made on this context so far."""
        return int(lib.wgml_submit_count(self.ptr))

    @property
    def read_bytes(self) -> int:
        """Bytes read back from the GPU on this context so far."""
        return int(lib.wgml_read_bytes(self.ptr))

    @property
    def memory(self) -> dict:
        """Device memory in this context's buffers, in bytes: in_use (every buffer not released),
        pool_idle (the part freed tensors left for reuse) and peak."""
        m = _lib.MemoryStats()
        lib.wgml_memory_get(self.ptr, byref(m))
        return {"in_use": int(m.in_use), "pool_idle": int(m.pool_idle), "peak": int(m.peak)}

    # -- graphs and tensors --
    @property
    def eager(self) -> "Graph":
        """The eager graph: ops run when a result is read (or on :meth:`sync`)."""
        return self._eager

    def graph(self) -> "Graph":
        """A new built graph: record ops, :meth:`Graph.compile`, then :meth:`Graph.run` many times."""
        p = lib.wgml_graph_new(self.ptr)
        if not p:
            self._raise("wgml_graph_new")
        return Graph(self, p, eager=False)

    def sync(self) -> None:
        """Runs what the eager graph recorded and waits for the device."""
        self._check(lib.wgml_sync(self.ptr), "wgml_sync")

    def tensor(self, array, dtype: Optional[DTypeLike] = None) -> "Tensor":
        """An eager tensor holding a copy of ``array`` (see :meth:`Graph.tensor`)."""
        return self._eager.tensor(array, dtype)

    def __repr__(self) -> str:
        return "<wgml.Context %s>" % (repr(self.info.adapter) if self._ptr else "closed")


class Graph(_Closable):
    """A list of recorded ops (wgml_graph): the context's eager graph, or a built graph.

    Every op is a method (``g.linear(x, w)``, ``g.softmax(x, -1)``, ...) that returns a new
    :class:`Tensor` of this graph; tensors also support ``+ - * / @`` and unary ``-``.
    In a built graph, ops are recorded (nothing runs) until :meth:`compile` and :meth:`run`.
    """

    _close_order = 1

    def __init__(self, ctx: Context, ptr: int, eager: bool):
        self.ctx = ctx
        self._ptr: Optional[int] = ptr
        self.eager = eager
        self._keep: list = []  # Python objects the C graph refers to (optimizers, LoRA)
        if not eager:
            ctx._adopt(self)

    @property
    def ptr(self) -> int:
        if not self._ptr or not self.ctx._ptr:
            raise WgmlError("wgml: the graph is freed", "WGML_ERR_STATE")
        return self._ptr

    def close(self) -> None:
        """Frees a built graph and its tensors (the eager graph belongs to the context)."""
        if self.eager or not self._ptr:
            return
        for k in self._keep:
            if hasattr(k, "close"):
                k.close()
        if self.ctx._ptr:
            lib.wgml_graph_free(self._ptr)
        self._ptr = None

    free = close

    def _t(self, p, what: str) -> "Tensor":
        return self.ctx._out(p, self, what)

    # -- tensors --
    def empty(self, shape: Sequence[int], dtype: DTypeLike = np.float32) -> "Tensor":
        """A persistent tensor of this graph (contents undefined until written)."""
        n, sh = _shape_arg(shape)
        return self._t(lib.wgml_tensor_new(self.ptr, _dtype_code(dtype), n, sh), "wgml_tensor_new")

    def tensor(self, array, dtype: Optional[DTypeLike] = None) -> "Tensor":
        """A persistent tensor of this graph holding a copy of ``array`` (its dtype, or
        ``dtype``: float32, int32, uint32 or bool; float64 and int64 arrays need an explicit
        ``dtype`` so that nothing is narrowed silently)."""
        a = np.asarray(array)
        if dtype is None:
            if a.dtype not in DTYPES:
                raise TypeError("wgml: an array of %s needs dtype= (wgml holds float32, int32, uint32, bool)" % a.dtype)
            dtype = a.dtype
        a = np.asarray(a, dtype=np.dtype(dtype), order="C")  # (ascontiguousarray makes 0-d arrays 1-d)
        # wgml_tensor_new makes rank >= 1; a rank-0 tensor comes from wgml_full
        t = self.full((), 0, a.dtype) if a.ndim == 0 else self.empty(a.shape, a.dtype)
        t.write(a)
        return t

    def full(self, shape: Sequence[int], value: float, dtype: DTypeLike = np.float32) -> "Tensor":
        n, sh = _shape_arg(shape)
        return self._t(lib.wgml_full(self.ptr, _dtype_code(dtype), n, sh, float(value)), "wgml_full")

    def zeros(self, shape: Sequence[int], dtype: DTypeLike = np.float32) -> "Tensor":
        return self.full(shape, 0.0, dtype)

    def ones(self, shape: Sequence[int], dtype: DTypeLike = np.float32) -> "Tensor":
        return self.full(shape, 1.0, dtype)

    def fill(self, t: "Tensor", value: float) -> None:
        """Writes value into every element of t (recorded in this graph)."""
        self.ctx._check(lib.wgml_fill(self.ptr, t.ptr, float(value)), "wgml_fill")

    # -- built graphs --
    def keep(self, *tensors: "Tensor") -> None:
        """Keeps tensors alive and readable at the end of every run."""
        for t in tensors:
            self.ctx._check(lib.wgml_graph_keep(self.ptr, t.ptr), "wgml_graph_keep")

    def compile(self) -> None:
        """Plans memory, creates pipelines and bind groups (once, after recording)."""
        self.ctx._check(lib.wgml_graph_compile(self.ptr), "wgml_graph_compile")

    def run(self, wait: bool = False) -> Optional[float]:
        """Submits the whole graph once. With ``wait``, waits and returns the run's GPU (or
        wall) seconds. The GIL is released while the call waits."""
        if wait:
            s = c_double()
            self.ctx._check(lib.wgml_graph_run_timed(self.ptr, byref(s)), "wgml_graph_run_timed")
            return s.value
        self.ctx._check(lib.wgml_graph_run(self.ptr), "wgml_graph_run")
        return None

    @property
    def dispatch_count(self) -> int:
        return int(lib.wgml_graph_dispatch_count(self.ptr))

    @property
    def arena_bytes(self) -> int:
        return int(lib.wgml_graph_arena_bytes(self.ptr))

    # -- autograd --
    def backward(self, loss: "Tensor", scale: float = 1.0) -> None:
        """Records the backward pass of the one-element ``loss`` (built graphs)."""
        self.ctx._check(lib.wgml_backward(self.ptr, loss.ptr, float(scale)), "wgml_backward")

    def adamw(self, lr: float = 1e-3, betas: Tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
              weight_decay: float = 1e-2, max_grad_norm: float = 0.0, capacity: int = 1 << 16) -> "AdamW":
        """A multi-tensor AdamW optimizer whose buffers live in this graph."""
        return AdamW(self, lr, betas, eps, weight_decay, max_grad_norm, capacity)

    def lora(self, n: int, k: int, r: int, alpha: float, seed: int = 0) -> "LoRA":
        """A LoRA adapter of a linear W[n, k]: A [r, k] (PyTorch's init from seed), B [n, r] = 0."""
        return LoRA(self, n, k, r, alpha, seed)

    # -- ops --
    def mm(self, a: "Tensor", b: "Tensor") -> "Tensor":
        """a[M,K] · b[K,N]."""
        return self._t(lib.wgml_mm(self.ptr, a.ptr, b.ptr), "wgml_mm")

    def bmm(self, a: "Tensor", b: "Tensor") -> "Tensor":
        """a[B,M,K] · b[B,K,N]."""
        return self._t(lib.wgml_bmm(self.ptr, a.ptr, b.ptr), "wgml_bmm")

    def linear(self, x: "Tensor", w: "Tensor", bias: Optional["Tensor"] = None) -> "Tensor":
        """x[..., K] · w[N, K]ᵀ (+ bias[N])."""
        return self._t(lib.wgml_linear(self.ptr, x.ptr, w.ptr, bias.ptr if bias else None), "wgml_linear")

    def addmm(self, c: "Tensor", a: "Tensor", b: "Tensor", beta: float = 1.0, alpha: float = 1.0) -> "Tensor":
        """beta·c + alpha·(a · b)."""
        return self._t(lib.wgml_addmm(self.ptr, c.ptr, a.ptr, b.ptr, beta, alpha), "wgml_addmm")

    def matmul(self, a: "Tensor", b: "Tensor", trans_a: bool = False, trans_b: bool = False) -> "Tensor":
        """The general product with transposed operands (rank 2 or 3)."""
        return self._t(lib.wgml_matmul(self.ptr, a.ptr, b.ptr, int(trans_a), int(trans_b)), "wgml_matmul")

    def _reduce(self, fn, name, x, dims, keepdim):
        dims = [] if dims is None else ([dims] if isinstance(dims, int) else list(dims))
        arr = (c_int * max(1, len(dims)))(*dims)
        return self._t(fn(self.ptr, x.ptr, arr, len(dims), int(keepdim)), name)

    def sum(self, x: "Tensor", dims: Union[None, int, Sequence[int]] = None, keepdim: bool = False) -> "Tensor":
        """Σ over dims (all when None)."""
        return self._reduce(lib.wgml_sum, "wgml_sum", x, dims, keepdim)

    def mean(self, x: "Tensor", dims: Union[None, int, Sequence[int]] = None, keepdim: bool = False) -> "Tensor":
        return self._reduce(lib.wgml_mean, "wgml_mean", x, dims, keepdim)

    def amax(self, x: "Tensor", dims: Union[None, int, Sequence[int]] = None, keepdim: bool = False) -> "Tensor":
        return self._reduce(lib.wgml_amax, "wgml_amax", x, dims, keepdim)

    def argmax(self, x: "Tensor", dim: int, keepdim: bool = False) -> "Tensor":
        return self._t(lib.wgml_argmax(self.ptr, x.ptr, dim, int(keepdim)), "wgml_argmax")

    def softmax(self, x: "Tensor", dim: int = -1) -> "Tensor":
        return self._t(lib.wgml_softmax(self.ptr, x.ptr, dim), "wgml_softmax")

    def log_softmax(self, x: "Tensor", dim: int = -1) -> "Tensor":
        return self._t(lib.wgml_log_softmax(self.ptr, x.ptr, dim), "wgml_log_softmax")

    def rms_norm(self, x: "Tensor", w: Optional["Tensor"] = None, eps: float = 1e-5) -> "Tensor":
        return self._t(lib.wgml_rms_norm(self.ptr, x.ptr, w.ptr if w else None, eps), "wgml_rms_norm")

    def layer_norm(self, x: "Tensor", w: Optional["Tensor"] = None, b: Optional["Tensor"] = None,
                   eps: float = 1e-5) -> "Tensor":
        return self._t(lib.wgml_layer_norm(self.ptr, x.ptr, w.ptr if w else None, b.ptr if b else None, eps, None,
                                           None), "wgml_layer_norm")

    def gather(self, x: "Tensor", dim: int, index: "Tensor") -> "Tensor":
        return self._t(lib.wgml_gather(self.ptr, x.ptr, dim, index.ptr), "wgml_gather")

    def embedding(self, weight: "Tensor", idx: "Tensor") -> "Tensor":
        return self._t(lib.wgml_embedding(self.ptr, weight.ptr, idx.ptr), "wgml_embedding")

    def index_select(self, x: "Tensor", dim: int, index: "Tensor") -> "Tensor":
        return self._t(lib.wgml_index_select(self.ptr, x.ptr, dim, index.ptr), "wgml_index_select")

    def slice(self, x: "Tensor", dim: int, start: int = 0, end: Optional[int] = None, step: int = 1) -> "Tensor":
        end = (1 << 63) - 1 if end is None else end
        return self._t(lib.wgml_slice(self.ptr, x.ptr, dim, start, end, step), "wgml_slice")

    def cat(self, tensors: Sequence["Tensor"], dim: int = 0) -> "Tensor":
        arr = (c_void_p * len(tensors))(*[t.ptr for t in tensors])
        return self._t(lib.wgml_cat(self.ptr, arr, len(tensors), dim), "wgml_cat")

    def permute(self, x: "Tensor", dims: Sequence[int]) -> "Tensor":
        if len(dims) != x.rank:
            raise WgmlError("permute: %d dims given for a rank-%d tensor" % (len(dims), x.rank), "WGML_ERR_ARG")
        return self._t(lib.wgml_permute(self.ptr, x.ptr, (c_int * len(dims))(*dims)), "wgml_permute")

    def transpose(self, x: "Tensor", d0: int, d1: int) -> "Tensor":
        return self._t(lib.wgml_transpose(self.ptr, x.ptr, d0, d1), "wgml_transpose")

    def expand(self, x: "Tensor", shape: Sequence[int]) -> "Tensor":
        """x broadcast to shape (a copy; -1 keeps x's size)."""
        n, sh = _shape_arg(shape)
        return self._t(lib.wgml_expand_copy(self.ptr, x.ptr, n, sh), "wgml_expand_copy")

    def clone(self, x: "Tensor") -> "Tensor":
        return self._t(lib.wgml_clone(self.ptr, x.ptr), "wgml_clone")

    def reshape(self, x: "Tensor", shape: Sequence[int]) -> "Tensor":
        """The same elements in a new shape (a view)."""
        n, sh = _shape_arg(shape)
        return self._t(lib.wgml_reshape(self.ptr, x.ptr, n, sh), "wgml_reshape")

    def rope(self, x: "Tensor", positions: "Tensor", theta: float = 10000.0, interleaved: bool = False) -> "Tensor":
        """Rotary embedding of x [B, S, H, D] at positions i32 [S] or [B, S]."""
        return self._t(lib.wgml_rope(self.ptr, x.ptr, positions.ptr, theta, int(interleaved)), "wgml_rope")

    def sdpa(self, q: "Tensor", k: "Tensor", v: "Tensor", causal: bool = True, scale: float = 0.0) -> "Tensor":
        """Scaled dot-product attention, q [B, Hq, S, D], k and v [B, Hkv, S, D]."""
        return self._t(lib.wgml_sdpa(self.ptr, q.ptr, k.ptr, v.ptr, int(causal), scale), "wgml_sdpa")

    def conv(self, x: "Tensor", w: "Tensor", bias: Optional["Tensor"] = None, stride: Union[int, Sequence[int]] = 1,
             padding: Union[int, Sequence[int]] = 0, dilation: Union[int, Sequence[int]] = 1, groups: int = 1,
             transposed: bool = False, output_padding: Union[int, Sequence[int]] = 0) -> "Tensor":
        """PyTorch's conv{1,2,3}d, or conv_transpose{1,2,3}d with ``transposed``: x [N, C, in...] or
        [C, in...], w [Cout, C/groups, k...] (transposed: [C, Cout/groups, k...]), bias [Cout]; the
        spatial dims are w's rank - 2, and an int applies to each of them."""
        nd = w.rank - 2

        def per_dim(v, what):
            v = [int(v)] * max(nd, 1) if isinstance(v, int) else [int(e) for e in v]
            if len(v) != nd:
                raise WgmlError("conv: %s has %d values for %d spatial dims" % (what, len(v), nd), "WGML_ERR_ARG")
            return (c_int64 * max(nd, 1))(*v)

        args = [per_dim(v, n) for v, n in ((stride, "stride"), (padding, "padding"), (dilation, "dilation"),
                                           (output_padding, "output_padding"))]
        return self._t(lib.wgml_conv(self.ptr, x.ptr, w.ptr, bias.ptr if bias else None, nd, args[0], args[1], args[2],
                                     int(transposed), args[3], int(groups)), "wgml_conv")

    def binary(self, op: str, a: "Tensor", b: Union["Tensor", float], alpha: float = 1.0) -> "Tensor":
        """a (op) b with broadcasting; op one of BINARY_OPS (add, sub, mul, div, minimum, maximum, pow,
        div_trunc, div_floor); b may be a number."""
        code = BINARY_OPS.index(op)
        if isinstance(b, Tensor):
            return self._t(lib.wgml_binary(self.ptr, code, a.ptr, b.ptr, alpha), "wgml_" + op)
        return self._t(lib.wgml_binary_scalar(self.ptr, code, a.ptr, float(b), alpha), "wgml_%s_scalar" % op)

    def add(self, a: "Tensor", b: Union["Tensor", float], alpha: float = 1.0) -> "Tensor":
        return self.binary("add", a, b, alpha)

    def sub(self, a: "Tensor", b: Union["Tensor", float], alpha: float = 1.0) -> "Tensor":
        return self.binary("sub", a, b, alpha)

    def mul(self, a: "Tensor", b: Union["Tensor", float]) -> "Tensor":
        return self.binary("mul", a, b)

    def div(self, a: "Tensor", b: Union["Tensor", float]) -> "Tensor":
        return self.binary("div", a, b)

    def unary(self, op: str, x: "Tensor") -> "Tensor":
        """f(x) for op one of UNARY_OPS (relu, sigmoid, ..., expm1); each is also a method (g.relu(x))."""
        return self._t(lib.wgml_unary(self.ptr, UNARY_OPS.index(op), x.ptr), "wgml_" + op)

    def clamp(self, x: "Tensor", lo: float, hi: float) -> "Tensor":
        return self._t(lib.wgml_clamp(self.ptr, x.ptr, lo, hi), "wgml_clamp")

    def compare(self, op: str, a: "Tensor", b: Union["Tensor", float]) -> "Tensor":
        """bool a (op) b, op one of eq, ne, lt, le, gt, ge."""
        code = COMPARE_OPS.index(op)
        if isinstance(b, Tensor):
            return self._t(lib.wgml_compare(self.ptr, code, a.ptr, b.ptr), "wgml_" + op)
        return self._t(lib.wgml_compare_scalar(self.ptr, code, a.ptr, float(b)), "wgml_%s_scalar" % op)

    def logical_not(self, a: "Tensor") -> "Tensor":
        return self._t(lib.wgml_logical_not(self.ptr, a.ptr), "wgml_logical_not")

    def logical_and(self, a: "Tensor", b: "Tensor") -> "Tensor":
        return self._t(lib.wgml_logical_and(self.ptr, a.ptr, b.ptr), "wgml_logical_and")

    def logical_or(self, a: "Tensor", b: "Tensor") -> "Tensor":
        return self._t(lib.wgml_logical_or(self.ptr, a.ptr, b.ptr), "wgml_logical_or")

    def where(self, cond: "Tensor", a: "Tensor", b: "Tensor") -> "Tensor":
        return self._t(lib.wgml_where(self.ptr, cond.ptr, a.ptr, b.ptr), "wgml_where")

    def cross_entropy(self, logits: "Tensor", labels: "Tensor") -> "Tensor":
        """Mean cross-entropy over the rows with a label in [0, V) (negative labels are
        ignored). The fused op is not an autograd rule: for a loss to differentiate, write
        ``-mean(gather(log_softmax(y), -1, labels))``."""
        return self._t(lib.wgml_cross_entropy_ex(self.ptr, logits.ptr, labels.ptr, None, None),
                       "wgml_cross_entropy")


def _op_names(name_of) -> list:
    """The op names of one of the library's op tables (include/wgml.h: WGML_UNARY_OPS and the
    like), by value: name_of(0), name_of(1), ... up to the first value without a row."""
    names = []
    while True:
        s = name_of(len(names))
        if not s:
            return names
        names.append(s.decode())


# The ops by their C enum value, read from the library: the table in include/wgml.h is the one
# list (tests/py/test_op_table.py checks these against it).
BINARY_OPS = _op_names(lib.wgml_binary_op_name)
UNARY_OPS = _op_names(lib.wgml_unary_op_name)
COMPARE_OPS = _op_names(lib.wgml_compare_op_name)


def _unary_method(op):
    def f(self, x: Tensor) -> Tensor:
        return self.unary(op, x)
    f.__name__ = op
    f.__doc__ = "Elementwise %s(x)." % op
    return f


for _op in UNARY_OPS:
    setattr(Graph, _op, _unary_method(_op))
def _binary_method(op):
    def f(self, a: Tensor, b: Union[Tensor, float]) -> Tensor:
        return self.binary(op, a, b)
    f.__name__ = op
    f.__doc__ = "Elementwise %s(a, b) with broadcasting; b may be a number." % op
    return f


for _op in ("minimum", "maximum", "pow"):
    setattr(Graph, _op, _binary_method(_op))


class Tensor(_NoPickle):
    """A shaped, typed region of GPU memory (wgml_tensor) in one graph.

    ``t.numpy()`` reads it (waiting for the work that produces it), ``t.write(a)`` writes a
    NumPy array of exactly its dtype and shape; both copy the raw bytes, so a round trip is
    bit-exact (NaN payloads included).
    """

    __array_priority__ = 1000

    def __init__(self, graph: Graph, ptr: int, owned: bool):
        self.graph = graph
        self._ptr: Optional[int] = ptr
        self._owned = owned

    @property
    def ptr(self) -> int:
        if not self._ptr:
            raise WgmlError("wgml: the tensor is freed", "WGML_ERR_STATE")
        self.graph.ptr  # the graph (and its context) must still exist
        return self._ptr

    def free(self) -> None:
        """Releases the tensor now (eager tensors; a built graph's live as long as the graph)."""
        if self._ptr and self._owned and self.graph._ptr and self.graph.ctx._ptr:
            lib.wgml_tensor_free(self._ptr)
        self._ptr = None

    def __del__(self):
        try:
            self.free()
        except Exception:
            pass

    @property
    def dtype(self) -> np.dtype:
        return DTYPES[lib.wgml_tensor_dtype(self.ptr)]

    @property
    def shape(self) -> Tuple[int, ...]:
        p = self.ptr
        return tuple(int(lib.wgml_tensor_dim(p, i)) for i in range(lib.wgml_tensor_rank(p)))

    @property
    def rank(self) -> int:
        return int(lib.wgml_tensor_rank(self.ptr))

    ndim = rank

    @property
    def numel(self) -> int:
        return int(lib.wgml_tensor_numel(self.ptr))

    size = numel

    @property
    def nbytes(self) -> int:
        return int(lib.wgml_tensor_nbytes(self.ptr))

    def write(self, array) -> None:
        """Copies ``array`` into the tensor. Its dtype and shape must be the tensor's
        (TypeError / ValueError otherwise): nothing is converted implicitly."""
        a = np.asarray(array)
        if a.dtype != self.dtype:
            raise TypeError("wgml: writing an array of %s into a %s tensor" % (a.dtype, self.dtype))
        if a.shape != self.shape:
            raise ValueError("wgml: writing an array of shape %s into a tensor of shape %s" % (a.shape, self.shape))
        a = np.ascontiguousarray(a)
        self.graph.ctx._check(lib.wgml_tensor_write(self.ptr, a.ctypes.data, a.nbytes), "wgml_tensor_write")

    def numpy(self) -> np.ndarray:
        """A new NumPy array with the tensor's contents (waits for the GPU; the GIL is released)."""
        out = np.empty(self.shape, self.dtype)
        self.graph.ctx._check(lib.wgml_tensor_read(self.ptr, out.ctypes.data, out.nbytes), "wgml_tensor_read")
        return out

    def __array__(self, dtype=None):
        a = self.numpy()
        return a if dtype is None else a.astype(dtype)

    def item(self) -> Union[float, int, bool]:
        return self.numpy().reshape(-1)[0].item()

    @property
    def grad(self) -> Optional["Tensor"]:
        """The gradient after :meth:`Graph.backward` (readable after each run), or None."""
        p = lib.wgml_tensor_grad(self.ptr)
        return Tensor(self.graph, p, owned=False) if p else None

    def requires_grad_(self, trainable: bool = True) -> "Tensor":
        """Marks this tensor of a built graph as a leaf whose gradient backward delivers."""
        self.graph.ctx._check(lib.wgml_tensor_set_trainable(self.ptr, int(trainable)), "wgml_tensor_set_trainable")
        return self

    def set_grad(self, grad: Optional["Tensor"], accumulate: bool = False) -> None:
        """Makes this parameter's gradient land in ``grad`` (e.g. an optimizer's gradient view)."""
        self.graph.ctx._check(lib.wgml_tensor_set_grad(self.ptr, grad.ptr if grad else None, int(accumulate)),
                              "wgml_tensor_set_grad")

    def reshape(self, *shape) -> "Tensor":
        if len(shape) == 1 and not isinstance(shape[0], int):
            shape = tuple(shape[0])
        return self.graph.reshape(self, shape)

    def view(self, offset: int, shape: Sequence[int]) -> "Tensor":
        """numel(shape) elements starting at element ``offset`` (no copy)."""
        n, sh = _shape_arg(shape)
        p = lib.wgml_tensor_view(self.ptr, offset, n, sh)
        return self.graph.ctx._out(p, self.graph, "wgml_tensor_view")

    @property
    def T(self) -> "Tensor":
        return self.graph.transpose(self, -2, -1)

    def __add__(self, o): return self.graph.add(self, o)
    def __radd__(self, o): return self.graph.add(self, o)
    def __sub__(self, o): return self.graph.sub(self, o)
    def __rsub__(self, o): return self.graph.add(self.graph.unary("neg", self), o)
    def __mul__(self, o): return self.graph.mul(self, o)
    def __rmul__(self, o): return self.graph.mul(self, o)
    def __truediv__(self, o): return self.graph.div(self, o)
    def __neg__(self): return self.graph.unary("neg", self)
    def __matmul__(self, o): return self.graph.matmul(self, o)

    def __repr__(self) -> str:
        if not self._ptr:
            return "<wgml.Tensor freed>"
        return "<wgml.Tensor %s %s%s>" % (self.dtype, list(self.shape), " eager" if self.graph.eager else "")


class AdamW(_NoPickle):
    """Multi-tensor AdamW (torch.optim.AdamW's update) over parameters made with
    :meth:`param`; its flat buffers are persistent tensors of the graph. Record the forward,
    :meth:`Graph.backward`, then :meth:`step`; each run of the graph updates every parameter."""

    def __init__(self, graph: Graph, lr: float, betas: Tuple[float, float], eps: float, weight_decay: float,
                 max_grad_norm: float, capacity: int):
        cfg = lib.wgml_adamw_defaults()
        cfg.lr, cfg.beta1, cfg.beta2, cfg.eps = lr, betas[0], betas[1], eps
        cfg.weight_decay, cfg.max_grad_norm, cfg.capacity = weight_decay, max_grad_norm, capacity
        self.graph = graph
        p = lib.wgml_adamw_new(graph.ptr, byref(cfg))
        if not p:
            graph.ctx._raise("wgml_adamw_new")
        self._ptr: Optional[int] = p
        graph._keep.append(self)

    def close(self) -> None:
        if self._ptr and self.graph.ctx._ptr:
            lib.wgml_adamw_free(self._ptr)
        self._ptr = None

    @property
    def ptr(self) -> int:
        if not self._ptr:
            raise WgmlError("wgml: the optimizer is freed", "WGML_ERR_STATE")
        return self._ptr

    def param(self, shape: Sequence[int], init=None) -> Tensor:
        """A new trainable parameter (a view into the flat buffer), its gradient routed into the
        optimizer's gradient buffer; ``init`` (an array) is written into it."""
        n, sh = _shape_arg(shape)
        p = lib.wgml_adamw_param(self.ptr, n, sh)
        if not p:
            self.graph.ctx._raise("wgml_adamw_param")
        t = Tensor(self.graph, p, owned=False)
        t.requires_grad_(True)
        t.set_grad(self.grad(t))
        if init is not None:
            t.write(np.asarray(init))
        return t

    def grad(self, param: Tensor) -> Tensor:
        """The gradient view of one of this optimizer's parameters."""
        p = lib.wgml_adamw_grad(self.ptr, param.ptr)
        if not p:
            self.graph.ctx._raise("wgml_adamw_grad")
        return Tensor(self.graph, p, owned=False)

    def step(self) -> None:
        """Records one AdamW step of every parameter into the graph."""
        self.graph.ctx._check(lib.wgml_adamw_step(self.graph.ptr, self.ptr), "wgml_adamw_step")

    def zero_grad(self) -> None:
        self.graph.ctx._check(lib.wgml_adamw_zero_grad(self.graph.ptr, self.ptr), "wgml_adamw_zero_grad")

    def set_lr(self, lr: float) -> None:
        self.graph.ctx._check(lib.wgml_adamw_set_lr(self.ptr, lr), "wgml_adamw_set_lr")

    def stats(self) -> Tuple[int, int, float]:
        """(steps taken, steps skipped as non-finite, last global gradient norm)."""
        a, b, c = c_int64(), c_int64(), c_float()
        self.graph.ctx._check(lib.wgml_adamw_stats(self.ptr, byref(a), byref(b), byref(c)), "wgml_adamw_stats")
        return a.value, b.value, c.value


class LoRA(_NoPickle):
    """A LoRA adapter (wgml_lora) of a linear W[n, k] in one graph: ``lora.a`` [r, k],
    ``lora.b`` [n, r]; ``lora(x, base_out)`` adds scale·(x·Aᵀ)·Bᵀ to base_out."""

    def __init__(self, graph: Graph, n: int, k: int, r: int, alpha: float, seed: int):
        self.graph = graph
        p = lib.wgml_lora_new(graph.ptr, n, k, r, alpha, seed)
        if not p:
            graph.ctx._raise("wgml_lora_new")
        self._p = p
        self.a = Tensor(graph, p.contents.a, owned=False)
        self.b = Tensor(graph, p.contents.b, owned=False)
        self.scale = float(p.contents.scale)
        graph._keep.append(self)

    def close(self) -> None:
        if self._p is not None and self.graph.ctx._ptr:
            lib.wgml_lora_free(self._p)  # the struct (and, eager, its tensors)
        self._p = None

    def __call__(self, x: Tensor, base_out: Tensor) -> Tensor:
        return self.graph._t(lib.wgml_lora_apply(self.graph.ptr, x.ptr, base_out.ptr, self._p), "wgml_lora_apply")

    def linear(self, x: Tensor, w: Tensor, bias: Optional[Tensor] = None) -> Tensor:
        return self.graph._t(lib.wgml_lora_linear(self.graph.ptr, x.ptr, w.ptr, bias.ptr if bias else None, self._p),
                             "wgml_lora_linear")
