"""Simple quantisers into GGUF's Q2_K, Q3_K, IQ4_NL and IQ4_XS blocks (PyPI gguf dequantises
these types but cannot quantise them), for tests that need such files made from a real model's
weights. Round-to-nearest with absmax scales: valid blocks of each layout, not llama.cpp's
quality (no importance weighting, no scale search); the tests compare wgml against a reference
that dequantises the same blocks, so the quantiser's error does not enter their tolerances.

    blocks = quantize(w, QT.Q3_K)   # w float32 [n, k] -> uint8 [n, row bytes]
"""
import numpy as np
from gguf import GGMLQuantizationType as QT

# the 16 values IQ4_NL and IQ4_XS index (the format's table)
IQ4_TABLE = np.array([-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113], dtype=np.float32)


def _half(v):
    """v rounded to fp16: (its two bytes [..., 2], its value as float32)."""
    h = np.asarray(v, dtype=np.float32).astype(np.float16)
    return h.view(np.uint8).reshape(h.shape + (2,)), h.astype(np.float32)


def _div(x, a):
    """x / a where a != 0, else 0 (a broadcast against x)."""
    a = np.broadcast_to(a, x.shape)
    return np.where(a != 0, x / np.where(a != 0, a, 1), 0)


def _pack2(codes):
    """The 2-bit fields of 256 codes [nb, 256] as Q2_K and Q3_K lay them out: value e = 128h + 32s
    + l sits at bits 2s, 2s + 1 of byte 32h + l (64 bytes)."""
    c = codes.reshape(-1, 2, 4, 32).astype(np.uint8)
    return (c[:, :, 0] | c[:, :, 1] << 2 | c[:, :, 2] << 4 | c[:, :, 3] << 6).reshape(-1, 64)


def _q2_k(w):
    g = w.reshape(-1, 16, 16)
    mn = np.minimum(g.min(-1), 0)
    scale = (g.max(-1) - mn) / 3
    dbytes, d = _half(scale.max(-1) / 15)
    mbytes, dmin = _half((-mn).max(-1) / 15)
    sc = np.clip(np.round(_div(scale, d[:, None])), 0, 15)
    m = np.clip(np.round(_div(-mn, dmin[:, None])), 0, 15)
    a, b = d[:, None] * sc, -(dmin[:, None] * m)
    codes = np.clip(np.round(_div(g - b[..., None], a[..., None])), 0, 3).reshape(-1, 256)
    scales = (sc.astype(np.uint8) | m.astype(np.uint8) << 4)
    return np.concatenate([scales, _pack2(codes), dbytes, mbytes], axis=1)


def _q3_k(w):
    g = w.reshape(-1, 16, 16)
    s = np.abs(g).max(-1) / 4
    dbytes, d = _half(s.max(-1) / 31)
    sc = np.clip(np.round(_div(s, d[:, None])), -32, 31)
    codes = np.clip(np.round(_div(g, (d[:, None] * sc)[..., None])), -4, 3).reshape(-1, 256).astype(np.int64)
    high = codes >= 0  # the third bit: set for 0..3, clear for -4..-1 (stored as code + 4)
    hm = high.reshape(-1, 8, 32).astype(np.uint8)
    hmask = np.zeros((codes.shape[0], 32), dtype=np.uint8)
    for b in range(8):
        hmask |= hm[:, b] << b
    u = (sc + 32).astype(np.uint8)  # [nb, 16], 0..63
    scales = np.zeros((codes.shape[0], 12), dtype=np.uint8)
    for i in range(16):
        scales[:, i % 8] |= (u[:, i] & 15) << (4 * (i // 8))
        scales[:, 8 + i % 4] |= (u[:, i] >> 4) << (2 * (i // 4))
    return np.concatenate([hmask, _pack2(np.where(high, codes, codes + 4)), scales, dbytes], axis=1)


def _iq4_index(x):
    """The table entry nearest to each x."""
    return np.abs(x[..., None] - IQ4_TABLE).argmin(-1).astype(np.uint8)


def _iq4_nibbles(idx):
    """32 indices a sub-block [..., 32] -> 16 bytes: low nibbles the first 16, high the rest."""
    return idx[..., :16] | idx[..., 16:] << 4


def _iq4_nl(w):
    g = w.reshape(-1, 32)
    dbytes, d = _half(np.abs(g).max(-1) / 127)
    return np.concatenate([dbytes, _iq4_nibbles(_iq4_index(_div(g, d[:, None])))], axis=1)


def _iq4_xs(w):
    g = w.reshape(-1, 8, 32)
    s = np.abs(g).max(-1) / 127
    dbytes, d = _half(s.max(-1) / 31)
    ls = np.clip(np.round(_div(s, d[:, None])) + 32, 0, 63).astype(np.uint16)
    a = d[:, None] * (ls.astype(np.float32) - 32)
    qs = _iq4_nibbles(_iq4_index(_div(g, a[..., None]))).reshape(-1, 128)
    hi = np.zeros(g.shape[0], dtype=np.uint16)
    for i in range(8):
        hi |= ((ls[:, i] >> 4) & 3) << (2 * i)
    lo = ((ls[:, 0::2] & 15) | (ls[:, 1::2] & 15) << 4).astype(np.uint8)
    return np.concatenate([dbytes, hi.view(np.uint8).reshape(-1, 2), lo, qs], axis=1)


QUANTIZERS = {QT.Q2_K: (256, _q2_k), QT.Q3_K: (256, _q3_k), QT.IQ4_NL: (32, _iq4_nl), QT.IQ4_XS: (256, _iq4_xs)}


def quantize(w, qt):
    """float32 [n, k] (k a multiple of the type's block) -> the blocks, uint8 [n, row bytes]."""
    be, fn = QUANTIZERS[qt]
    n, k = w.shape
    assert k % be == 0, (qt, k)
    return np.ascontiguousarray(fn(np.asarray(w, dtype=np.float32).reshape(-1, be)).reshape(n, -1))
