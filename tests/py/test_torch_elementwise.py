"""PyTorch float64 references for the elementwise family: runs test_elementwise in dump mode
and recomputes gelu (erf and tanh forms), silu, sigmoid, a broadcast add with alpha, a
broadcast pow and a three-way broadcast where from the dumped inputs."""
import sys

import numpy as np
import torch

import wgml_dump


def t64(x):
    return torch.from_numpy(np.asarray(x, dtype=np.float64))


def main():
    cases = wgml_dump.run_dump(sys.argv[1], "test_elementwise")
    checker = wgml_dump.Checker()
    want = ["gelu", "gelu_tanh", "silu", "sigmoid", "add_bcast", "pow_bcast", "where_bcast"]
    for name in want:
        if name not in cases:
            print(f"FAIL: case {name} was not dumped")
            checker.failed += 1
    F = torch.nn.functional
    for name, fn, atol, rtol in [
        ("gelu", lambda x: F.gelu(x), 1e-6, 0.0),
        ("gelu_tanh", lambda x: F.gelu(x, approximate="tanh"), 1e-6, 0.0),
        ("silu", lambda x: F.silu(x), 1e-6, 1e-5),
        ("sigmoid", lambda x: torch.sigmoid(x), 1e-6, 0.0),
    ]:
        if name in cases:
            c = cases[name]
            checker.close(f"{name} vs torch float64", c["out"], fn(t64(c["x"])).numpy(), atol, rtol)
    if "add_bcast" in cases:
        c = cases["add_bcast"]
        ref = torch.add(t64(c["a"]), t64(c["b"]), alpha=float(c["alpha"][0]))
        checker.close(f"add alpha={float(c['alpha'][0])} {c['a'].shape} + {c['b'].shape}", c["out"], ref.numpy(),
                      1e-6, 1e-6)
    if "pow_bcast" in cases:
        c = cases["pow_bcast"]
        ref = torch.pow(t64(c["a"]), t64(c["b"]))
        checker.close(f"pow {c['a'].shape} ** {c['b'].shape}", c["out"], ref.numpy(), 1e-6, 2e-5)
    if "where_bcast" in cases:
        c = cases["where_bcast"]
        ref = torch.where(torch.from_numpy(c["cond"].astype(bool)), t64(c["a"]), t64(c["b"]))
        checker.close(f"where {c['cond'].shape} {c['a'].shape} {c['b'].shape}", c["out"], ref.numpy(), 0.0, 0.0)
    sys.exit(checker.done())


if __name__ == "__main__":
    main()
