"""The peer side of bench/h200.sh: PyTorch on the same GPU, same shapes, timed with CUDA
events (median of repeated runs after a warm-up). Prints one line per measurement:
  peer <key> <value> <unit>
fp32 matmuls run with TF32 off (torch.backends.cuda.matmul.allow_tf32 = False), i.e. cuBLAS
plain fp32 (SGEMM)."""
import sys

import torch


def median_ms(fn, reps=20, warmup=5):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        torch.cuda.synchronize()
        times.append(a.elapsed_time(b))
    times.sort()
    return times[len(times) // 2]


def matmul(shapes):
    """shapes: (m, n, k, op) with op NN (a [M, K] times b [K, N]), NT (b stored [N, K],
    transposed) or TN (a stored [K, M], transposed), as wgml bench matmul --trans names them."""
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    for m, n, k, op in shapes:
        a = torch.randn(k, m, device="cuda").t() if op[0] == "T" else torch.randn(m, k, device="cuda")
        b = torch.randn(n, k, device="cuda").t() if op[1] == "T" else torch.randn(k, n, device="cuda")
        out = torch.empty(m, n, device="cuda")
        ms = median_ms(lambda: torch.mm(a, b, out=out))
        key = f"matmul_{m}x{n}x{k}" + ("" if op == "NN" else f":{op}")
        print(f"peer {key} {2.0 * m * n * k / (ms * 1e-3) * 1e-9:.1f} GFLOP/s", flush=True)


def copy(nbytes):
    n = nbytes // 4
    x = torch.randn(n, device="cuda")
    y = torch.empty_like(x)
    ms = median_ms(lambda: y.copy_(x))
    print(f"peer copy_{nbytes} {2.0 * nbytes / (ms * 1e-3) * 1e-9:.1f} GB/s", flush=True)


def attention(b, hq, hkv, s, d):
    """Causal grouped-query attention in fp32 as the PEFT peer's model runs it (transformers
    repeats the kv heads, then F.scaled_dot_product_attention): forward, and forward + backward
    (dq, dk, dv). FLOPs as wgml bench attention counts them (the causal half)."""
    import torch.nn.functional as F
    torch.backends.cuda.matmul.allow_tf32 = False
    q = torch.randn(b, hq, s, d, device="cuda", requires_grad=True)
    k = torch.randn(b, hkv, s, d, device="cuda", requires_grad=True)
    v = torch.randn(b, hkv, s, d, device="cuda", requires_grad=True)
    g = torch.randn(b, hq, s, d, device="cuda")

    def fwd():
        kk = k.repeat_interleave(hq // hkv, dim=1)
        vv = v.repeat_interleave(hq // hkv, dim=1)
        return F.scaled_dot_product_attention(q, kk, vv, is_causal=True)

    def fwd_bwd():
        torch.autograd.grad(fwd(), (q, k, v), g)

    flop = 2.0 * 2.0 * b * hq * s * s * d / 2.0
    with torch.no_grad():
        ms = median_ms(fwd)
    print(f"peer attention_fwd {flop / (ms * 1e-3) * 1e-12:.2f} TFLOP/s ({ms:.3f} ms)", flush=True)
    ms = median_ms(fwd_bwd)
    print(f"peer attention_fwd_bwd {3.5 * flop / (ms * 1e-3) * 1e-12:.2f} TFLOP/s ({ms:.3f} ms)", flush=True)


if __name__ == "__main__":
    what = sys.argv[1]
    if what == "matmul":
        shapes = []
        for spec in sys.argv[2].split(","):  # MxNxK or MxNxK:OP
            dims, _, op = spec.partition(":")
            shapes.append(tuple(int(v) for v in dims.split("x")) + (op or "NN",))
        matmul(shapes)
    elif what == "copy":
        copy(int(sys.argv[2]))
    elif what == "attention":  # B Hq Hkv S D
        attention(*(int(v) for v in sys.argv[2:7]))
    print(f"torch {torch.__version__}, cuda {torch.version.cuda}, device {torch.cuda.get_device_name()}")
