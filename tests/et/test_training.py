"""Training programs on wgml: a small model's joint forward+backward graph, exported with
torch.export.experimental._export_forward_backward (ExecuTorch's training flow) and lowered
with the Vulkan partitioner, stepped on wgml, against PyTorch (the same model, the same
batches, torch.optim).

1. Host SGD (wgml_program_write_constant): each run gives the loss and the gradients (the
   method __et_training_gradients_index says where they start, __et_training_fqn their
   order); the test finds each parameter's constant by its shape, steps on the host and
   writes the parameters back before the next run.
2. AdamW on the GPU (wgml_program_load_training): the parameters are views into the
   optimizer's flat buffer, each run is the method and then the AdamW step in one submit.
   Pairing from the program's metadata and the constants' shapes; checked independently by
   the delegate's constant names (the SHA-256 of each parameter's initial bytes).
3. SGD with momentum and weight decay on the GPU, the pairing given explicitly
   (param_constants, matched by that SHA-256).
4. A classifier with a cross-entropy loss (int64 labels, some of them ignore_index -100),
   stepped with AdamW on the GPU. Its joint graph compares and selects the labels, counts the
   valid ones and casts the count to float (wgml_cast), and scatters -1 into a one-hot. The
   same classifier lowered with the WebGPU partitioner (parameters partly method constants),
   stepped with SGD and momentum.
5. Refusals: pairing arguments out of range or twice the same constant, a parameter that two
   delegates hold (two constants: one would go stale), truncated programs, set_lr on a
   program not loaded for training.

Losses follow PyTorch's step by step and the final parameters match (float32 both sides).

    test_training.py BUILD_DIR
"""
import hashlib
import os
import sys
import time
from pathlib import Path

import numpy as np
import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import etrun  # noqa: E402
import fixture  # noqa: E402
import programs  # noqa: E402
from programs import Classifier, Net  # noqa: E402

ROOT = HERE.parent.parent
FAILS = []


def check(cond, what):
    print(("ok    " if cond else "FAIL  ") + what, flush=True)
    if not cond:
        FAILS.append(what)


def program(fx, name):
    """(the module, the program's bytes) of a named training program of the fixture."""
    model, _, pte = programs.build_checked(fx, name)
    return model, pte


def host_sgd(rt, pte, init, seed):
    """Test 1: the program's gradients, SGD on the host, parameters written back."""
    prog = etrun.Program(rt, pte)
    consts = prog.constants()
    # each parameter's constant: the one of its shape
    where = {}
    for name, v in init.items():
        for i, (shape, _, _) in enumerate(consts):
            if shape == tuple(v.shape) and i not in where.values():
                where[name] = i
                break
    check(len(where) == len(init), "every parameter found among the program's %d constants" % len(consts))
    names = list(init)  # gradient outputs follow the parameters' order (__et_training_fqn)
    ref = Net()
    ref.load_state_dict(init)
    opt = torch.optim.SGD(ref.parameters(), lr=0.1)
    params = {k: v.clone().numpy() for k, v in init.items()}
    g = torch.Generator().manual_seed(seed)
    for step in range(6):
        x, y = torch.randn(6, 8, generator=g), torch.randn(6, 4, generator=g)
        for k, i in where.items():
            prog.write_constant(i, params[k])
        prog.set_input(0, x)
        prog.set_input(1, y)
        prog.run()
        loss = prog.output(0).item()
        grads = [torch.from_numpy(prog.output(1 + j)) for j in range(len(names))]
        opt.zero_grad()
        ref_loss = torch.nn.functional.mse_loss(ref(x), y)
        ref_loss.backward()
        gerr = max((grads[j] - dict(ref.named_parameters())[n].grad).abs().max().item() for j, n in enumerate(names))
        check(abs(loss - ref_loss.item()) <= 1e-5 * max(1.0, abs(ref_loss.item())) and gerr < 1e-5,
              "host SGD step %d: loss %.6f (PyTorch %.6f), max gradient error %.2e" % (step, loss, ref_loss.item(), gerr))
        opt.step()
        for j, n in enumerate(names):  # SGD on the host, written back before the next run
            params[n] = params[n] - np.float32(0.1) * grads[j].numpy()
    final = max(np.abs(params[n] - dict(ref.named_parameters())[n].detach().numpy()).max() for n in names)
    check(final < 1e-5, "parameters after 6 host SGD steps match PyTorch's (max error %.2e)" % final)
    prog.close()


def sha_key(t):
    """The delegate's name of a constant: the SHA-256 of its bytes."""
    return hashlib.sha256(t.detach().contiguous().numpy().tobytes()).hexdigest()


def gpu_steps(rt, pte, make_ref, init, opt_ref, batches, loss_fn, label, tol_loss, tol_param, **train):
    """Steps a program loaded for training on wgml and the reference model with torch.optim on
    the same batches; checks the pairing, every step's loss and the final parameters."""
    prog = etrun.Program(rt, pte, **train)
    consts = prog.constants()
    params = prog.params()
    names = list(init)
    # the pairing, checked independently of how wgml made it: parameter j is __et_training_fqn's
    # j-th name (the training module holds the model as "net"), and its constant holds that
    # parameter's initial values (and, when it is a delegate constant, is named by their SHA-256)
    paired = [n for j, n in enumerate(names)
              if j < len(params) and params[j][2] == "net." + n and consts[params[j][0]][2] in ("", sha_key(init[n]))
              and np.array_equal(prog.read_constant(params[j][0]), init[n].numpy())]
    check(len(params) == len(names) and len(paired) == len(names),
          "%s: %d parameters paired with their constants and gradients (%s)" % (
              label, len(params), ", ".join("%s->c%d/o%d" % (n, c, o) for c, o, n in params)))
    ref = make_ref()
    ref.load_state_dict(init)
    opt = opt_ref(ref.parameters())
    # the optimizer alone: torch.optim stepping a shadow copy with wgml's own gradients (the
    # program's outputs), so that gradient rounding does not enter this comparison
    shadow = [torch.nn.Parameter(init[n].clone()) for n in names]
    shadow_opt = opt_ref(shadow)
    worst = 0.0
    for step, inputs in enumerate(batches):
        for i, x in enumerate(inputs):
            prog.set_input(i, x)
        prog.run()
        loss = prog.output(0).item()
        for j, sp in enumerate(shadow):
            sp.grad = torch.from_numpy(prog.output(params[j][1])).clone()
        shadow_opt.step()
        opt.zero_grad()
        ref_loss = loss_fn(ref, *inputs)
        ref_loss.backward()
        opt.step()
        err = abs(loss - ref_loss.item()) / max(1.0, abs(ref_loss.item()))
        worst = max(worst, err)
        check(err <= tol_loss, "%s step %d: loss %.7f (PyTorch %.7f, rel. error %.1e)" % (
            label, step, loss, ref_loss.item(), err))
    refp = dict(ref.named_parameters())
    got = [prog.read_constant(params[j][0]) for j in range(len(names))]
    own = max(np.abs(got[j] - shadow[j].detach().numpy()).max() for j in range(len(names)))
    check(own <= 1e-6, "%s: parameters after %d steps equal torch.optim's steps on wgml's gradients (max abs "
          "error %.2e)" % (label, len(batches), own))
    final = max(np.abs(got[j] - refp[n].detach().numpy()).max() for j, n in enumerate(names))
    check(final <= tol_param, "%s: parameters after %d steps match PyTorch's training (max abs error %.2e)" % (
        label, len(batches), final))
    check(prog.steps() == len(batches), "%s: the optimizer counted %d steps" % (label, prog.steps()))
    prog.close()
    return worst, final, own


def mse(ref, x, y):
    return torch.nn.functional.mse_loss(ref(x), y)


def refusals(rt, pte, shared):
    for kw, want in ((dict(grad_outputs=[9]), "gradient output 9 out of range"),
                     (dict(param_constants=[1, 1, 2, 3]), "parameters 0 and 1: both constant 1"),
                     (dict(param_constants=[4, 1, 2, 3]), "parameter 0 (net.l1.weight): constant 4 has shape [], its "
                      "gradient (output 1) [16, 8]"),
                     (dict(param_constants=[0, 1, 2, 77]), "constant 77")):
        try:
            etrun.Program(rt, pte, etrun.ADAMW, **kw).close()
            msg = "(loaded)"
        except etrun.ProgramError as e:
            msg = str(e)
        check(want in msg, "load_training(%s) refused: %s" % (kw, msg))
    try:
        etrun.Program(rt, shared, etrun.ADAMW).close()
        msg = "(loaded)"
    except etrun.ProgramError as e:
        msg = str(e)
    check("a parameter used by several delegates is not supported" in msg,
          "a parameter in two delegates refused: %s" % msg)
    # truncated training programs: a clear error from load_training at every cut, never a crash
    cuts = sorted(set(int(len(pte) * k / 24) for k in range(1, 24)))
    clear = 0
    for n in cuts:
        try:
            etrun.Program(rt, pte[:n], etrun.SGD).close()
        except etrun.ProgramError as e:
            clear += str(e).startswith("program:")
    check(clear == len(cuts), "load_training of the program cut at %d points: %d clear errors" % (len(cuts), clear))
    plain = etrun.Program(rt, pte)
    try:
        plain.set_lr(0.1)
        msg = "(accepted)"
    except etrun.ProgramError as e:
        msg = str(e)
    check("not loaded for training" in msg, "set_lr on a plain load refused: %s" % msg)
    plain.close()


def main():
    build = Path(sys.argv[1] if len(sys.argv) > 1 else ROOT / "build")
    seed = int(os.environ.get("WGML_SEED", str(int(time.time()) % 100000)))
    print("seed", seed)
    fx = fixture.open_for(build)
    train_net, pte = program(fx, "train_mse-vulkan")  # the initial weights are in the program
    init = {k: v.clone() for k, v in train_net.net.state_dict().items()}
    rt = etrun.Runtime(build / "libwgml.so")
    host_sgd(rt, pte, init, seed)

    g = torch.Generator().manual_seed(seed)
    batches = [(torch.randn(6, 8, generator=g), torch.randn(6, 4, generator=g)) for _ in range(8)]
    t0 = time.perf_counter()
    # AdamW's update m/(sqrt(v) + eps) is normalised: where a gradient element is tiny, its
    # float32 rounding (the program's and PyTorch's, ~3e-8) moves the update by a visible part
    # of lr, and the trajectories part by that much. Measured over seeds: ~6e-8 typically,
    # up to ~8e-6; the bound against PyTorch's training is 5e-5 (the optimizer alone, on the
    # same gradients, is held to 1e-6 above).
    w, f, o = gpu_steps(rt, pte, Net, init, lambda ps: torch.optim.AdamW(ps, lr=2e-2, weight_decay=0.05), batches, mse,
                     "AdamW", 2e-6, 5e-5, optimizer=etrun.ADAMW, lr=2e-2, weight_decay=0.05)
    print("  AdamW: 8 steps in %.2f s; worst loss rel. error %.1e, final parameter error %.1e (optimizer alone %.1e)"
          % (time.perf_counter() - t0, w, f, o))
    consts = etrun.Program(rt, pte).constants()
    by_key = {c[2]: i for i, c in enumerate(consts)}
    explicit = [by_key.get(sha_key(v), -1) for v in init.values()]
    w, f, o = gpu_steps(rt, pte, Net, init,
                     lambda ps: torch.optim.SGD(ps, lr=0.05, momentum=0.9, weight_decay=1e-3), batches, mse,
                     "SGD (momentum 0.9, weight decay 1e-3, explicit pairing)", 2e-6, 1e-6,
                     optimizer=etrun.SGD, lr=0.05, momentum=0.9, weight_decay=1e-3, param_constants=explicit)
    print("  SGD: worst loss rel. error %.1e, final parameter error %.1e (optimizer alone %.1e)" % (w, f, o))

    train_clf, cpte = program(fx, "train_ce-vulkan")
    cinit = {k: v.clone() for k, v in train_clf.net.state_dict().items()}
    cbatches = []
    for k in range(8):
        y = torch.randint(0, 5, (6,), generator=g)
        if k % 3 == 1:
            y[k % 6] = -100  # ignored: the mean is over the other five
        cbatches.append((torch.randn(6, 8, generator=g) * 2, y))
    w, f, o = gpu_steps(rt, cpte, Classifier, cinit, lambda ps: torch.optim.AdamW(ps, lr=3e-2, weight_decay=0.01), cbatches,
                     lambda ref, x, y: torch.nn.functional.cross_entropy(ref(x), y),
                     "cross-entropy classifier, AdamW", 2e-6, 5e-5, optimizer=etrun.ADAMW, lr=3e-2, weight_decay=0.01)
    print("  cross-entropy + AdamW: worst loss rel. error %.1e, final parameter error %.1e (optimizer alone %.1e)"
          % (w, f, o))
    # the same classifier lowered with the WebGPU partitioner: its allow list leaves the
    # matmuls with bias (addmm) to portable kernels, so some parameters are constants of the
    # method itself (no named-data key) rather than of a delegate
    train_wclf, wpte = program(fx, "train_ce-webgpu")
    check(all(torch.equal(v, cinit[k]) for k, v in train_wclf.net.state_dict().items()),
          "the WebGPU-lowered classifier starts from the same weights")
    w, f, o = gpu_steps(rt, wpte, Classifier, cinit, lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.5), cbatches,
                        lambda ref, x, y: torch.nn.functional.cross_entropy(ref(x), y),
                        "cross-entropy classifier (WebGPU partitioner), SGD", 2e-6, 1e-6, optimizer=etrun.SGD, lr=0.1,
                        momentum=0.5)
    print("  cross-entropy (WebGPU partitioner) + SGD: worst loss rel. error %.1e, final parameter error %.1e "
          "(optimizer alone %.1e)" % (w, f, o))
    _, shared = program(fx, "train_shared-vulkan")
    refusals(rt, pte, shared)
    rt.close()
    print("%d failures" % len(FAILS))
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
