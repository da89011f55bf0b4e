"""Recomputes test_index's dumped cases (gather, index_select, embedding) with PyTorch and
compares exactly with wgml's outputs. Negative indices are wrapped the way PyTorch's index
ops do (gather and embedding take no negative indices in PyTorch; index_select does)."""
import sys

import numpy as np
import torch

import wgml_dump


def as_torch(a):
    return torch.from_numpy(a.astype(np.int64) if a.dtype == np.uint32 else a.copy())


def main():
    cases = wgml_dump.run_dump(sys.argv[1], "test_index")
    checker = wgml_dump.Checker()
    for name in sorted(cases):
        c = cases[name]
        dim = int(c["params"][0])
        x = as_torch(c["x"])
        idx = torch.from_numpy(c["index"].astype(np.int64))
        size = x.shape[dim] if not name.startswith("embedding") else x.shape[0]
        idx = torch.where(idx < 0, idx + size, idx)
        if name.startswith("gather"):
            ref = torch.gather(x, dim, idx)
        elif name.startswith("index_select"):
            ref = torch.index_select(x, dim, idx.reshape(-1))
        else:
            ref = x[idx]  # embedding lookup for any dtype
        checker.close(name, c["out"], ref.numpy(), 0.0, 0.0)
    sys.exit(checker.done())


if __name__ == "__main__":
    main()
