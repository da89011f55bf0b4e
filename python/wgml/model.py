"""Llama models from GGUF files: tokenizing, streaming generation, evaluation and the LoRA Trainer."""
from __future__ import annotations

import ctypes
import json
import os
import queue
import struct
import threading
from ctypes import POINTER, byref, c_char_p, c_double, c_float, c_int, c_int32, c_int64, c_size_t, c_void_p
from dataclasses import dataclass
from typing import Dict, Iterator, List, Optional, Sequence, Tuple, Union

import numpy as np

from . import _lib
from ._lib import lib, libc
from .core import Context, WgmlError, _Closable

TARGETS = ["q", "k", "v", "o", "gate", "up", "down"]  # bit i of wgml_train_config.targets
_TOK_ADD_BOS, _TOK_SPECIAL, _TOK_SKIP_SPECIAL = 1, 4, 8


def _i32(a) -> np.ndarray:
    return np.ascontiguousarray(a, dtype=np.int32)


def _ptr_i32(a: np.ndarray):
    return a.ctypes.data_as(POINTER(c_int32))


@dataclass(frozen=True)
class ModelConfig:
    """The hyper-parameters read from the GGUF file (wgml_llama_config)."""
    n_vocab: int
    n_embd: int
    n_layer: int
    n_ff: int
    n_head: int
    n_head_kv: int
    head_dim: int
    n_ctx_train: int
    n_ctx: int
    rope_base: float
    rms_eps: float
    tied_output: bool
    kv_f16: bool = False


@dataclass(frozen=True)
class EvalResult:
    """Mean next-token loss (nats), its perplexity and the number of tokens scored."""
    loss: float
    perplexity: float
    tokens: int


class Model(_Closable):
    """A Llama-architecture model loaded from a GGUF file onto the GPU (wgml_model)."""

    _close_order = 2

    def __init__(self, ctx: Context, ptr: int, path: str):
        self.ctx = ctx
        self.path = path
        self._ptr: Optional[int] = ptr
        self._eval_trainers: Dict[Tuple[int, int], "Trainer"] = {}
        self._adapter: Optional[Tuple[dict, Dict[str, np.ndarray]]] = None
        ctx._adopt(self)

    @classmethod
    def load(cls, path: Union[str, os.PathLike], ctx: Optional[Context] = None, n_ctx: int = 0,
             kv: str = "auto") -> "Model":
        """Loads a GGUF model (``n_ctx``: KV cache positions; 0: min(context length, 2048)).
        ``kv``: the KV cache's element type, "f32", "f16" (half the memory; k and v rounded to
        f16) or "auto" ($WGML_KV, else f32). Without ``ctx`` a new :class:`Context` is made and
        owned by the model."""
        kinds = {"auto": 0, "f32": 1, "f16": 2}
        if kv not in kinds:
            raise ValueError(f"Model.load: kv is {kv!r}; it takes one of {sorted(kinds)}")
        own = ctx is None
        ctx = ctx or Context()
        opts = _lib.ModelOptions(n_ctx, kinds[kv])
        p = lib.wgml_model_load(ctx.ptr, os.fspath(path).encode(), byref(opts))
        if not p:
            try:
                ctx._raise("wgml_model_load")
            finally:
                if own:
                    ctx.close()
        m = cls(ctx, p, os.fspath(path))
        m._own_ctx = ctx if own else None
        return m

    @property
    def ptr(self) -> int:
        if not self._ptr or not self.ctx._ptr:
            raise WgmlError("wgml: the model is freed", "WGML_ERR_STATE")
        return self._ptr

    def close(self) -> None:
        """Frees the model (and the trainers made for eval)."""
        if not self._ptr:
            return
        for t in self._eval_trainers.values():
            t.close()
        self._eval_trainers.clear()
        for c in list(self.ctx._children):
            if isinstance(c, Trainer) and c.model is self:
                c.close()
        if self.ctx._ptr:
            lib.wgml_model_free(self._ptr)
        self._ptr = None
        own = getattr(self, "_own_ctx", None)
        if own is not None:
            self._own_ctx = None
            own.close()

    @property
    def config(self) -> ModelConfig:
        c = lib.wgml_model_config(self.ptr).contents
        return ModelConfig(c.n_vocab, c.n_embd, c.n_layer, c.n_ff, c.n_head, c.n_head_kv, c.head_dim, c.n_ctx_train,
                           c.n_ctx, c.rope_base, c.rms_eps, bool(c.tied_output), bool(c.kv_f16))

    # -- tokenizer --
    def _tok(self) -> int:
        return lib.wgml_model_tokenizer(self.ptr)

    def tokenize(self, text: str, bos: bool = False, special: bool = False) -> np.ndarray:
        """Token ids (int32) of ``text`` (UTF-8), optionally with BOS, matching special-token text when asked."""
        b = text.encode()
        ids, n = POINTER(c_int32)(), c_size_t()
        flags = (_TOK_ADD_BOS if bos else 0) | (_TOK_SPECIAL if special else 0)
        if lib.wgml_tokenizer_encode(self._tok(), b, len(b), flags, byref(ids), byref(n)):
            raise WgmlError(lib.wgml_tokenizer_error(self._tok()).decode(errors="replace"), "WGML_ERR_ARG")
        try:
            return np.ctypeslib.as_array(ids, (n.value,)).copy() if n.value else np.zeros(0, np.int32)
        finally:
            libc.free(ids)

    def detokenize(self, ids: Sequence[int], skip_special: bool = False) -> str:
        a = _i32(ids)
        out, n = c_void_p(), c_size_t()
        if lib.wgml_tokenizer_decode(self._tok(), _ptr_i32(a), a.size, _TOK_SKIP_SPECIAL if skip_special else 0,
                                     byref(out), byref(n)):
            raise WgmlError(lib.wgml_tokenizer_error(self._tok()).decode(errors="replace"), "WGML_ERR_ARG")
        try:
            return ctypes.string_at(out.value, n.value).decode(errors="replace")
        finally:
            libc.free(out)

    @property
    def vocab_size(self) -> int:
        return int(lib.wgml_tokenizer_vocab_size(self._tok()))

    # -- generation --
    def generate(self, prompt: Union[str, Sequence[int]], max_tokens: int = 64, temperature: float = 0.0,
                 top_k: int = 0, top_p: float = 1.0, seed: int = 0, bos: bool = False) -> Iterator[str]:
        """Streams the continuation of ``prompt`` (text or token ids) as pieces of text, whole
        UTF-8 characters each, as the GPU produces them; greedy at temperature 0. The library
        runs in a worker thread (without the GIL); breaking out of the loop stops generation.
        Each call starts a fresh sequence (position 0)."""
        ids = _i32(self.tokenize(prompt, bos=bos, special=True) if isinstance(prompt, str) else prompt)
        if ids.size == 0:
            raise WgmlError("generate: the prompt is empty", "WGML_ERR_ARG")
        opts = _lib.GenOptions(int(max_tokens), _lib.Sampler(temperature, top_k, top_p), seed, 0)
        q: "queue.Queue" = queue.Queue()
        stop = threading.Event()

        def on_text(user, text, n):
            q.put(ctypes.string_at(text, n).decode(errors="replace"))
            return 1 if stop.is_set() else 0

        cb = _lib.TEXT_FN(on_text)
        result: List[int] = []
        ptr = self.ptr

        def work():
            lib.wgml_model_reset(ptr)
            s = lib.wgml_generate(ptr, _ptr_i32(ids), ids.size, byref(opts), cb, None, None, None, None)
            result.append(s)
            q.put(None)

        th = threading.Thread(target=work, name="wgml-generate", daemon=True)
        th.start()
        try:
            while True:
                piece = q.get()
                if piece is None:
                    break
                yield piece
        finally:
            stop.set()
            th.join()
        if result and result[0]:
            self.ctx._raise("wgml_generate")

    def generate_text(self, prompt: Union[str, Sequence[int]], **kw) -> str:
        """The whole continuation as one string (see :meth:`generate`)."""
        return "".join(self.generate(prompt, **kw))

    # -- adapters for generation and eval --
    def set_adapter(self, adapter: Optional[Dict[str, np.ndarray]], rank: int = 8, alpha: float = 16.0) -> None:
        """Applies a LoRA adapter (names as :meth:`Trainer.get_adapter` gives them) to
        generation and :meth:`eval`; None removes it."""
        if not adapter:
            self.ctx._check(lib.wgml_model_set_lora(self.ptr, rank, alpha, 0, None, None), "wgml_model_set_lora")
            self._adapter = None
            return
        names = list(adapter)
        arrs = [np.ascontiguousarray(adapter[k], dtype=np.float32) for k in names]
        cn = (c_char_p * len(names))(*[k.encode() for k in names])
        cd = (POINTER(c_float) * len(names))(*[a.ctypes.data_as(POINTER(c_float)) for a in arrs])
        self.ctx._check(lib.wgml_model_set_lora(self.ptr, rank, alpha, len(names), cn, cd), "wgml_model_set_lora")
        self._adapter = ({"rank": rank, "alpha": alpha}, {k: a.copy() for k, a in zip(names, arrs)})

    def eval(self, text: Union[str, Sequence[int]], seq_len: int = 64, batch: int = 1,
             max_tokens: Optional[int] = None) -> EvalResult:
        """Mean next-token loss and perplexity of ``text`` (or token ids): rows of seq_len + 1
        tokens as `wgml eval --all` cuts them, with the adapter set by :meth:`set_adapter`."""
        ids = _i32(self.tokenize(text) if isinstance(text, str) else text)
        key = (seq_len, batch)
        tr = self._eval_trainers.get(key)
        # no adapter: the default trainer's shape with B = 0 (it adds exactly nothing), so that
        # the evaluation's kernels are the ones a default fine-tune compiles, as `wgml eval` does
        rank, alpha, targets = None, None, None
        if self._adapter:
            rank, alpha = self._adapter[0]["rank"], self._adapter[0]["alpha"]
            names = self._adapter[1]
            targets = tuple(t for t, n in zip(TARGETS, _TARGET_NAMES) if any(".%s." % n in k for k in names))
        want = (rank, alpha, targets)
        if tr is None or tr._eval_key != want:
            if tr is not None:
                tr.close()
            tr = Trainer(self, rank=rank, alpha=alpha, targets=targets, batch=batch, seq_len=seq_len)
            tr._eval_key = want
            self._eval_trainers[key] = tr
        if self._adapter:
            tr.set_adapter(self._adapter[1])
        else:  # B = 0: the adapter adds exactly nothing
            tr.set_adapter({k: np.zeros_like(v) for k, v in tr.get_adapter().items()})
        return tr.evaluate(ids, max_tokens=max_tokens)


_TARGET_NAMES = ["attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"]


def rows_of(ids: np.ndarray, seq_len: int) -> np.ndarray:
    """Token ids cut into rows of seq_len + 1 (inputs are a row's first seq_len tokens, labels
    the same shifted by one), the rows `wgml finetune` makes of plain text."""
    ids = _i32(ids).reshape(-1)
    n = (ids.size - 1) // seq_len if ids.size > seq_len else 0
    if n < 1:
        raise WgmlError("data: %d tokens do not fill one row of %d + 1 tokens" % (ids.size, seq_len), "WGML_ERR_ARG")
    return np.stack([ids[r * seq_len: r * seq_len + seq_len + 1] for r in range(n)])


class Trainer(_Closable):
    """LoRA (or straight-through 4-bit) fine-tuning of a :class:`Model` (wgml_trainer): one
    optimizer step is one run of one built graph (forward, backward, AdamW).

    The defaults are ``wgml finetune``'s (wgml_train_defaults). ``targets`` names the
    projections that get adapters: any of q, k, v, o, gate, up, down (or "all").
    """

    _close_order = 3

    def __init__(self, model: Model, *, mode: str = "lora", rank: Optional[int] = None, alpha: Optional[float] = None,
                 targets: Union[str, Sequence[str], None] = None, batch: Optional[int] = None,
                 seq_len: Optional[int] = None, lr: Optional[float] = None, weight_decay: Optional[float] = None,
                 betas: Optional[Tuple[float, float]] = None, eps: Optional[float] = None,
                 clip_norm: Optional[float] = None, seed: Optional[int] = None, grad_accum: Optional[int] = None):
        cfg = lib.wgml_train_defaults()
        if mode not in ("lora", "ste"):
            raise WgmlError("trainer: mode is 'lora' or 'ste', not %r" % mode, "WGML_ERR_ARG")
        cfg.mode = 0 if mode == "lora" else 1
        if targets is not None:
            ts = TARGETS if targets == "all" else ([targets] if isinstance(targets, str) else list(targets))
            bits = 0
            for t in ts:
                if t not in TARGETS:
                    raise WgmlError("trainer: unknown target %r (one of %s)" % (t, ", ".join(TARGETS)), "WGML_ERR_ARG")
                bits |= 1 << TARGETS.index(t)
            cfg.targets = bits
        for name, v in (("lora_rank", rank), ("lora_alpha", alpha), ("batch", batch), ("seq_len", seq_len), ("lr", lr),
                        ("weight_decay", weight_decay), ("eps", eps), ("clip_norm", clip_norm), ("seed", seed),
                        ("grad_accum", grad_accum)):
            if v is not None:
                setattr(cfg, name, v)
        if betas is not None:
            cfg.beta1, cfg.beta2 = betas
        self.model = model
        self.ctx = model.ctx
        self.cfg = cfg
        p = lib.wgml_trainer_new(model.ptr, byref(cfg))
        if not p:
            self.ctx._raise("wgml_trainer_new")
        self._ptr: Optional[int] = p
        self.ctx._adopt(self)
        self.names = [lib.wgml_trainer_tensor_name(p, i).decode() for i in range(lib.wgml_trainer_tensor_count(p))]
        self.shapes = []
        for i in range(len(self.names)):
            r, sh = c_int(), (c_int64 * 4)()
            self.ctx._check(lib.wgml_trainer_tensor_shape(p, i, byref(r), sh), "wgml_trainer_tensor_shape")
            self.shapes.append(tuple(sh[: r.value]))
        self.steps = 0
        self._opt0 = self._read_opt()  # the optimizer's state before any step (reset_optimizer)

    @property
    def ptr(self) -> int:
        if not self._ptr or not self.ctx._ptr:
            raise WgmlError("wgml: the trainer is freed", "WGML_ERR_STATE")
        return self._ptr

    def close(self) -> None:
        if self._ptr and self.ctx._ptr:
            lib.wgml_trainer_free(self._ptr)
        self._ptr = None

    @property
    def batch(self) -> int:
        return int(self.cfg.batch)

    @property
    def seq_len(self) -> int:
        return int(self.cfg.seq_len)

    @property
    def pending(self) -> int:
        """Micro-batches accumulated since the last optimizer step (grad_accum > 1)."""
        return int(lib.wgml_trainer_pending(self.ptr))

    def _inputs(self, tokens, labels) -> Tuple[np.ndarray, np.ndarray]:
        B, L = self.batch, self.seq_len
        t = _i32(tokens)
        if labels is None:
            if t.shape != (B, L + 1):
                raise ValueError("trainer: tokens of shape %s; want [batch, seq_len + 1] = [%d, %d] (or give labels)"
                                 % (t.shape, B, L + 1))
            return np.ascontiguousarray(t[:, :L]), np.ascontiguousarray(t[:, 1:])
        lab = _i32(labels)
        if t.size != B * L or lab.size != B * L:
            raise ValueError("trainer: tokens %s and labels %s; want %d x %d = %d each" % (t.shape, lab.shape, B, L, B * L))
        return t, lab

    def step(self, tokens, labels=None, lr: Optional[float] = None) -> float:
        """One optimizer step (one micro-batch with grad_accum > 1) on a batch: ``tokens``
        [batch, seq_len + 1] (labels = tokens shifted by one), or ``tokens`` and ``labels``
        [batch, seq_len] each (a negative label is ignored). Returns the mean loss before the
        update. The GIL is released while the GPU runs the step."""
        t, lab = self._inputs(tokens, labels)
        loss = c_float()
        lr = float(self.cfg.lr if lr is None else lr)
        self.ctx._check(lib.wgml_trainer_step(self.ptr, _ptr_i32(t), _ptr_i32(lab), lr, byref(loss)), "wgml_trainer_step")
        self.steps += 1
        return float(loss.value)

    def eval_batch(self, tokens, labels=None) -> Tuple[float, int]:
        """(loss summed over the valid labels, their count) of one batch, without updating."""
        t, lab = self._inputs(tokens, labels)
        s, n = c_double(), c_int64()
        self.ctx._check(lib.wgml_trainer_eval(self.ptr, _ptr_i32(t), _ptr_i32(lab), byref(s), byref(n)),
                        "wgml_trainer_eval")
        return s.value, int(n.value)

    def evaluate(self, data: Union[str, np.ndarray], max_tokens: Optional[int] = None) -> EvalResult:
        """Loss and perplexity over text (or token ids, or rows [n, seq_len + 1]) in batches."""
        if isinstance(data, str):
            data = self.model.tokenize(data)
        a = _i32(data)
        rows = a if a.ndim == 2 else rows_of(a, self.seq_len)
        if max_tokens is not None:
            rows = rows[: max(1, -(-max_tokens // self.seq_len))]
        B, L = self.batch, self.seq_len
        total, n = 0.0, 0
        for r in range(0, len(rows), B):
            chunk = rows[r: r + B]
            tok = np.zeros((B, L), np.int32)
            lab = np.full((B, L), -100, np.int32)
            tok[: len(chunk)] = chunk[:, :L]
            lab[: len(chunk)] = chunk[:, 1:]
            s, k = self.eval_batch(tok, lab)
            total += s
            n += k
        loss = total / n if n else float("nan")
        return EvalResult(loss, float(np.exp(loss)), n)

    # -- state --
    def _rw(self, i: int, what: int, arr: Optional[np.ndarray] = None) -> Optional[np.ndarray]:
        if arr is None:
            out = np.empty(self.shapes[i], np.float32)
            self.ctx._check(lib.wgml_trainer_read_state(self.ptr, i, what, out.ctypes.data_as(POINTER(c_float))),
                            "wgml_trainer_read_state")
            return out
        self.ctx._check(lib.wgml_trainer_write_state(self.ptr, i, what, arr.ctypes.data_as(POINTER(c_float))),
                        "wgml_trainer_write_state")
        return None

    def get_state(self, what: str = "param") -> Dict[str, np.ndarray]:
        """The trainable tensors (``"param"``) or AdamW's ``"m"`` / ``"v"``, by name."""
        w = ("param", "m", "v").index(what)
        return {n: self._rw(i, w) for i, n in enumerate(self.names)}

    def set_state(self, arrays: Dict[str, np.ndarray], what: str = "param") -> None:
        """Writes named tensors (dtype float32, the trainer's shapes; all or some names)."""
        w = ("param", "m", "v").index(what)
        for k, a in arrays.items():
            if k not in self.names:
                raise KeyError("trainer: no tensor %r (have %s...)" % (k, ", ".join(self.names[:3])))
            i = self.names.index(k)
            a = np.asarray(a)
            if a.dtype != np.float32:
                raise TypeError("trainer: %s is %s, want float32" % (k, a.dtype))
            if a.shape != self.shapes[i]:
                raise ValueError("trainer: %s has shape %s, want %s" % (k, a.shape, self.shapes[i]))
            self._rw(i, w, np.ascontiguousarray(a))

    def get_adapter(self) -> Dict[str, np.ndarray]:
        """The adapter as NumPy arrays: ``"blk.<l>.<target>.lora_a"`` [r, K] and ``lora_b``
        [N, r] (the names of `wgml finetune`'s adapter.safetensors)."""
        return self.get_state("param")

    def set_adapter(self, arrays: Dict[str, np.ndarray]) -> None:
        """Replaces (some of) the adapter's tensors; the optimizer's moments are kept."""
        self.set_state(arrays, "param")

    def _read_opt(self) -> bytes:
        buf = ctypes.create_string_buffer(256)
        n = c_size_t(256)
        self.ctx._check(lib.wgml_trainer_read_opt_state(self.ptr, buf, byref(n)), "wgml_trainer_read_opt_state")
        return buf.raw[: n.value]

    def _write_opt(self, blob: bytes) -> None:
        buf = ctypes.create_string_buffer(blob, len(blob))
        self.ctx._check(lib.wgml_trainer_write_opt_state(self.ptr, buf, len(blob)), "wgml_trainer_write_opt_state")

    def reset_optimizer(self) -> None:
        """AdamW starts afresh: m = v = 0 and the step count 0 (the adapter is kept)."""
        for i, sh in enumerate(self.shapes):
            z = np.zeros(sh, np.float32)
            self._rw(i, 1, z)
            self._rw(i, 2, z)
        self._write_opt(self._opt0)

    def attach(self) -> None:
        """Makes the model's generation use this trainer's current adapter."""
        self.ctx._check(lib.wgml_trainer_attach_lora(self.ptr), "wgml_trainer_attach_lora")

    def config(self) -> dict:
        c = self.cfg
        return {"mode": "lora" if c.mode == 0 else "ste", "rank": c.lora_rank, "alpha": c.lora_alpha,
                "targets": [t for i, t in enumerate(TARGETS) if c.targets >> i & 1], "batch": c.batch,
                "seq_len": c.seq_len, "lr": c.lr, "weight_decay": c.weight_decay, "beta1": c.beta1, "beta2": c.beta2,
                "eps": c.eps, "clip_norm": c.clip_norm, "seed": c.seed, "grad_accum": c.grad_accum}

    # -- checkpoints --
    def save_checkpoint(self, path: Union[str, os.PathLike]) -> None:
        """Writes the trainable tensors, AdamW's m and v, the optimizer's state and the step
        count to one safetensors file, atomically (a temporary file, fsync, rename). Only at a
        step boundary (no pending micro-batches)."""
        if self.pending:
            raise WgmlError("trainer: %d micro-batches pending; save at a step boundary" % self.pending, "WGML_ERR_STATE")
        tensors = {}
        for what in ("param", "m", "v"):
            for k, a in self.get_state(what).items():
                tensors[k if what == "param" else "%s.%s" % (k, what)] = a
        meta = {"format": "wgml-python-checkpoint-1", "steps": str(self.steps), "config": json.dumps(self.config()),
                "opt_state": self._read_opt().hex(), "model": os.path.basename(self.model.path)}
        write_safetensors(path, tensors, meta)

    def load_checkpoint(self, path: Union[str, os.PathLike]) -> None:
        """Restores a checkpoint written by :meth:`save_checkpoint` for the same configuration
        (a different rank, targets or shape is refused, naming the difference)."""
        tensors, meta = read_safetensors(path)
        if meta.get("format") != "wgml-python-checkpoint-1":
            raise WgmlError("checkpoint %s: not a wgml Python checkpoint" % path, "WGML_ERR_FORMAT")
        cfg = json.loads(meta["config"])
        mine = self.config()
        for k in ("mode", "rank", "targets", "seq_len", "batch"):
            if cfg.get(k) != mine[k]:
                raise WgmlError("checkpoint mismatch: %s is %r in %s, %r here" % (k, cfg.get(k), path, mine[k]),
                                "WGML_ERR_FORMAT")
        for what in ("param", "m", "v"):
            part = {}
            for k in self.names:
                name = k if what == "param" else "%s.%s" % (k, what)
                if name not in tensors:
                    raise WgmlError("checkpoint %s: tensor %s is missing" % (path, name), "WGML_ERR_FORMAT")
                part[k] = tensors[name]
            self.set_state(part, what)
        self._write_opt(bytes.fromhex(meta["opt_state"]))
        self.steps = int(meta["steps"])

    def __repr__(self) -> str:
        c = self.config()
        return "<wgml.Trainer %s rank %d on %s, %d x %d tokens, %d tensors>" % (
            c["mode"], c["rank"], ",".join(c["targets"]), c["batch"], c["seq_len"], len(self.names))


def write_safetensors(path: Union[str, os.PathLike], tensors: Dict[str, np.ndarray], meta: Dict[str, str]) -> None:
    """F32 tensors (and string metadata) to a safetensors file, atomically."""
    header: dict = {"__metadata__": dict(meta)}
    at = 0
    blobs = []
    for k, a in tensors.items():
        b = np.ascontiguousarray(a, dtype="<f4").tobytes()
        header[k] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [at, at + len(b)]}
        at += len(b)
        blobs.append(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    path = os.fspath(path)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def read_safetensors(path: Union[str, os.PathLike]) -> Tuple[Dict[str, np.ndarray], Dict[str, str]]:
    """The F32 tensors and the metadata of a safetensors file (checked against its size)."""
    data = open(path, "rb").read()
    if len(data) < 8:
        raise WgmlError("%s: too short for a safetensors file" % path, "WGML_ERR_FORMAT")
    (n,) = struct.unpack("<Q", data[:8])
    if 8 + n > len(data):
        raise WgmlError("%s: header of %d bytes past the end of the file" % (path, n), "WGML_ERR_FORMAT")
    try:
        header = json.loads(data[8:8 + n])
    except ValueError as e:
        raise WgmlError("%s: bad header: %s" % (path, e), "WGML_ERR_FORMAT") from None
    meta = header.pop("__metadata__", {}) or {}
    buf = data[8 + n:]
    out = {}
    for k, info in header.items():
        b, e = info["data_offsets"]
        if info.get("dtype") != "F32" or not 0 <= b <= e <= len(buf) or e - b != 4 * int(np.prod(info["shape"])):
            raise WgmlError("%s: tensor %s has a bad entry %r" % (path, k, info), "WGML_ERR_FORMAT")
        out[k] = np.frombuffer(buf[b:e], "<f4").reshape(info["shape"]).copy()
    return out, meta
