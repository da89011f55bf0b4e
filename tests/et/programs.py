"""The named ExecuTorch programs the tests run (everything but the backend suite's cases): each
is a module built deterministically from a seed, its example inputs, the partitioner it is
lowered with and whether it is an inference program or a joint forward+backward (training)
program. tests/et/export_fixture.py exports every one into the committed fixture; the tests
build the same module for their references and take the program from the fixture
(tests/et/fixture.py checks that the module is the one the fixture's program was made from).

Partitioners: "vulkan" (VulkanPartitioner), "webgpu" (the WebGPU partitioner with the allow list
and options of ExecuTorch's webgpu test flow), "webgpu-plain" (the WebGPU partitioner with its
defaults), None (no delegate: portable kernels only).
"""
import hashlib

import torch

import models

SPECS = {}


class Spec:
    def __init__(self, name, build, partitioner, kind="inference", config=None):
        self.name, self.build, self.partitioner, self.kind = name, build, partitioner, kind
        self.config = dict(config or {})  # ExecutorchBackendConfig options ("init_buffers": mutable buffers kept)


def register(name, build, partitioner, kind="inference", config=None):
    assert name not in SPECS, name
    SPECS[name] = Spec(name, build, partitioner, kind, config)


def _seeded(seed, make):
    def build():
        torch.manual_seed(seed)
        model = make()
        gen = torch.Generator().manual_seed(seed + 1)
        return model, model.example(gen) if hasattr(model, "example") else None
    return build


def _tensor_bytes(h, t):
    if isinstance(t, torch.Tensor):
        h.update(str((t.dtype, tuple(t.shape))).encode())
        if t.numel():
            h.update(t.detach().contiguous().cpu().reshape(-1).view(torch.uint8).numpy().tobytes())
    elif isinstance(t, (list, tuple)):
        h.update(b"[")
        for x in t:
            _tensor_bytes(h, x)
        h.update(b"]")
    else:
        h.update(repr(t).encode())


def module_key(tag, model, inputs):
    """The identity of an exported program: a tag (what it is and how it is lowered), the module
    (its printed structure and every parameter and buffer, bytes included) and its example
    inputs (bytes included). Weights are drawn from seeded generators, so the key is the same on
    every machine."""
    h = hashlib.sha256()
    h.update(tag.encode())
    h.update(repr(model).encode())
    for k, v in model.state_dict().items():
        h.update(k.encode())
        _tensor_bytes(h, v)
    _tensor_bytes(h, inputs)
    return h.hexdigest()[:32]


def spec_key(spec, model, inputs):
    return module_key("%s|%s|%s|%s" % (spec.name, spec.kind, spec.partitioner, sorted(spec.config.items())),
                      model, inputs)


# ---- inference programs (tests/et/test_programs.py) ---------------------------------------------
def _with_inputs(model, *shapes):
    def example(gen):
        return tuple(torch.randn(s, generator=gen) for s in shapes)
    model.example = example
    return model.eval()


for part in ("vulkan", "webgpu"):
    register("mlp-" + part, _seeded(1234, lambda: _with_inputs(models.MLP(), (4, 16))), part)
    register("block-" + part, _seeded(1235, lambda: _with_inputs(models.Block(), (2, 8, 32))), part)
    register("conv-" + part, _seeded(1236, lambda: _with_inputs(models.ConvNet(), (2, 3, 12, 12))), part)
    register("conv_bn-" + part, _seeded(1237, lambda: _with_inputs(models.ConvBN(), (2, 4, 7, 9))), part)


def _embed_argmax():
    m = models.EmbedArgmax().eval()
    m.example = lambda gen: (torch.randint(0, 50, (3, 5), generator=gen),)
    return m


register("embed_argmax-vulkan", _seeded(1238, _embed_argmax), "vulkan")


def _mobilenet_v2():
    """MobileNetV2 of ExecuTorch's suite (models/test_torchvision.py) at 64x64, at half width with
    100 classes (every layer kind of the full model; 0.8M parameters instead of 3.5M keep the
    fixture small), with batch-norm statistics from a few random batches (the initial ones, mean
    0 and variance 1, let the activations vanish through the net: logits ~1e-9). The statistics
    are computed in float64 and rounded to 1/256, so that the weights are the same bytes on
    every machine."""
    import torchvision
    model = torchvision.models.mobilenet_v2(width_mult=0.5, num_classes=100)
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            m.momentum = None  # a cumulative average
    gen = torch.Generator().manual_seed(77)
    with torch.no_grad():
        model.double().train()
        for _ in range(3):
            model(torch.randn(8, 3, 64, 64, generator=gen, dtype=torch.float64))
        for m in model.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.running_mean.copy_(torch.round(m.running_mean * 256) / 256)
                m.running_var.copy_(torch.round(m.running_var * 256).clamp_min(1) / 256)
    model.float().eval()
    model.example = lambda g: (torch.randn(1, 3, 64, 64, generator=g),)
    return model


for part in ("webgpu", "vulkan"):
    register("mobilenet_v2-" + part, _seeded(1239, _mobilenet_v2), part)


# ---- training programs (tests/et/test_training.py, tests/et/test_program_train.c) ---------------
class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.l1 = torch.nn.Linear(8, 16)
        self.l2 = torch.nn.Linear(16, 4)

    def forward(self, x):
        return self.l2(torch.relu(self.l1(x)))


class TrainNet(torch.nn.Module):
    """A regression model's loss (MSE)."""

    def __init__(self, net):
        super().__init__()
        self.net = net
        self.loss = torch.nn.MSELoss()

    def forward(self, x, y):
        return (self.loss(self.net(x), y),)

    def example(self, gen):
        return torch.randn(6, 8, generator=gen), torch.randn(6, 4, generator=gen)


class Classifier(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.l1 = torch.nn.Linear(8, 16)
        self.l2 = torch.nn.Linear(16, 5)

    def forward(self, x):
        return self.l2(torch.relu(self.l1(x)))


class TrainClassifier(torch.nn.Module):
    """A classifier's cross-entropy loss (int64 labels)."""

    def __init__(self, net):
        super().__init__()
        self.net = net

    def forward(self, x, y):
        return (torch.nn.functional.cross_entropy(self.net(x), y),)

    def example(self, gen):
        return torch.randn(6, 8, generator=gen), torch.randint(0, 5, (6,), generator=gen)


class SharedNet(torch.nn.Module):
    """One linear layer applied twice around a full sum (which the Vulkan partitioner does not
    take): its weight becomes a constant of two delegates."""

    def __init__(self):
        super().__init__()
        self.l = torch.nn.Linear(8, 8)

    def forward(self, x, y):
        a = self.l(x)
        return (torch.nn.functional.mse_loss(self.l(a * a.sum()), y),)

    def example(self, gen):
        return torch.randn(4, 8, generator=gen), torch.randn(4, 8, generator=gen)


register("train_mse-vulkan", _seeded(0, lambda: TrainNet(Net())), "vulkan", "training")
register("train_ce-vulkan", _seeded(1, lambda: TrainClassifier(Classifier())), "vulkan", "training")
register("train_ce-webgpu", _seeded(1, lambda: TrainClassifier(Classifier())), "webgpu", "training")
register("train_shared-vulkan", _seeded(2, SharedNet), "vulkan", "training")


# ---- the program reader's cases (tests/py/test_pte_reader.py) -------------------------------------
READER_CASES = [
    # (name, partitioner, ExecutorchBackendConfig options, module source: defines M and INPUTS)
    ("linear_relu", "vulkan", {}, """
class M(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.l = torch.nn.Linear(4, 3)
    def forward(self, x):
        return torch.relu(self.l(x))
INPUTS = (torch.randn(2, 4),)
"""),
    ("mlp", "vulkan", {}, """
class M(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(8, 16)
        self.b = torch.nn.Linear(16, 5)
    def forward(self, x):
        h = torch.relu(self.a(x))
        y = self.b(h)
        return torch.softmax(y, dim=-1), y * 2.0 - 1.0
INPUTS = (torch.randn(3, 8),)
"""),
    ("embedding_int64", "vulkan", {}, """
class M(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.e = torch.nn.Embedding(10, 4)
    def forward(self, idx, x):
        return self.e(idx) + x
INPUTS = (torch.tensor([[1, 7, 3], [0, 9, 2]], dtype=torch.int64), torch.randn(2, 3, 4))
"""),
    ("webgpu_add_mul", "webgpu-plain", {}, """
class M(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(4, 6))
    def forward(self, x, y):
        return torch.sigmoid(x @ self.w) * y + x.sum(dim=1, keepdim=True)
INPUTS = (torch.randn(5, 4), torch.randn(5, 6))
"""),
    ("portable_mlp", None, {}, """
class M(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(6, 8)
        self.b = torch.nn.Linear(8, 2)
    def forward(self, x, n: int = 2):
        return self.b(torch.relu(self.a(x))).cumsum(0), x.argmax(dim=1)
INPUTS = (torch.randn(4, 6),)
"""),
    ("portable_mutable", None, {"init_buffers": ["acc"]}, """
class M(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("acc", torch.arange(6, dtype=torch.float32).reshape(2, 3))
    def forward(self, x):
        self.acc.add_(x)
        return self.acc * 2.0
INPUTS = (torch.randn(2, 3),)
"""),
    ("portable_external", None, {"external_constants": True}, """
class M(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(3, 2)
    def forward(self, x):
        return self.a(x)
INPUTS = (torch.randn(1, 3),)
"""),
]


def _from_source(src):
    def make():
        env = {"torch": torch}
        exec(src, env)
        m = env["M"]().eval()
        inputs = env["INPUTS"]
        m.example = lambda gen: inputs
        return m
    return make


for _name, _part, _opts, _src in READER_CASES:
    register("reader_" + _name, _seeded(0, _from_source(_src)), _part, config=_opts)
