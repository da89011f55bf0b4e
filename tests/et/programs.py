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


def key_caveat():
    """Why every key can differ on this machine, or "": ATen's DEFAULT CPU path (a CPU without
    AVX2, or ATEN_CPU_CAPABILITY=default) draws normal_ with other roundings than its AVX2 and
    AVX-512 paths (which agree), so the seeded weights differ in the last bits and so do the keys.
    The fixture holds for x86-64 with AVX2."""
    if torch.backends.cpu.get_cpu_capability() != "DEFAULT":
        return ""
    return ("; this process runs ATen's DEFAULT CPU path (no AVX2, or ATEN_CPU_CAPABILITY=default), whose normal_ "
            "draws the seeded weights with other roundings than the AVX2 path the fixture was made with, so every key "
            "differs: run on an x86-64 CPU with AVX2")


def spec_key(spec, model, inputs):
    return module_key("%s|%s|%s|%s" % (spec.name, spec.kind, spec.partitioner, sorted(spec.config.items())),
                      model, inputs)


def build_checked(fx, name):
    """(the module, its example inputs, the program's bytes) of the named program of fixture fx,
    which must have been exported from this very module (fixture.FixtureError otherwise)."""
    import fixture
    spec = SPECS[name]
    model, example = spec.build()
    try:
        return model, example, fx.program(name, spec_key(spec, model, example))
    except fixture.FixtureError as e:
        raise fixture.FixtureError(str(e) + key_caveat()) from None


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
    are computed in float64 and rounded to 1/256 (a zero made positive), so that the weights are
    the same bytes on every machine."""
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
                # + 0.0: a mean that rounds to zero keeps the sign of its float noise (-0.0 on
                # one CPU's MKL path, 0.0 on another's), and the key hashes the bytes
                m.running_mean.copy_(torch.round(m.running_mean * 256) / 256 + 0.0)
                m.running_var.copy_(torch.round(m.running_var * 256).clamp_min(1) / 256)
    model.float().eval()
    model.example = lambda g: (torch.randn(1, 3, 64, 64, generator=g),)
    return model


for part in ("webgpu", "vulkan"):
    register("mobilenet_v2-" + part, _seeded(1239, _mobilenet_v2), part)


# ---- models whose exports keep portable kernels (tests/et/test_programs.py: run_exports) ------------
class SdpaBlock(torch.nn.Module):
    """A pre-norm transformer block whose attention is F.scaled_dot_product_attention, causal
    (is_causal=True) with grouped-query heads (enable_gqa), or under a boolean mask given as an
    input (True: attend; a query that may attend nowhere gets zeros, PyTorch's safe softmax).
    The exporter decomposes the attention, and both partitioners leave part of it to portable
    kernels (any.dim, mul.Scalar, scalar_tensor, ...)."""

    def __init__(self, masked, d=32, n_head=4, n_kv=2, d_ff=64, seq=8):
        super().__init__()
        self.masked, self.n_head, self.n_kv, self.hd, self.seq = masked, n_head, n_kv, d // n_head, seq
        self.n1, self.n2 = torch.nn.LayerNorm(d), torch.nn.LayerNorm(d)
        self.q = torch.nn.Linear(d, d)
        self.kv = torch.nn.Linear(d, 2 * n_kv * self.hd)
        self.o = torch.nn.Linear(d, d)
        self.ff = torch.nn.Sequential(torch.nn.Linear(d, d_ff), torch.nn.GELU(), torch.nn.Linear(d_ff, d))

    def forward(self, x, keep=None):
        b, s, d = x.shape
        h = self.n1(x)
        q = self.q(h).view(b, s, self.n_head, self.hd).transpose(1, 2)
        k, v = self.kv(h).view(b, s, 2, self.n_kv, self.hd).permute(2, 0, 3, 1, 4)
        if self.masked:
            o = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=keep[:, None], enable_gqa=True)
        else:
            o = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        x = x + self.o(o.transpose(1, 2).reshape(b, s, d))
        return x + self.ff(self.n2(x))

    def example(self, gen):
        x = torch.randn(2, self.seq, self.o.out_features, generator=gen)
        if not self.masked:
            return (x,)
        keep = torch.rand(2, self.seq, self.seq, generator=gen) > 0.4
        keep[0, 3] = False  # a query that sees no key: its output row is zero
        return x, keep


def _convnext():
    """ConvNeXt of ExecuTorch's suite (convnext_small there) reduced to two stages of one block
    (16 and 32 channels, 10 classes): depthwise 7x7 convolutions, LayerNorm over channels
    (permutes), GELU, layer scale (0.5 instead of 1e-6, so that the blocks count), stochastic
    depth (identity in eval), a strided 2x2 downsampling; the exporter keeps an as_strided_copy
    of the pooled features."""
    from torchvision.models.convnext import CNBlockConfig, ConvNeXt
    model = ConvNeXt([CNBlockConfig(16, 32, 1), CNBlockConfig(32, None, 1)], stochastic_depth_prob=0.1,
                     layer_scale=0.5, num_classes=10).eval()
    model.example = lambda g: (torch.randn(1, 3, 64, 64, generator=g),)
    return model


def _swin_v2():
    """Swin Transformer V2 of ExecuTorch's suite (swin_v2_t there) reduced to embed_dim 16,
    depths [2, 1], heads [2, 4], 4x4 windows and 10 classes at 64x64: shifted windows (torch.roll,
    which decomposes into an index arithmetic with fmod), attention masks, cosine attention with
    a clamped logit scale, the continuous position bias MLP, patch merging; the exporter keeps
    constant_pad_nd, fmod and as_strided_copy, and the Vulkan graph shares a 0.0 between a float
    and an integer argument."""
    from torchvision.models.swin_transformer import PatchMergingV2, SwinTransformer, SwinTransformerBlockV2
    model = SwinTransformer(patch_size=[4, 4], embed_dim=16, depths=[2, 1], num_heads=[2, 4], window_size=[4, 4],
                            stochastic_depth_prob=0.0, num_classes=10, block=SwinTransformerBlockV2,
                            downsample_layer=PatchMergingV2).eval()
    model.example = lambda g: (torch.randn(1, 3, 64, 64, generator=g),)
    return model


class CausalLM(torch.nn.Module):
    """A transformers causal language model's logits for int64 token ids (no cache)."""

    def __init__(self, model, seq=16):
        super().__init__()
        self.model, self.seq = model, seq

    def forward(self, ids):
        return self.model(input_ids=ids, use_cache=False).logits

    def example(self, gen):
        return (torch.randint(0, self.model.config.vocab_size, (2, self.seq), generator=gen),)


class MaskedEncoder(torch.nn.Module):
    """A transformers encoder's last hidden state for int64 token ids and an int64 attention
    mask (1: a token, 0: padding; the second sequence is padded)."""

    def __init__(self, model, seq=16):
        super().__init__()
        self.model, self.seq = model, seq

    def forward(self, ids, mask):
        return self.model(input_ids=ids, attention_mask=mask).last_hidden_state

    def example(self, gen):
        ids = torch.randint(3, self.model.config.vocab_size, (2, self.seq), generator=gen)
        mask = torch.ones(2, self.seq, dtype=torch.int64)
        mask[1, int(torch.randint(1, self.seq, (1,), generator=gen)):] = 0
        return ids, mask


_TINY = dict(vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
             max_position_embeddings=64, attn_implementation="sdpa")


def _llama():
    """A tiny Llama (2 layers, hidden 64, 4 query and 2 key/value heads, vocabulary 128; random
    weights, no download): RoPE, RMSNorm, SwiGLU, grouped-query attention; transformers' causal
    mask and position ids leave any.dim and cumsum to portable kernels."""
    import transformers
    return CausalLM(transformers.LlamaForCausalLM(transformers.LlamaConfig(num_key_value_heads=2, **_TINY))).eval()


def _phi3():
    """A tiny Phi-3 (as _llama, fused qkv and gate/up projections): the Vulkan partitioner fuses
    its rotary embedding into et_vk.apply_rotary_emb_hf."""
    import transformers
    return CausalLM(transformers.Phi3ForCausalLM(transformers.Phi3Config(num_key_value_heads=2, pad_token_id=0,
                                                                         **_TINY))).eval()


def _bert():
    """A tiny BERT encoder (2 layers, hidden 64, 4 heads) with a padding mask: the extended
    attention mask and the decomposed attention's any.dim."""
    import transformers
    cfg = dict(_TINY)
    return MaskedEncoder(transformers.BertModel(transformers.BertConfig(**cfg), add_pooling_layer=False)).eval()


for part in ("vulkan", "webgpu"):
    register("sdpa_causal-" + part, _seeded(1240, lambda: SdpaBlock(False).eval()), part)
    register("sdpa_mask-" + part, _seeded(1241, lambda: SdpaBlock(True).eval()), part)
    register("convnext-" + part, _seeded(1242, _convnext), part)
    register("swin_v2-" + part, _seeded(1243, _swin_v2), part)
    register("llama-" + part, _seeded(1244, _llama), part)
    register("bert-" + part, _seeded(1246, _bert), part)
register("phi3-vulkan", _seeded(1245, _phi3), "vulkan")


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
