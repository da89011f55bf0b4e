"""rms_norm and layer_norm of wgml against PyTorch in float64.

Runs test_norm in dump mode. Each case holds x, w / b when present, params = [eps, has_w,
has_b] and wgml's outputs (out; for layer_norm also mean and rstd). torch 1.13 has no
rms_norm, so its reference is written out: x * rsqrt(mean(x^2) + eps) * w. layer_norm uses
torch.nn.functional.layer_norm, and its mean / rstd are computed in float64 (biased variance,
as layer_norm uses). Tolerances atol 1e-5 / rtol 1e-4: outputs are O(1) and wgml sums squares
in fp32 over rows of up to a few thousand elements (a few ulps of relative error)."""
import sys

import numpy as np
import torch

import wgml_dump

ATOL, RTOL = 1e-5, 1e-4


def main():
    cases = wgml_dump.run_dump(sys.argv[1], "test_norm")
    checker = wgml_dump.Checker()
    for name, c in sorted(cases.items()):
        x = torch.from_numpy(c["x"].astype(np.float64))
        eps, has_w, has_b = (float(v) for v in c["params"])
        d = x.shape[-1]
        w = torch.from_numpy(c["w"].astype(np.float64)) if has_w else None
        b = torch.from_numpy(c["b"].astype(np.float64)) if has_b else None
        label = f"{name} {list(x.shape)} eps {eps:g}{' w' if has_w else ''}{' b' if has_b else ''}"
        if name.startswith("rms"):
            ref = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
            if w is not None:
                ref = ref * w
            checker.close(label, c["out"], ref.numpy(), ATOL, RTOL)
        else:
            ref = torch.nn.functional.layer_norm(x, (d,), w, b, eps)
            mean = x.mean(-1)
            rstd = torch.rsqrt(x.var(-1, unbiased=False) + eps)
            shape = tuple(x.shape[:-1]) or (1,)
            checker.close(label, c["out"], ref.numpy(), ATOL, RTOL)
            checker.close(label + " mean", c["mean"], mean.reshape(shape).numpy(), ATOL, RTOL)
            checker.close(label + " rstd", c["rstd"], rstd.reshape(shape).numpy(), ATOL, RTOL)
    sys.exit(checker.done())


if __name__ == "__main__":
    main()
