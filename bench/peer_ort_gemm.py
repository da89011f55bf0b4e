"""ONNX Runtime's WebGPU execution provider as the WebGPU peer for fp32 GEMM: a graph of R chained
square MatMuls (C1 = A·B, C2 = C1·B, ..., fp32, A and B initializers, so nothing is uploaded per
run) and a ReduceSum of the last product (so the read-back is one number), run with
WebGpuExecutionProvider (Dawn over Vulkan) with every graph optimisation but constant folding
(which would compute the chain at session creation).
TFLOP/s = R·2·N^3 / median run time (the reduction, ~N^2 reads, is counted against the peer).
Usage: peer_ort_gemm.py N[,N...]; prints "peer ort_matmul_NxNxN <GFLOP/s>"."""
import sys
import time

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper


def graph(n, r):
    rng = np.random.default_rng(0)
    a = (rng.standard_normal((n, n)) / np.sqrt(n)).astype(np.float32)
    b = (rng.standard_normal((n, n)) / np.sqrt(n)).astype(np.float32)
    nodes, prev = [], "A"
    for i in range(r):
        nodes.append(helper.make_node("MatMul", [prev, "B"], [f"C{i}"]))
        prev = f"C{i}"
    nodes.append(helper.make_node("ReduceSum", [prev], ["S"], keepdims=0))
    g = helper.make_graph(nodes, "chain", [], [helper.make_tensor_value_info("S", TensorProto.FLOAT, [])],
                          initializer=[numpy_helper.from_array(a, "A"), numpy_helper.from_array(b, "B")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m.SerializeToString()


def main(sizes):
    print(f"onnxruntime {ort.__version__}, providers {ort.get_available_providers()}")
    for n in sizes:
        r = 8 if n <= 4096 else 3
        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        s = ort.InferenceSession(graph(n, r), so, providers=["WebGpuExecutionProvider"],
                                 disabled_optimizers=["ConstantFolding"])
        assert s.get_providers()[0] == "WebGpuExecutionProvider", s.get_providers()
        for _ in range(3):
            s.run(None, {})
        ts = []
        for _ in range(10):
            t0 = time.perf_counter()
            s.run(None, {})
            ts.append(time.perf_counter() - t0)
        ts.sort()
        t = ts[len(ts) // 2]
        print(f"peer ort_matmul_{n}x{n}x{n} {r * 2.0 * n ** 3 / t / 1e9:.1f} GFLOP/s "
              f"({r} chained MatMuls + ReduceSum, median {t * 1e3:.2f} ms of 10, WebGpuExecutionProvider)")


if __name__ == "__main__":
    main([int(v) for v in sys.argv[1].split(",")])
