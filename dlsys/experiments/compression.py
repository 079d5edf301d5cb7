"""Gradient compression experiments: what a method does to one real gradient, its residual
over steps, its bytes per model, and what it does to training (accuracy, bytes, time).

    from dlsys.experiments import compression as ex
    ex.compress_once("topk", {"ratio": 0.01})          # a digits gradient before and after
    ex.model_bytes("resnet50", "dgc")                   # per layer: dense vs encoded bytes
    ex.dgc_ratios()                                     # DGC per model, beside the paper's
    ex.pareto()                                         # every method trained: accuracy vs bytes
    ex.feedback_runs(["topk"], epochs=2, seeds=[0, 1])  # with and without error feedback, per seed
    ex.feedback_study()                                 # the biased methods, every seed and setting
    ex.iteration_split("topk", {"ratio": 0.01})         # compute / compression / communication

``pareto`` trains ten models (about 20 s here); its rows are cached in ``PARETO_CACHE``
(rebuilt by ``dlsys compress --pareto --write-cache``; a test checks a fresh run against it).
``feedback_study`` trains 90 (about a minute), cached in ``FEEDBACK_CACHE`` the same way
(``dlsys compress --feedback --write-cache``).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from .. import compress
from ..checks import check_int
from ..collectives.compressed import compressed_allreduce
from ..comm.launch import launch
from ..learn import nn
from ..machine import profiles
from ..machine.net import get_node
from ..outputs import write_atomic
from ..train import Compression, TrainConfig, build_model, load_task
from .training import train

PARETO_CACHE = Path(__file__).with_name("compression_pareto.json")
# The settings the comparison trains with: the methods' own defaults, except where digits in
# 10 epochs needs otherwise (random-k's variance grows as n / k; DGC's warm-up exists for
# ImageNet's early epochs and would dominate the bytes of a 10-epoch run). DGC keeps the
# paper's 0.1%, and on digits it shows: 5 entries of a 4096-entry tensor a step, 1 of a
# bias (the training loop hands flat tensors, so biases are not sent dense), 82% accuracy.
SETTINGS = {
    method: {
        "qsgd": {"bits": 4},
        "topk": {"ratio": 0.01},
        "randomk": {"ratio": 0.25},
        "dropping": {"ratio": 0.01},
        "dgc": {"ratio": 0.001, "warmup_epochs": 0},
    }.get(method, {})
    for method in compress.COMPRESSORS
}
LINKS = ("tcp-1gbe", "rdma-edr")
FEEDBACK_CACHE = Path(__file__).with_name("compression_feedback.json")
FEEDBACK_METHODS = ("onebit", "topk", "dropping", "dgc")  # the biased methods, whose papers keep a residual
FEEDBACK_SEEDS = (0, 1, 2, 3, 4)  # pinned: each seed draws the split, the weights, the batches
# 10 epochs: the Pareto's (dense digits at its plateau); 2: training still under way, where a
# lost gradient signal shows as a lower accuracy rather than as a slower climb to the plateau.
FEEDBACK_EPOCHS = (10, 2)  # a slow and a fast network for the time split


def compression(method: str, options: dict | None = None, memory: str | None = None) -> Compression:
    """The checked ``Compression`` (bad method or options fail here, before any rank);
    ``memory`` None is the method's paper's (error feedback for the biased methods)."""
    return Compression(method, tuple(sorted((options or {}).items())), memory)


def digits_gradient(batch: int = 0, batch_size: int = 128) -> np.ndarray:
    """A real gradient: the digits MLP's, at its initial weights, on training batch ``batch``."""
    task, model = load_task("digits", False, 0), build_model(TrainConfig())
    rows = slice(batch * batch_size, (batch + 1) * batch_size)
    _, dlogits = nn.softmax_cross_entropy(model.forward(task.X_train[rows]), task.y_train[rows])
    model.backward(dlogits)
    return model.grads.copy()


def compress_once(method: str, options: dict | None = None, seed: int = 0) -> dict:
    """One real gradient, compressed and decoded: both arrays, the bytes each takes, and
    the fraction of entries the payload carries (``kept_fraction``: what a threshold
    method achieved, beside the ``ratio`` it was asked for)."""
    compression(method, options)
    grad = digits_gradient()
    compressor = compress.make(method, seed, 0, **(options or {}))
    payload, ctx = compressor.compress(grad, "grads")
    return {
        "method": method,
        "gradient": grad,
        "decoded": compressor.decompress(payload, ctx),
        "dense_nbytes": grad.nbytes,
        "encoded_nbytes": compress.payload_nbytes(payload),
        "kept_fraction": compressor.kept(payload, grad.size) / grad.size,
    }


def residual_history(
    method: str, options: dict | None = None, steps: int = 40, lr: float = 0.1, seed: int = 0
) -> list[dict]:
    """One worker's SGD on digits with compression: per step the norms of the gradient, of
    what was sent (decoded) and of what was not, e = g + e_prev - D(C(g + e_prev)). Methods
    whose paper uses a memory carry e to the next step (error feedback; DGC's momentum
    correction is left out here); unbiased ones drop it (e_prev = 0)."""
    config = TrainConfig(seed=seed)
    task, model = load_task("digits", False, seed), build_model(config)
    compressor = compress.make(method, seed, 0, **(options or {}))
    memory = compress.NoneMemory() if compressor.memory == "none" else compress.ResidualMemory()
    rows = []
    rng = np.random.default_rng(seed)
    for step in range(steps):
        idx = rng.choice(len(task.y_train), 32, replace=False)
        _, dlogits = nn.softmax_cross_entropy(model.forward(task.X_train[idx]), task.y_train[idx])
        model.backward(dlogits)
        g = memory.compensate(model.grads.copy(), "grads")
        payload, ctx = compressor.compress(g, "grads")
        memory.update(g, "grads", compressor, payload, ctx)
        sent = compressor.decompress(payload, ctx)
        model.params -= lr * sent
        rows.append(
            {
                "step": step,
                "kept_fraction": compressor.kept(payload, g.size) / g.size,
                "gradient_norm": float(np.linalg.norm(model.grads)),
                "sent_norm": float(np.linalg.norm(sent)),
                "error_norm": float(np.linalg.norm(g - sent)),
                "carried": compressor.memory != "none",
            }
        )
    return rows


def model_bytes(model: str, method: str, options: dict | None = None, node: str = "v100") -> dict:
    """One iteration's gradients of a model's layer profile (dlsys.machine.profiles), per layer:
    dense fp32 bytes, encoded bytes (the method's formula, which the tests hold to real
    payloads; DGC at its final sparsity) and the node's time to compress them. A method
    that leaves 1-D tensors uncompressed (``compresses(1)`` false: DGC) compresses each
    layer's weight tensor and sends its biases and batch-norm scales (``vectors``) dense;
    the others encode the layer's parameters as one tensor."""
    compression(method, options)
    compressor, node_model = compress.make(method, 0, 0, **(options or {})), get_node(node)
    rows = []
    for layer in profiles.profile(model):
        if not layer.params:
            continue
        dense_vectors = 0 if compressor.compresses(1) else layer.vectors
        compressed = layer.params - dense_vectors
        (cflops, cbytes), (dflops, dbytes) = compressor.cost(compressed, 4)
        rows.append(
            {
                "layer": layer.name,
                "params": layer.params,
                "dense_nbytes": 4 * layer.params,
                "encoded_nbytes": compressor.encoded_nbytes(compressed, 4) + 4 * dense_vectors,
                "dense_vectors": dense_vectors,
                "compress_s": node_model.kernel_s(cflops, cbytes),
                "decompress_s": node_model.kernel_s(dflops, dbytes),
            }
        )
    dense, encoded = sum(r["dense_nbytes"] for r in rows), sum(r["encoded_nbytes"] for r in rows)
    return {
        "model": model,
        "method": method,
        "options": options or {},
        "node": node,
        "layers": rows,
        "dense_nbytes": dense,
        "encoded_nbytes": encoded,
        "ratio": dense / encoded,
        "compress_s": sum(r["compress_s"] for r in rows),
        "decompress_s": sum(r["decompress_s"] for r in rows),
    }


# DGC's published compression ratios at 99.9% sparsity (Lin et al. 2018, Table 2: ImageNet)
# for the models of dlsys.machine.profiles it trained.
DGC_PUBLISHED = {"alexnet": 597, "resnet50": 277}


def dgc_ratios() -> list[dict]:
    """DGC's ratio (dense fp32 / encoded) for every profiled model, counted as the paper
    counts (``dlsys.compress.dgc``: 1-D tensors dense, 6 bytes a kept entry), beside the
    published one where the paper has it. The ratio differs by model with the share of
    parameters in 1-D tensors, which are sent whole: 0.02% of AlexNet's, 0.2% of
    ResNet-50's. Our AlexNet is torchvision's (61.1M parameters, 64 first filters, no
    groups); the paper's is Caffe's (60.97M)."""
    rows = []
    for model in profiles.PROFILES:
        table = model_bytes(model, "dgc")
        vectors = sum(r["dense_vectors"] for r in table["layers"])
        rows.append(
            {
                "model": model,
                "params": sum(r["params"] for r in table["layers"]),
                "dense_vectors": vectors,
                "dense_nbytes": table["dense_nbytes"],
                "encoded_nbytes": table["encoded_nbytes"],
                "ratio": table["ratio"],
                "published": DGC_PUBLISHED.get(model),
            }
        )
    return rows


def train_row(
    method: str,
    options: dict,
    epochs: int = 10,
    workers: int = 4,
    link: str = "tcp-10gbe",
    seed: int = 0,
    memory: str | None = None,
) -> dict:
    """One compressed training run on digits, summarized as a flat row (``memory``: None
    for the paper's, "none" to train without error feedback)."""
    record = train(
        "allreduce",
        TrainConfig(epochs=epochs, seed=seed),
        workers,
        link=link,
        compression=compression(method, options, memory),
    )
    keys = (
        "test_accuracy",
        "virtual_time_s",
        "bytes_moved",
        "bytes_per_step",
        "compression_ratio",
        "kept_fraction",
        "compress_s",
        "decompress_s",
    )
    return {
        "method": method,
        "options": options,
        "epochs": epochs,
        "workers": workers,
        "link": link,
        **{k: record[k] for k in keys},
    }


def feedback_runs(methods, epochs: int, seeds, workers: int = 4, link: str = "tcp-10gbe") -> list[dict]:
    """Error feedback on and off: per seed, dense digits and each of ``methods`` (with its
    ``SETTINGS``) trained with its paper's memory (``feedback`` true) and with none (false),
    one row each: {"method", "feedback", "epochs", "seed", "test_accuracy"}. The seed draws
    the data split, the initial weights, the batches and any compressor's randomness."""
    unknown = [m for m in methods if m not in SETTINGS]
    if unknown or not methods:
        raise ValueError(f"methods: need one or more of {', '.join(SETTINGS)}, got {list(methods)!r}")
    check_int("epochs", epochs, 1)
    seeds = [check_int("seed", s, 0) for s in seeds]
    if len(set(seeds)) < 2:
        raise ValueError(f"seeds: need two or more distinct seeds (a spread), got {seeds!r}")
    runs = [("none", False)] + [(m, feedback) for m in methods for feedback in (True, False)]
    rows = []
    for seed in seeds:
        for method, feedback in runs:
            memory = None if feedback else "none"
            accuracy = train_row(method, SETTINGS[method], epochs, workers, link, seed, memory)["test_accuracy"]
            rows.append(
                {"method": method, "feedback": feedback, "epochs": epochs, "seed": seed, "test_accuracy": accuracy}
            )
    return rows


def feedback_study(progress=None) -> list[dict]:
    """``feedback_runs`` of ``FEEDBACK_METHODS`` over ``FEEDBACK_SEEDS`` at each of
    ``FEEDBACK_EPOCHS``: the error-feedback claim's runs (``dlsys reproduce error-feedback``)."""
    rows = []
    for epochs in FEEDBACK_EPOCHS:
        rows += feedback_runs(FEEDBACK_METHODS, epochs, FEEDBACK_SEEDS)
        if progress:
            progress(f"{epochs} epochs")
    return rows


def cached_feedback() -> list[dict]:
    """``feedback_study()``'s rows as last written by ``write_feedback_cache``."""
    return json.loads(FEEDBACK_CACHE.read_text())


def write_feedback_cache(rows: list[dict]) -> Path:
    FEEDBACK_CACHE.write_text(json.dumps(rows, indent=1) + "\n")
    return FEEDBACK_CACHE


def pareto(
    epochs: int = 10, workers: int = 4, link: str = "tcp-10gbe", settings: dict | None = None, progress=None
) -> list[dict]:
    """Every method trained with ``SETTINGS``: accuracy against bytes per step."""
    rows = []
    for method, options in (settings or SETTINGS).items():
        rows.append(train_row(method, options, epochs, workers, link))
        if progress:
            progress(method)
    return rows


def cached_pareto() -> list[dict]:
    """``pareto()``'s rows as last written by ``write_pareto_cache``."""
    return json.loads(PARETO_CACHE.read_text())


def write_pareto_cache(rows: list[dict]) -> Path:
    write_atomic(PARETO_CACHE, json.dumps(rows, indent=1) + "\n")
    return PARETO_CACHE


def iteration_split(
    method: str, options: dict | None = None, links=LINKS, workers: int = 4, node: str = "laptop-cpu"
) -> list[dict]:
    """The mean iteration of one epoch on each link, split into compute (forward and
    backward), compression (compress and decode) and communication (the rest: sends,
    receives, waiting), from worker 0's trace; dense beside it for comparison."""
    rows = []
    for link in links:
        for name, opts in (("none", {}), (method, options or {})):
            record = train(
                "allreduce", TrainConfig(epochs=1), workers, link=link, node=node, compression=compression(name, opts)
            )
            trace, steps = record["result"].trace, len(record["losses"]) / workers
            spent = {"compute": 0.0, "compression": 0.0, "communication": 0.0}
            for span in trace.spans:
                if span.rank == 0:
                    word = span.label.split(" ")[0]
                    part = (
                        "compute"
                        if span.label == "forward+backward"
                        else "compression"
                        if word in ("compress", "decompress")
                        else "communication"
                    )
                    spent[part] += span.end_s - span.start_s
            rows.append(
                {
                    "link": link,
                    "method": name,
                    **{f"{k}_s": v / steps for k, v in spent.items()},
                    "iteration_s": sum(spent.values()) / steps,
                }
            )
    return rows


def one_exchange(
    method: str, options: dict | None = None, workers: int = 4, link: str = "tcp-10gbe", backend: str = "threads"
):
    """One compressed all-reduce of real digits gradients (a different batch per worker):
    the LaunchResult, whose trace's messages are sized by the encoded bytes."""
    compression(method, options)
    return launch(_exchange_program, workers, backend, link=link, args=(method, options or {}))


def _exchange_program(comm, method: str, options: dict):
    compressor = compress.make(method, 0, comm.rank, **options)
    return compressed_allreduce(
        comm, digits_gradient(batch=comm.rank), compressor, compress.make_memory(compressor.memory), "grads"
    )
