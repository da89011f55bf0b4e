"""wgml: neural-network training and inference on any GPU through WebGPU, from Python.

A thin, pure-Python layer (ctypes) over the C library libwgml.so. The pieces:

- :class:`Context` - a GPU device (``Context().info`` names the adapter); errors raise
  :class:`WgmlError`, whose message is wgml's own (``wgml_last_error``).
- :class:`Graph` and :class:`Tensor` - ``ctx.eager`` runs ops as their results are read;
  ``ctx.graph()`` records ops once, then ``compile()`` and ``run()`` many times. Tensors come
  from and go to NumPy (``g.tensor(array)``, ``t.numpy()``, ``t.write(array)``), bit-exact,
  with dtype and shape checks. Autograd: ``t.requires_grad_()``, ``g.backward(loss)``,
  ``t.grad``; optimizers: ``g.adamw(...)``; LoRA: ``g.lora(...)``.
- :class:`Model` - ``Model.load("model.gguf")``; ``tokenize``, ``generate`` (a streaming
  iterator of text), ``eval(text)`` (loss and perplexity), ``set_adapter``.
- :class:`Trainer` - LoRA fine-tuning of a model: ``step(batch)``, ``get_adapter()`` /
  ``set_adapter()`` as NumPy arrays, ``save_checkpoint`` / ``load_checkpoint``.
- ``wgml.flower`` - federated LoRA fine-tuning on Flower (``wgml-flower``).

Threads: the library is loaded as a ctypes CDLL, so every call into it releases the GIL while
it runs; other Python threads keep running while the GPU works (a long ``Trainer.step`` or
``Graph.run(wait=True)`` does not block them). One context should be used by one thread at a
time.

Example::

    import numpy as np, wgml
    with wgml.Context() as ctx:
        a = ctx.tensor(np.arange(6, dtype=np.float32).reshape(2, 3))
        print((a @ a.T).numpy())
"""
from ._lib import path as library_path
from .core import DTYPES, AdamW, Context, DeviceInfo, Graph, LoRA, Tensor, WgmlError
from .model import EvalResult, Model, ModelConfig, Trainer, read_safetensors, rows_of, write_safetensors

__all__ = ["Context", "DeviceInfo", "Graph", "Tensor", "AdamW", "LoRA", "WgmlError", "Model", "ModelConfig",
           "EvalResult", "Trainer", "rows_of", "read_safetensors", "write_safetensors", "library_path", "DTYPES"]
__version__ = "0.1.0"
