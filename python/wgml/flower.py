"""Federated LoRA fine-tuning with wgml on Flower (PyPI ``flwr``).

Each Flower client holds a wgml :class:`~wgml.Trainer` on its own shard of the training text
and the same frozen base model; per round it receives the global adapter, trains
``local_steps`` steps on its shard (AdamW starting afresh each round) and sends the adapter
back with the number of rows it trained on. The server averages the adapters weighted by
those counts (Flower's FedAvg) and scores the held-out text with the averaged adapter.
Only the adapter's tensors cross the wire, never the base model.

``wgml-flower --model M.gguf --data TEXT --clients N --rounds R`` (or ``python -m
wgml.flower``) runs N clients on this machine with Flower's simulation engine (Ray) and
prints the global held-out perplexity per round. docs/FEDERATED.md describes a real
deployment (SuperLink and SuperNodes).
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from dataclasses import asdict, dataclass, fields, replace
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from .model import Model, Trainer, rows_of


@dataclass
class FederatedConfig:
    """One federated run. The data: the text's tokens, the last ``eval_fraction`` held out
    (scored by the server), the rest cut into rows of seq_len + 1 tokens and split into
    ``clients`` contiguous shards, one per client."""
    model: str
    data: str
    clients: int = 3
    rounds: int = 3
    local_steps: int = 2
    rank: int = 4
    alpha: float = 16.0
    targets: Tuple[str, ...] = ("q", "v")
    batch: int = 1
    seq_len: int = 32
    lr: float = 3e-3
    seed: int = 0
    eval_fraction: float = 0.1
    eval_tokens: int = 0          # 0: every held-out row
    client_cpus: float = 1.0      # Ray CPUs per simulated client (clients run in parallel up to the CPUs)
    record_dir: str = ""          # when set: every round's client adapters and the average, as .npz
    kill_client: int = -1         # tests: this partition's process is killed (SIGKILL) ...
    kill_round: int = 0           # ... in this round, in the middle of its local training


def _trainer_kwargs(cfg: FederatedConfig) -> dict:
    return dict(rank=cfg.rank, alpha=cfg.alpha, targets=list(cfg.targets), batch=cfg.batch, seq_len=cfg.seq_len,
                lr=cfg.lr, seed=cfg.seed)


def split_data(model: Model, cfg: FederatedConfig, eval_only: bool = False) -> Tuple[List[np.ndarray], np.ndarray]:
    """(the training rows of each client, the held-out rows); with ``eval_only`` the whole
    text is held out (a deployed server's own evaluation text)."""
    with open(cfg.data, encoding="utf-8") as f:
        ids = model.tokenize(f.read())
    if eval_only:
        return [], rows_of(ids, cfg.seq_len)
    n_eval = int(len(ids) * cfg.eval_fraction)
    train, held = ids[: len(ids) - n_eval], ids[len(ids) - n_eval:]
    rows = rows_of(train, cfg.seq_len)
    if len(rows) < cfg.clients:
        raise ValueError("wgml-flower: %d training rows for %d clients" % (len(rows), cfg.clients))
    return list(np.array_split(rows, cfg.clients)), (rows_of(held, cfg.seq_len) if n_eval else rows[:0])


# ---- one wgml model and trainer per process (a Ray worker serves many simulated clients) ----
_cache: Dict[str, object] = {}


def _process_trainer(cfg: FederatedConfig, eval_only: bool = False):
    key = json.dumps(asdict(cfg), sort_keys=True) + str(eval_only)
    if _cache.get("key") != key:
        for k in ("trainer", "model"):
            if k in _cache:
                _cache.pop(k).close()
        model = Model.load(cfg.model)
        _cache.update(key=key, model=model, trainer=Trainer(model, **_trainer_kwargs(cfg)),
                      shards=split_data(model, cfg, eval_only))
    return _cache["trainer"], _cache["shards"]


def adapter_bytes(trainer: Trainer) -> int:
    """Bytes of the adapter: what one client downloads, and uploads, per round."""
    return sum(int(np.prod(s)) * 4 for s in trainer.shapes)


try:
    import flwr
    from flwr.client import ClientApp, NumPyClient
    from flwr.common import Context, ndarrays_to_parameters
    from flwr.server import ServerApp, ServerAppComponents, ServerConfig
    from flwr.server.strategy import FedAvg
except ImportError:  # the core package works without Flower
    flwr = None
    NumPyClient = FedAvg = object


class WgmlClient(NumPyClient):
    """A Flower client training a wgml LoRA adapter on its shard of the text."""

    def __init__(self, cfg: FederatedConfig, partition: int):
        self.cfg = cfg
        self.partition = partition
        self.trainer, (shards, _) = _process_trainer(cfg)
        self.rows = shards[partition]

    def get_parameters(self, config) -> List[np.ndarray]:
        return list(self.trainer.get_adapter().values())

    def fit(self, parameters: List[np.ndarray], config) -> Tuple[List[np.ndarray], int, dict]:
        """Sets the global adapter, trains local_steps steps on this client's rows (AdamW
        from scratch), returns the adapter, the rows trained on and the mean loss."""
        t, cfg = self.trainer, self.cfg
        rnd = int(config.get("server_round", 1))
        t.set_adapter(dict(zip(t.names, parameters)))
        t.reset_optimizer()
        losses = []
        for s in range(cfg.local_steps):
            if rnd == cfg.kill_round and self.partition == cfg.kill_client and s == cfg.local_steps // 2:
                os.kill(os.getpid(), signal.SIGKILL)  # a device lost mid-round (tests)
            first = ((rnd - 1) * cfg.local_steps + s) * cfg.batch
            idx = [(first + b) % len(self.rows) for b in range(cfg.batch)]
            losses.append(t.step(self.rows[idx]))
        return list(t.get_adapter().values()), cfg.local_steps * cfg.batch, {"loss": float(np.mean(losses)),
                                                                            "partition": self.partition}


class WgmlFedAvg(FedAvg):
    """Flower's FedAvg (adapters averaged weighted by the clients' example counts; a failed
    client is left out of the round) that also records every round for inspection."""

    def __init__(self, cfg: FederatedConfig, **kw):
        super().__init__(**kw)
        self.cfg = cfg

    def aggregate_fit(self, server_round, results, failures):
        params, metrics = super().aggregate_fit(server_round, results, failures)
        if self.cfg.record_dir and params is not None:
            from flwr.common import parameters_to_ndarrays
            rec = {"avg_%d" % i: a for i, a in enumerate(parameters_to_ndarrays(params))}
            for c, (_, res) in enumerate(results):
                rec["n_client%d" % c] = np.array(res.num_examples)
                rec["partition_client%d" % c] = np.array(res.metrics.get("partition", -1))
                for i, a in enumerate(parameters_to_ndarrays(res.parameters)):
                    rec["client%d_%d" % (c, i)] = a
            rec["failures"] = np.array(len(failures))
            np.savez(os.path.join(self.cfg.record_dir, "round%d.npz" % server_round), **rec)
        print("round %d: %d clients trained, %d failed" % (server_round, len(results), len(failures)), flush=True)
        return params, metrics


def _server_fn(cfg: FederatedConfig, history: list, eval_only: bool = False):
    def server_fn(context: "Context") -> "ServerAppComponents":
        trainer, (_, held) = _process_trainer(cfg, eval_only)
        names = trainer.names
        held = held[: max(1, -(-cfg.eval_tokens // cfg.seq_len))] if cfg.eval_tokens else held

        def evaluate(server_round: int, parameters: List[np.ndarray], config):
            trainer.set_adapter(dict(zip(names, parameters)))
            r = trainer.evaluate(held)
            history.append((server_round, r.loss, r.perplexity))
            print("round %d: global held-out perplexity %.4f (loss %.4f over %d tokens)"
                  % (server_round, r.perplexity, r.loss, r.tokens), flush=True)
            return r.loss, {"perplexity": r.perplexity}

        init = list(trainer.get_adapter().values())
        print("wgml-flower: %d clients, %d rounds, adapter of %d tensors, %d bytes each way per client per round"
              % (cfg.clients, cfg.rounds, len(names), adapter_bytes(trainer)), flush=True)
        strategy = WgmlFedAvg(cfg, fraction_fit=1.0, fraction_evaluate=0.0, min_fit_clients=cfg.clients,
                              min_evaluate_clients=0, min_available_clients=cfg.clients, evaluate_fn=evaluate,
                              on_fit_config_fn=lambda rnd: {"server_round": rnd},
                              initial_parameters=ndarrays_to_parameters(init), accept_failures=True)
        return ServerAppComponents(strategy=strategy, config=ServerConfig(num_rounds=cfg.rounds))
    return server_fn


def _client_fn(cfg: FederatedConfig):
    def client_fn(context: "Context"):
        return WgmlClient(cfg, int(context.node_config["partition-id"])).to_client()
    return client_fn


# ---- deployment: a Flower App (flwr run) on a SuperLink and SuperNodes, docs/FEDERATED.md ----

def config_from_context(context: "Context") -> FederatedConfig:
    """The run's settings from Flower's run config (pyproject.toml's [tool.flwr.app.config],
    ``flwr run --run-config``), then the node's own (``flower-supernode --node-config
    "model='...' data='...'"``: each device names its copy of the base model and its local
    text), keys spelled with dashes (``local-steps``)."""
    kw: dict = {}
    for src in (context.run_config, context.node_config):
        for f in fields(FederatedConfig):
            key = f.name.replace("_", "-")
            if key in src:
                v = src[key]
                kw[f.name] = tuple(str(v).split(",")) if f.name == "targets" else v
    return FederatedConfig(**kw)


def deployed_client_fn(context: "Context"):
    """A SuperNode's client: trains on its whole local text (node config ``data``)."""
    cfg = replace(config_from_context(context), clients=1, eval_fraction=0.0)
    return WgmlClient(cfg, 0).to_client()


def deployed_server_fn(context: "Context") -> "ServerAppComponents":
    """The ServerApp: FedAvg over ``clients`` SuperNodes for ``rounds`` rounds, scoring the
    average on its own held-out text (run config ``data``) every round."""
    return _server_fn(config_from_context(context), [], eval_only=True)(context)


if flwr is not None:
    #: ``[tool.flwr.app.components] clientapp = "wgml.flower:client_app"``
    client_app = ClientApp(client_fn=deployed_client_fn)
    #: ``[tool.flwr.app.components] serverapp = "wgml.flower:server_app"``
    server_app = ServerApp(server_fn=deployed_server_fn)


def run(cfg: FederatedConfig) -> List[Tuple[int, float, float]]:
    """Runs the simulation; returns (round, held-out loss, perplexity) for round 0 (the start)
    and every round after it."""
    if flwr is None:
        raise ImportError("wgml.flower needs Flower: pip install 'flwr[simulation]==1.26.1'")
    from flwr.simulation import run_simulation
    # Ray's workers are new processes: they find wgml (and libwgml.so) as this one did
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    os.environ["PYTHONPATH"] = here + os.pathsep + os.environ.get("PYTHONPATH", "")
    from . import _lib
    os.environ.setdefault("WGML_LIBRARY", os.path.abspath(_lib.path))
    history: list = []
    ncpu = max(1, os.cpu_count() or 1)
    run_simulation(server_app=ServerApp(server_fn=_server_fn(cfg, history)), client_app=ClientApp(client_fn=_client_fn(cfg)),
                   num_supernodes=cfg.clients,
                   # max_restarts: Ray restarts a client process that died (a killed client), so
                   # that the clients it would have served next are not lost with it
                   backend_config={"client_resources": {"num_cpus": cfg.client_cpus, "num_gpus": 0.0,
                                                        "max_restarts": 3},
                                   "init_args": {"num_cpus": ncpu, "include_dashboard": False,
                                                 "logging_level": "ERROR", "log_to_driver": True}})
    for k in ("trainer", "model"):
        if k in _cache:
            _cache.pop(k).close()
    _cache.clear()
    return history


def main(argv: Optional[Sequence[str]] = None) -> int:
    """The ``wgml-flower`` command."""
    p = argparse.ArgumentParser(prog="wgml-flower", description="Federated LoRA fine-tuning of a GGUF model with wgml "
                                "on Flower's simulation engine: N clients on this machine, each with its own shard of "
                                "the text; prints the global held-out perplexity per round.")
    d = FederatedConfig("", "")
    p.add_argument("--model", required=True, help="GGUF model (Llama architecture)")
    p.add_argument("--data", required=True, help="UTF-8 text; its last --eval-fraction is held out")
    for name, typ, help_ in (("clients", int, "simulated clients"), ("rounds", int, "federated rounds"),
                             ("local-steps", int, "training steps per client per round"), ("rank", int, "LoRA rank"),
                             ("alpha", float, "LoRA alpha"), ("batch", int, "rows per step"),
                             ("seq-len", int, "tokens per row"), ("lr", float, "AdamW learning rate"),
                             ("seed", int, "adapter init seed"), ("eval-fraction", float, "held-out share"),
                             ("eval-tokens", int, "held-out tokens scored (0: all)"),
                             ("client-cpus", float, "Ray CPUs per client")):
        p.add_argument("--" + name, type=typ, default=getattr(d, name.replace("-", "_")),
                       help="%s (default %s)" % (help_, getattr(d, name.replace("-", "_"))))
    p.add_argument("--targets", default=",".join(d.targets), help="projections with adapters: q,k,v,o,gate,up,down")
    p.add_argument("--record-dir", default="", help="write every round's client adapters and the average (.npz)")
    # tests: kill one client's process in the middle of one round
    p.add_argument("--kill-client", type=int, default=-1, help=argparse.SUPPRESS)
    p.add_argument("--kill-round", type=int, default=0, help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    cfg = FederatedConfig(model=a.model, data=a.data, clients=a.clients, rounds=a.rounds, local_steps=a.local_steps,
                          rank=a.rank, alpha=a.alpha, targets=tuple(a.targets.split(",")), batch=a.batch,
                          seq_len=a.seq_len, lr=a.lr, seed=a.seed, eval_fraction=a.eval_fraction,
                          eval_tokens=a.eval_tokens, client_cpus=a.client_cpus, record_dir=a.record_dir,
                          kill_client=a.kill_client, kill_round=a.kill_round)
    t0 = time.time()
    hist = run(cfg)
    if hist:
        print("held-out perplexity: " + " -> ".join("%.3f" % h[2] for h in hist) + " (%.0f s)" % (time.time() - t0))
    return 0


if __name__ == "__main__":
    # run as wgml.flower, not __main__: Ray pickles the client functions by reference to
    # this module (a __main__ function would be pickled by value, with this process's cache)
    from wgml.flower import main as _main
    sys.exit(_main())
