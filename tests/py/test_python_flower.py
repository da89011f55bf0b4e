"""Federated LoRA fine-tuning on Flower (python/wgml/flower.py) with the tiny synthetic Llama:
`python -m wgml.flower` (the wgml-flower command) simulates 3 clients x 3 rounds with Flower's
simulation engine (Ray), each client with its own shard of a text, and client 1's process is
killed (SIGKILL) in the middle of round 2.

Checked: the global held-out loss printed per round falls from round 0 (the initial adapter) to
round 3; every round's averaged adapter (recorded by the strategy) equals a float64 NumPy FedAvg
of the adapters the clients returned, weighted by their example counts; the loss the server
printed is the loss of that average (re-evaluated here); only adapter tensors were exchanged
(the shapes of the trainer's adapter); round 1 has all three clients; in round 2 the killed
client is missing, the round still aggregates the others and the run goes on (Flower's
failure handling; Ray restarts the dead process, and a message that reaches it while it
restarts fails too, which the round also survives).
Usage: test_python_flower.py BUILD_DIR"""
import os
import re
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
BUILD = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build"))
os.environ["WGML_LIBRARY"] = os.path.join(BUILD, "libwgml.so")
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, HERE)
import wgml  # noqa: E402
from test_finetune_cli import write_model  # noqa: E402

failures = 0
passes = 0


def check(ok, what):
    global failures, passes
    if ok:
        passes += 1
    else:
        failures += 1
        print("FAIL:", what, flush=True)


def main():
    t0 = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        model = os.path.join(tmp, "tiny.gguf")
        write_model(model)
        data = os.path.join(tmp, "text.txt")
        with open(data, "w") as f:
            f.write("".join("the theme of line %d: then there were %d sheep in the meadow.\n" % (i, i * 7 % 13)
                            for i in range(60)))
        rec = os.path.join(tmp, "rec")
        os.mkdir(rec)
        # Ray keeps its session folders (logs, sockets) in $RAY_TMPDIR/ray after it stops: here
        # they go with the test's folder
        env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"), RAY_DEDUP_LOGS="0", RAY_TMPDIR=tmp)
        args = ["--model", model, "--data", data, "--clients", "3", "--rounds", "3", "--local-steps", "2", "--rank", "4",
                "--seq-len", "32", "--lr", "3e-3", "--record-dir", rec, "--kill-client", "1", "--kill-round", "2"]
        r = subprocess.run([sys.executable, "-m", "wgml.flower"] + args, capture_output=True, text=True, timeout=600,
                           env=env, cwd=tmp)
        out = r.stdout
        print(out[-2500:], flush=True)
        check(r.returncode == 0, "wgml-flower exits 0 (%d): %s" % (r.returncode, r.stderr[-3000:]))
        hist = {int(m.group(1)): (float(m.group(3)), float(m.group(2)))
                for m in re.finditer(r"round (\d+): global held-out perplexity ([\d.e+]+) \(loss ([\d.]+)", out)}
        check(sorted(hist) == [0, 1, 2, 3], "a held-out perplexity for rounds 0-3: %s" % sorted(hist))
        if sorted(hist) != [0, 1, 2, 3]:
            return 1
        check(hist[3][0] < hist[0][0], "federated rounds lower the global held-out loss (%s)"
              % " -> ".join("%.4f" % hist[k][0] for k in range(4)))
        m = re.search(r"adapter of (\d+) tensors, (\d+) bytes", out)

        mdl = wgml.Model.load(model)
        tr = wgml.Trainer(mdl, rank=4, alpha=16.0, targets=["q", "v"], batch=1, seq_len=32)
        n_bytes = sum(int(np.prod(s)) * 4 for s in tr.shapes)
        check(m is not None and int(m.group(1)) == len(tr.names) and int(m.group(2)) == n_bytes,
              "bytes per client per round: the adapter's (%d)" % n_bytes)
        from wgml.flower import split_data, FederatedConfig
        _, held = split_data(mdl, FederatedConfig(model=model, data=data, clients=3, seq_len=32))
        for rnd in (1, 2, 3):
            path = os.path.join(rec, "round%d.npz" % rnd)
            check(os.path.isfile(path), "round %d recorded" % rnd)
            if not os.path.isfile(path):
                continue
            z = np.load(path)
            nc = len([k for k in z.files if k.startswith("n_client")])
            parts = sorted(int(z["partition_client%d" % c]) for c in range(nc))
            fails = int(z["failures"])
            avg = [z["avg_%d" % i] for i in range(len(tr.names))]
            check([a.shape for a in avg] == list(tr.shapes) and len([k for k in z.files if k.startswith("avg_")]) ==
                  len(tr.names), "round %d: only the adapter's tensors are exchanged" % rnd)
            ns = np.array([float(z["n_client%d" % c]) for c in range(nc)])
            worst = 0.0
            for i in range(len(avg)):
                ref = sum(ns[c] * z["client%d_%d" % (c, i)].astype(np.float64) for c in range(nc)) / ns.sum()
                scale = max(1e-30, float(np.abs(ref).max()))
                worst = max(worst, float(np.abs(avg[i] - ref).max()) / scale)
            check(worst < 1e-6, "round %d: the server's adapter is the FedAvg of %d clients' (rel. diff %.2g)"
                  % (rnd, nc, worst))
            check(all(np.all(np.isfinite(a)) for a in avg), "round %d: a finite average" % rnd)
            tr.set_adapter(dict(zip(tr.names, avg)))
            loss = tr.evaluate(held).loss
            check(abs(loss - hist[rnd][0]) < 1e-4, "round %d: the printed loss %.4f is the average's (%.4f)"
                  % (rnd, hist[rnd][0], loss))
            if rnd == 1:
                check(nc == 3 and fails == 0 and parts == [0, 1, 2], "round 1: all three clients (%s, %d failed)"
                      % (parts, fails))
            elif rnd == 2:
                check(1 not in parts and fails >= 1 and nc >= 1, "round 2: the killed client is left out, the others "
                      "are averaged (%s, %d failed)" % (parts, fails))
            else:
                check(nc >= 1 and nc + fails == 3, "round 3 goes on (%s, %d failed)" % (parts, fails))
        tr.close()
        mdl.close()

        # the deployment entry points (a Flower App on a SuperLink and SuperNodes), called as
        # Flower calls them, with a node's own text and the server's held-out text
        from flwr.common import Context, RecordDict
        from wgml import flower
        run_cfg = {"model": model, "rounds": 2, "clients": 2, "local-steps": 1, "rank": 4, "seq-len": 32,
                   "targets": "q,v"}
        node = os.path.join(tmp, "node.txt")
        with open(node, "w") as f:
            f.write(open(data).read()[:1500])
        # (one role per process, as deployed: the client's work is done before the server's)
        from flwr.common import FitIns, GetParametersIns, ndarrays_to_parameters, parameters_to_ndarrays
        client = flower.deployed_client_fn(Context(1, 7, {"data": node}, RecordDict(), run_cfg))
        init = parameters_to_ndarrays(client.get_parameters(GetParametersIns({})).parameters)
        res = client.fit(FitIns(ndarrays_to_parameters(init), {"server_round": 1}))
        got = parameters_to_ndarrays(res.parameters)
        comp = flower.deployed_server_fn(Context(1, 0, {}, RecordDict(), dict(run_cfg, data=data)))
        strat = comp.strategy
        check(all(np.array_equal(a, b) for a, b in zip(parameters_to_ndarrays(strat.initial_parameters), init)),
              "the server's initial adapter is the clients' (same seed)")
        loss0, _ = strat.evaluate_fn(0, init, {})
        check(comp.config.num_rounds == 2 and strat.min_available_clients == 2 and res.num_examples == 1 and
              [a.shape for a in got] == [a.shape for a in init] and any(np.any(a != b) for a, b in zip(got, init)),
              "deployed ServerApp / ClientApp: settings from the run and node configs, one local step")
        check(np.isfinite(loss0) and loss0 > 0, "deployed server scores its held-out text (%.4f)" % loss0)
        flower._cache.clear()
    print("python flower: %d passed, %d failed (%.0f s)" % (passes, failures, time.time() - t0))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
