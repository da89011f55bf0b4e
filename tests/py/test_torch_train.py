"""Fused cross-entropy and AdamW of wgml against PyTorch in float64.

Runs test_train_ops (the cross-entropy cases) and test_optimizer (AdamW) in dump mode.
cross-entropy cases (ce*): logits, labels (negative: ignored), params = [grad_scale, has_dlogits]
and wgml's loss and dlogits; torch: F.cross_entropy(logits, labels, ignore_index) with the
gradient by autograd, times grad_scale. Labels -1 and -100 are both ignored by wgml, so every
negative label is mapped to torch's ignore_index (-100). When every row is ignored torch's mean
is NaN (0 / 0); wgml defines loss 0 and dlogits 0 there, and that is what is checked.
Tolerances: the loss in fp32 carries ~1e-7 of relative error of lse's magnitude; dlogits are
(softmax - onehot) / n_valid with softmax good to ~1e-6 absolute.

AdamW cases (adamw_*): the flat layout (offset, rows, cols per parameter), params = [beta1,
beta2, eps, max_norm], the initial params p0, the gradients of each of the 10 steps (fed to
wgml through the grad views), lr and weight decay per step, and wgml's final p, m, v and
stats (steps taken, skipped, last norm). torch: torch.optim.AdamW over the separate
parameter tensors (float64, from the same fp32 starting values and gradients), with
torch.nn.utils.clip_grad_norm_ before each step when max_norm > 0, lr and weight decay set in
the param group before each step, and a step whose gradients are not all finite skipped (no
clip, no step), as wgml does. betas and eps are decimals the test chose (0.9, 0.999, 1e-8):
they are recovered from the fp32 dump by rounding to 6 significant digits; lr and wd are used
as the fp32 values wgml holds. wgml keeps p, m, v in fp32 (a few ulps per step): rtol 1e-5
with a small atol for elements near 0.
"""
import sys

import numpy as np
import torch

import wgml_dump


def check_ce(checker, name, c):
    x = torch.from_numpy(c["logits"].astype(np.float64)).requires_grad_(True)
    lab = torch.from_numpy(c["labels"].astype(np.int64))
    lab = torch.where(lab < 0, torch.full_like(lab, -100), lab)
    scale, has_d = float(c["params"][0]), c["params"][1] != 0
    n_valid = int((lab >= 0).sum())
    rows, vocab = x.shape
    desc = f"{name} cross_entropy [{rows}, {vocab}] {n_valid} valid"
    if n_valid == 0:
        ref_loss = np.zeros(1)
        ref_d = np.zeros(x.shape)
    else:
        loss = torch.nn.functional.cross_entropy(x, lab, ignore_index=-100)
        loss.backward()
        ref_loss = loss.detach().numpy().reshape(1)
        ref_d = x.grad.numpy() * scale
    amax = float(x.detach().abs().max()) + np.log(vocab)
    checker.close(desc + " loss", c["loss"], ref_loss, 2e-6 * amax, 1e-5)
    if has_d:
        checker.close(desc + " dlogits", c["dlogits"], ref_d, 2e-6 * scale / max(n_valid, 1), 1e-4)


def check_adamw(checker, name, c):
    beta1, beta2, eps = (float(f"{float(v):.6g}") for v in c["params"][:3])
    max_norm = float(c["params"][3])
    p0 = c["p0"].astype(np.float64)
    params = []
    for off, rows, cols in c["layout"]:
        off, rows, cols = int(off), int(rows), int(cols)
        n = rows * (cols if cols else 1)
        t = torch.tensor(p0[off:off + n]).reshape((rows, cols) if cols else (rows,))
        params.append((off, n, t.clone().requires_grad_(True)))
    ps = [p for _, _, p in params]
    opt = torch.optim.AdamW(ps, lr=float(c["lr"][0]), betas=(beta1, beta2), eps=eps,
                            weight_decay=float(c["wd"][0]))
    taken = skipped = 0
    norm = 0.0
    for k in range(c["grads"].shape[0]):
        g = c["grads"][k].astype(np.float64)
        for off, n, p in params:
            p.grad = torch.tensor(g[off:off + n]).reshape(p.shape)
        flat = np.concatenate([g[off:off + n] for off, n, _ in params])
        norm = float(np.sqrt(np.sum(flat * flat)))
        if not np.isfinite(flat).all():
            skipped += 1
            continue
        if max_norm > 0:
            norm = float(torch.nn.utils.clip_grad_norm_(ps, max_norm))
        for group in opt.param_groups:
            group["lr"] = float(c["lr"][k])
            group["weight_decay"] = float(c["wd"][k])
        opt.step()
        taken += 1
    got_p, got_m, got_v = c["p"], c["m"], c["v"]
    for i, (off, n, p) in enumerate(params):
        st = opt.state[p]
        shape = list(p.shape)
        checker.close(f"{name} param {i} {shape}", got_p[off:off + n], p.detach().numpy().reshape(-1), 2e-6, 1e-5)
        checker.close(f"{name} exp_avg {i} {shape}", got_m[off:off + n], st["exp_avg"].numpy().reshape(-1), 1e-7, 1e-5)
        checker.close(f"{name} exp_avg_sq {i} {shape}", got_v[off:off + n], st["exp_avg_sq"].numpy().reshape(-1),
                      1e-9, 1e-5)
        step = float(st["step"])
        if step != taken:
            print(f"FAIL: {name}: torch step {step}, want {taken}")
            checker.failed += 1
    stats = c["stats"]
    if int(stats[0]) != taken or int(stats[1]) != skipped:
        print(f"FAIL: {name}: wgml taken/skipped {int(stats[0])}/{int(stats[1])}, torch {taken}/{skipped}")
        checker.failed += 1
    else:
        checker.passed += 1
    checker.close(f"{name} last grad norm", stats[2:3], np.array([norm]), 0, 1e-5)


def main():
    cases = wgml_dump.run_dump(sys.argv[1], "test_train_ops")
    cases.update(wgml_dump.run_dump(sys.argv[1], "test_optimizer"))  # other names: adamw*
    checker = wgml_dump.Checker()
    for name, c in sorted(cases.items()):
        if name.startswith("ce"):
            check_ce(checker, name, c)
        elif name.startswith("adamw"):
            check_adamw(checker, name, c)
    n_ce = sum(1 for n in cases if n.startswith("ce"))
    n_adamw = sum(1 for n in cases if n.startswith("adamw"))
    if n_ce < 6 or n_adamw < 2:
        print(f"FAIL: expected 6 cross-entropy and 2 AdamW cases, got {n_ce} and {n_adamw}")
        checker.failed += 1
    sys.exit(checker.done())


if __name__ == "__main__":
    main()
