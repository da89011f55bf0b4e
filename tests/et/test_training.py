"""A training program on wgml: a small model's joint forward+backward graph, exported with
torch.export.experimental._export_forward_backward (ExecuTorch's training flow) and lowered
with the Vulkan partitioner, runs SGD steps on wgml, and its losses and gradients follow
PyTorch's (torch.optim.SGD on the same model, the same batches).

The lowered program keeps the parameters as constants of its delegates and returns the loss and
the gradients (ExecuTorch's __et_training_gradients_index method says where they start; the
gradient order is __et_training_fqn's). The test finds each parameter's constant by its shape
(the four shapes differ) and writes the stepped parameters there before each run
(wgml_program_write_constant), so a wrong match shows as a loss that leaves PyTorch's.
Cross-entropy is not used: its decomposition needs integer comparisons and a cast of a computed
tensor, which wgml does not have (docs/EXECUTORCH.md); the loss is MSE.

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

ROOT = HERE.parent.parent
FAILS = []


def check(cond, what):
    print(("ok    " if cond else "FAIL  ") + what, flush=True)
    if not cond:
        FAILS.append(what)


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.l1 = torch.nn.Linear(8, 16)
        self.l2 = torch.nn.Linear(16, 4)

    def forward(self, x):
        return self.l2(torch.relu(self.l1(x)))


class TrainNet(torch.nn.Module):
    def __init__(self, net):
        super().__init__()
        self.net = net
        self.loss = torch.nn.MSELoss()

    def forward(self, x, y):
        return (self.loss(self.net(x), y),)


def export(model, example):
    from importlib.metadata import version
    h = hashlib.sha256(b"train-vulkan")
    for k, v in model.state_dict().items():
        h.update(k.encode() + v.numpy().tobytes())
    path = ROOT / ".deps" / "et-cache" / version("executorch") / "programs" / ("train_" + h.hexdigest()[:24] + ".pte")
    if path.is_file():
        return path.read_bytes()
    from executorch.backends.vulkan.partitioner.vulkan_partitioner import VulkanPartitioner
    from executorch.exir import EdgeCompileConfig, to_edge_transform_and_lower
    from torch.export.experimental import _export_forward_backward
    t0 = time.perf_counter()
    ep = _export_forward_backward(torch.export.export(model, example, strict=True))
    pte = to_edge_transform_and_lower(ep, partitioner=[VulkanPartitioner()],
                                      compile_config=EdgeCompileConfig(_check_ir_validity=False)).to_executorch().buffer
    print("  exported the joint graph in %.1f s" % (time.perf_counter() - t0))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.with_suffix(".tmp").write_bytes(pte)
    path.with_suffix(".tmp").replace(path)
    return pte


def main():
    build = Path(sys.argv[1] if len(sys.argv) > 1 else ROOT / "build")
    seed = int(os.environ.get("WGML_SEED", str(int(time.time()) % 100000)))
    print("seed", seed)
    torch.manual_seed(0)  # the initial weights (fixed: they are in the cached program)
    net = Net()
    init = {k: v.clone() for k, v in net.state_dict().items()}
    pte = export(TrainNet(net), (torch.randn(6, 8), torch.randn(6, 4)))
    rt = etrun.Runtime(build / "libwgml.so")
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
        grads = [prog.output(1 + j) for j in range(len(names))]
        opt.zero_grad()
        ref_loss = torch.nn.functional.mse_loss(ref(x), y)
        ref_loss.backward()
        gerr = max((grads[j] - dict(ref.named_parameters())[n].grad).abs().max().item() for j, n in enumerate(names))
        check(abs(loss - ref_loss.item()) <= 1e-5 * max(1.0, abs(ref_loss.item())) and gerr < 1e-5,
              "step %d: loss %.6f (PyTorch %.6f), max gradient error %.2e" % (step, loss, ref_loss.item(), gerr))
        opt.step()
        for j, n in enumerate(names):  # SGD on the host, written back before the next run
            params[n] = params[n] - np.float32(0.1) * grads[j].numpy()
    final = max(np.abs(params[n] - dict(ref.named_parameters())[n].detach().numpy()).max() for n in names)
    check(final < 1e-5, "parameters after 6 SGD steps match PyTorch's (max error %.2e)" % final)
    prog.close()
    rt.close()
    print("%d failures" % len(FAILS))
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
