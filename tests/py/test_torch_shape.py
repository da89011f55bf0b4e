"""Recomputes test_shape's dumped cases (slice, cat, permute/transpose, expand_copy) with
PyTorch and compares exactly with wgml's outputs."""
import sys

import numpy as np
import torch

import wgml_dump


def as_torch(a):
    # u32 has no torch dtype: carry it as int64 (values are compared, not bits)
    return torch.from_numpy(a.astype(np.int64) if a.dtype == np.uint32 else a.copy())


def main():
    cases = wgml_dump.run_dump(sys.argv[1], "test_shape")
    checker = wgml_dump.Checker()
    for name in sorted(cases):
        c = cases[name]
        prm = [int(v) for v in c["params"].astype(np.float64)]
        if name.startswith("slice"):
            dim, start, end, step = prm
            end = min(end, 2**62)
            x = as_torch(c["x"])
            ref = x[(slice(None),) * (dim % x.dim()) + (slice(start, end, step),)]
        elif name.startswith("cat"):
            dim, n = prm
            ref = torch.cat([as_torch(c[f"t{i}"]) for i in range(n)], dim)
        elif name.startswith("permute"):
            ref = as_torch(c["x"]).permute(*prm)
        elif name.startswith("expand"):
            ref = as_torch(c["x"]).expand(*prm).contiguous()
        else:
            continue
        checker.close(name, c["out"], ref.numpy(), 0.0, 0.0)
    sys.exit(checker.done())


if __name__ == "__main__":
    main()
