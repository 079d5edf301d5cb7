"""Measured against modelled memory: a data-parallel run that accounts its numpy bytes.

``ddp_memory`` trains the digits MLP or CNN with Horovod-style data parallelism (every
rank holds the whole model, one all-reduce of the flat gradient buffer per step) and
each rank records in a ``MemoryLedger`` what it holds: its parameters and gradients
(``model.params``, ``model.grads``), the optimizer's state arrays (SGD's velocity) and,
between each forward and its backward, the activations its layers keep
(``nn.activation_nbytes``). ``compare`` sets the ledger's peaks beside
``Layout(P, ranks, zero=0, optimizer="sgd", precision="fp32").bytes()``: 4 + 4 + 4 bytes
per parameter, which the measured ``nbytes`` equal exactly.
"""

from __future__ import annotations

import numpy as np

from ..comm.launch import LaunchResult, launch
from ..comm.trace import Trace
from ..learn import nn, optim
from ..learn.sequence import answer_loss, reversal
from ..learn.task import TrainConfig, build_model, steps_per_epoch, task_of, training_batches
from ..learn.transformer import transformer
from ..machine.ledger import MemoryLedger
from ..machine.memory import KINDS, Layout, Transformer, activation_bytes, bytes_per_param, fsdp, zero_figure1
from ..train.data_parallel import DistributedOptimizer, broadcast_parameters
from ..train.strategies import STRATEGIES
from ..train.zero import units_of
from .training import train


def ddp_memory_program(comm, config: TrainConfig, steps: int) -> MemoryLedger:
    """``steps`` steps of synchronous data parallelism, every allocation in the ledger."""
    ledger = comm.memory
    model = build_model(config)
    ledger.alloc("parameters", model.params.nbytes, "model.params")
    ledger.alloc("gradients", model.grads.nbytes, "model.grads")
    sgd = optim.SGD(model.params, model.grads, config.lr, config.momentum)
    for name in sgd.state_names:
        ledger.alloc("optimizer", getattr(sgd, name).nbytes, f"sgd.{name}")
    opt = DistributedOptimizer(sgd, comm)
    broadcast_parameters(comm, model.params)
    task = task_of(config)
    batches = training_batches(comm, config, task, steps_per_epoch(len(task.y_train), comm.size, config.batch_size))
    for (step, X, y), _ in zip(batches, range(steps)):
        forward_flops = sum(model.flops(len(X)))  # backward: twice the forward (dlsys.learn.task.gradient)
        _, dlogits = nn.softmax_cross_entropy(model.forward(X), y)
        comm.compute(flops=forward_flops, label="forward")
        ledger.alloc("activations", nn.activation_nbytes(model), f"forward {step}")
        model.backward(dlogits)
        comm.compute(flops=2 * forward_flops, label="backward")
        ledger.free(f"forward {step}")
        opt.step()
    return ledger


def ddp_memory(
    model: str = "mlp", ranks: int = 4, steps: int = 3, batch_size: int = 32, backend: str = "threads"
) -> LaunchResult:
    """The run of ``steps`` data-parallel steps on digits: ``values`` are the ranks' ledgers;
    ``result.memory`` too; ``trace.to_chrome(memory=result.memory)`` draws their timelines
    beside the spans."""
    config = TrainConfig(model=model, batch_size=batch_size)
    return launch(ddp_memory_program, ranks, backend, args=(config, steps))


def compare(ledger: MemoryLedger, params: int, ranks: int, optimizer: str = "sgd") -> list[dict]:
    """Kind by kind: the ledger's peak against the closed form (fp32, DDP)."""
    modelled = Layout(params, ranks, zero=0, optimizer=optimizer, precision="fp32").bytes()
    return [
        {"kind": kind, "measured_bytes": ledger.peak_by_kind[kind], "model_bytes": modelled[kind]} for kind in KINDS
    ]


def transformer_states(steps: int = 2) -> tuple[int, MemoryLedger]:
    """The small transformer trained with Adam on one rank, its states in a ledger:
    (parameters, ledger); Adam's m and v are K' = 8 bytes a parameter."""
    model = transformer(vocab=11, seq_len=16, d_model=32, heads=4, layers=2)
    adam = optim.Adam(model.params, model.grads, 1e-3)
    ledger = MemoryLedger()
    ledger.alloc("parameters", model.params.nbytes, "model.params")
    ledger.alloc("gradients", model.grads.nbytes, "model.grads")
    for name in adam.state_names:
        ledger.alloc("optimizer", getattr(adam, name).nbytes, f"adam.{name}")
    for step in range(steps):
        task = reversal(8, length=8, seed=step)
        _, dlogits = answer_loss(model.forward(task.inputs), task)
        ledger.alloc("activations", nn.activation_nbytes(model), f"forward {step}")
        model.backward(dlogits)
        ledger.free(f"forward {step}")
        adam.step()
    return model.params.size, ledger


def transformer_activations(
    layers: int = 2, hidden: int = 32, heads: int = 4, seq_len: int = 16, batch: int = 8
) -> dict:
    """The small transformer's kept tensors after one forward against Korthikanti's count
    for its shapes (4-byte elements, no dropout), and the extras the formula leaves out:
    the layer norms' 1/std per row (2 s b a layer), the embedding's token indices, the final
    layer norm and the output layer's input."""
    model = transformer(vocab=11, seq_len=seq_len, d_model=hidden, heads=heads, layers=layers)
    model.forward(np.random.default_rng(0).integers(0, 11, (batch, seq_len)))
    blocks = model.layers[1 : 1 + 2 * layers]
    measured = sum(a.nbytes for block in blocks for a in block.saved().values())
    formula = activation_bytes(Transformer(layers, hidden, heads, seq_len, batch), element_nbytes=4, dropout=False)
    row_stats = layers * 2 * seq_len * batch * 4
    return {
        "measured_blocks_bytes": measured,
        "formula_bytes": formula,
        "row_stats_bytes": row_stats,
        "outside_blocks_bytes": nn.activation_nbytes(model) - measured,
    }


def sharded_layout(
    model: nn.Sequential,
    ranks: int,
    stage: int,
    unit_layers: int | None = None,
    prefetch: bool = False,
    optimizer: str = "sgd",
) -> dict[str, float]:
    """The closed form of what rank 0 of ``dlsys.train.zero.Sharded`` holds, by kind (fp32).

    Psi is the model's size for what a rank keeps whole and the padded size (every unit
    padded to a multiple of the ranks) for what it shards: rank 0's shard is the largest,
    ceil(unit / ranks) of every unit. The buffers are the largest unit's: its gradient
    (stage 2's bucket) or, under stage 3, also its gathered weights (``Layout.unit_params``)."""
    units = units_of(model, ranks, None if stage == 1 else unit_layers or 1)
    padded, largest = sum(u.shard for u in units) * ranks, max(u.shard for u in units) * ranks
    whole = Layout(model.params.size, ranks, zero=stage, optimizer=optimizer, precision="fp32").bytes()
    sharded = Layout(
        padded,
        ranks,
        zero=stage,
        optimizer=optimizer,
        precision="fp32",
        unit_params=largest if stage == 3 else 0,
        prefetch=prefetch,
        bucket_params=largest if stage == 2 else 0,
    ).bytes()
    return {
        "parameters": (sharded if stage == 3 else whole)["parameters"],
        "gradients": (sharded if stage >= 2 else whole)["gradients"],
        "optimizer": sharded["optimizer"],
        "buffers": sharded["buffers"],
    }


ZERO_CONFIG = TrainConfig(epochs=1, batch_size=16)  # the digits MLP, 8,970 parameters, SGD with momentum
SHARDED = [name for name, s in STRATEGIES.items() if s.family == "sharded"]


def step_bytes_sent(record: dict, rank: int = 0, step: int = 1) -> int:
    """Bytes ``rank`` sent from the start of its step ``step`` to the start of the next (the trace's messages)."""
    starts = [row["time_s"] for row in record["losses"] if row["rank"] == rank]
    return sum(
        m.nbytes
        for m in record["result"].trace.messages
        if m.src == rank and starts[step] <= m.depart_s < starts[step + 1]
    )


def zero_memory_rows(ranks: int = 4) -> list[dict]:
    """Rank 0's measured peak per kind under every sharded strategy against ``sharded_layout``:
    rows {label, kind, measured_bytes, model_bytes}."""
    model, rows = build_model(ZERO_CONFIG), []
    for name in SHARDED:
        fixed = STRATEGIES[name].fixed
        peak = train(name, ZERO_CONFIG, ranks)["memory_peak_bytes"]
        modelled = sharded_layout(model, ranks, fixed["stage"], fixed.get("unit_layers"), fixed.get("prefetch", False))
        rows += [
            {"label": name, "kind": kind, "measured_bytes": peak[kind], "model_bytes": nbytes}
            for kind, nbytes in modelled.items()
        ]
    return rows


# The app's "Memory and sharding" page and lesson 14: every layout of one model side by side.

# (parameters, one layer's shapes for a micro-batch of one sequence): GPT-3's sizes from Brown
# et al. 2020, Table 2.1 (n_params, n_layers, d_model, n_heads, n_ctx = 2048); ZeRO's Figure 1
# example gives only its size, so its activations are not counted
MODEL_PRESETS: dict[str, tuple[int, Transformer | None]] = {
    "GPT-3 XL (1.3B)": (1_300_000_000, Transformer(layers=24, hidden=2048, heads=16, seq_len=2048, batch=1)),
    "GPT-3 6.7B": (6_700_000_000, Transformer(layers=32, hidden=4096, heads=32, seq_len=2048, batch=1)),
    "ZeRO's example (7.5B)": (7_500_000_000, None),
    "GPT-3 (175B)": (175_000_000_000, Transformer(layers=96, hidden=12288, heads=96, seq_len=2048, batch=1)),
}
DEVICE_GIB = (16, 24, 40, 80)  # V100 16 GB, a 24 GB card, A100 40 GB and 80 GB
LAYOUT_NAMES = ("DDP", "ZeRO-1", "ZeRO-2", "ZeRO-3", "FSDP", "TP")
ZERO_FIGURE1_PAPER_GB = {"stage 0": 120.0, "stage 1": 31.4, "stage 2": 16.6, "stage 3": 1.9}  # Rajbhandari Fig. 1


def page_layouts(
    params: int,
    ranks: int,
    shape: Transformer | None = None,
    optimizer: str = "adam",
    precision: str = "mixed",
    tp: int = 2,
    recompute: str = "none",
) -> list[dict]:
    """One row per layout of ``LAYOUT_NAMES`` for ``params`` parameters on ``ranks`` ranks:
    its ``Layout``, a rank's bytes by kind, the total and the bytes a rank sends per step.

    DDP and ZeRO-1..3 shard over all the ranks; FSDP is ZeRO-3 gathering one transformer
    layer (Psi / layers) at a time with prefetch; TP is Megatron's split of degree ``tp``
    with DDP over the ranks / tp copies and sequence parallelism. Bytes sent per rank and
    step, ring collectives over N ranks of the gradients' (g) and weights' (w) element sizes
    (ZeRO section 7.2; Megatron section 3):

        DDP                2 (N-1)/N g Psi            (all-reduce)
        ZeRO-1, ZeRO-2     (N-1)/N (g + w) Psi        (reduce-scatter + all-gather)
        ZeRO-3, FSDP       (N-1)/N (g + 2 w) Psi      (+ the second all-gather in backward)
        TP                 2 (N_d-1)/N_d g Psi / t  +  4 L 2 (t-1)/t s b h w

    the last term the four all-reduces of the activations a layer runs forward and backward
    (not counted without a shape)."""
    if tp < 1 or ranks % tp:
        raise ValueError(
            f"tp must divide ranks={ranks}: one of {[k for k in range(1, ranks + 1) if ranks % k == 0]}, got {tp}"
        )
    w_b, g_b, _ = bytes_per_param(optimizer, precision)
    common = dict(optimizer=optimizer, precision=precision, model=shape, recompute=recompute)
    unit = params // shape.layers if shape else 0
    layouts = {
        "DDP": Layout(params, ranks, zero=0, **common),
        "ZeRO-1": Layout(params, ranks, zero=1, **common),
        "ZeRO-2": Layout(params, ranks, zero=2, **common),
        "ZeRO-3": Layout(params, ranks, zero=3, **common),
        "FSDP": fsdp(params, ranks, unit_params=unit, prefetch=True, **common),
        "TP": Layout(params, ranks, tp=tp, sequence_parallel=True, **common),
    }
    share = (ranks - 1) / ranks
    sent = {
        "DDP": 2 * share * g_b * params,
        "ZeRO-1": share * (g_b + w_b) * params,
        "ZeRO-2": share * (g_b + w_b) * params,
        "ZeRO-3": share * (g_b + 2 * w_b) * params,
        "FSDP": share * (g_b + 2 * w_b) * params,
    }
    dp = ranks // tp
    tp_activations = (
        0
        if shape is None
        else 4 * shape.layers * 2 * (tp - 1) / tp * (shape.seq_len * shape.batch * shape.hidden * w_b)
    )
    sent["TP"] = 2 * (dp - 1) / dp * g_b * params / tp + tp_activations
    rows = []
    for name, layout in layouts.items():
        nbytes = layout.bytes()
        rows.append(
            {
                "layout": name,
                "describe": describe_layout(layout),
                "bytes": nbytes,
                "total_bytes": sum(nbytes.values()),
                "sent_bytes": sent[name],
            }
        )
    return rows


def describe_layout(layout: Layout) -> str:
    """A layout in a few words: "ZeRO-2 over 64", "TP 8 x DP 8"."""
    if layout.tp > 1:
        return f"TP {layout.tp} x DP {layout.dp}" + (" + SP" if layout.sequence_parallel else "")
    if layout.unit_params:
        return f"FSDP over {layout.dp}, one layer gathered" + (" + prefetch" if layout.prefetch else "")
    return f"ZeRO-{layout.zero} over {layout.dp}" if layout.zero else f"DDP over {layout.dp}"


def fitting(rows: list[dict], device_bytes: float) -> list[str]:
    """The layouts whose rank fits a device of ``device_bytes``."""
    return [row["layout"] for row in rows if row["total_bytes"] <= device_bytes]


def zero_figure1_rows() -> list[dict]:
    """ZeRO Figure 1, the paper's GB beside ``zero_figure1``'s bytes."""
    return [
        {"stage": stage, "paper_GB": ZERO_FIGURE1_PAPER_GB[stage], "model_bytes": nbytes}
        for stage, nbytes in zero_figure1().items()
    ]


def step_record(strategy: str, ranks: int = 4) -> dict:
    """One epoch of the digits MLP (``ZERO_CONFIG``) under ``strategy`` ("allreduce" or a
    sharded one), its record with ``step_s``: rank 0's first two step starts and the next
    (the window a timeline of one step draws) and ``step_sent_bytes`` of rank 0 in step 1."""
    record = train(strategy, ZERO_CONFIG, ranks)
    starts = [row["time_s"] for row in record["losses"] if row["rank"] == 0]
    return {**record, "step_s": (starts[1], starts[2]), "step_sent_bytes": step_bytes_sent(record)}


def app_step(strategy: str, ranks: int = 4) -> dict:
    """``step_record``'s step as the memory page draws it, in plain data (JSON) that
    dlsys.course.precomputed can store: ``step_s``, ``step_sent_bytes`` and the spans
    and messages that start in the step under "trace" (``Trace.to_rows``;
    ``records.with_trace`` gives the Trace back)."""
    record = step_record(strategy, ranks)
    (start_s, stop_s), trace = record["step_s"], record["result"].trace
    step = Trace(
        [s for s in trace.spans if start_s <= s.start_s < stop_s],
        [m for m in trace.messages if start_s <= m.depart_s < stop_s],
        trace.world_size,
    )
    return {
        "strategy": strategy,
        "ranks": ranks,
        "step_s": list(record["step_s"]),
        "step_sent_bytes": record["step_sent_bytes"],
        "trace": step.to_rows(),
    }
