"""softmax and log_softmax of wgml against PyTorch in float64.

Runs test_reduce in dump mode; every dumped case holds x, params = [dim] and wgml's output.
Tolerances: softmax values lie in [0, 1] and wgml computes them in fp32 (exp and a row sum in
fp32: a few ulps of relative error), so atol 1e-5 / rtol 1e-4; log_softmax values reach
|2 * range| of the input, so its atol grows with the largest input magnitude."""
import sys

import numpy as np
import torch

import wgml_dump


def main():
    cases = wgml_dump.run_dump(sys.argv[1], "test_reduce")
    checker = wgml_dump.Checker()
    for name, c in sorted(cases.items()):
        if not (name.startswith("softmax") or name.startswith("logsoftmax")):
            continue
        x = torch.from_numpy(c["x"].astype(np.float64))
        dim = int(c["params"][0])
        if name.startswith("softmax"):
            ref = torch.softmax(x, dim)
            atol = 1e-5
        else:
            ref = torch.log_softmax(x, dim)
            finite = x[torch.isfinite(x)]
            atol = 1e-5 * max(1.0, float(finite.abs().max()))
        got = c["out"].astype(np.float64)
        ref = ref.numpy()
        # -inf inputs: softmax gives exactly 0 and log_softmax exactly -inf, as torch does
        inf = np.isinf(ref)
        if inf.any() and not np.array_equal(got[inf], ref[inf]):
            print(f"FAIL: {name}: -inf entries differ")
            checker.failed += 1
            continue
        checker.close(f"{name} {list(x.shape)} dim {dim}", np.where(inf, 0, got), np.where(inf, 0, ref), atol, 1e-4)
    sys.exit(checker.done())


if __name__ == "__main__":
    main()
