"""Tables for docs/parallelism.md: tensor and sequence parallelism measured against the
unsplit model and the closed forms, and DP x TP groups on gpu_cluster; (header, rows) that
dlsys.course.docs writes between their markers. Each runs in seconds on threads."""

from __future__ import annotations

import numpy as np

from ..collectives.dispatch import allreduce
from ..comm.group import Grid
from ..comm.launch import launch
from ..machine.memory import Layout
from ..train import tensor_parallel as tpm
from ..train import tensor_parallel_costs as tpc

LAYOUTS = [
    dict(tp=1),
    dict(tp=2),
    dict(tp=4),
    dict(dp=2, tp=2),
    dict(tp=2, sequence_parallel=True),
    dict(tp=4, sequence_parallel=True),
    dict(dp=2, tp=2, sequence_parallel=True),
]
STEPS = 3
GROUP_NBYTES = 1 << 22  # 4 MiB: big enough that bandwidth, not latency, sets the time
GROUP_WORLD = 16


def name(layout: dict) -> str:
    config = tpm.TPConfig(**layout)
    return f"dp {config.dp} x tp {config.tp}" + (" + SP" if config.sequence_parallel else "")


def max_differences(config: tpm.TPConfig) -> tuple[float, float, float]:
    """Largest |difference| from the unsplit model: first-step logits, the first step's
    gradients (DP replica 0, after the DP mean), weights after ``config.steps``."""
    grid, ref, values = config.check(), tpm.unsplit_run(config), tpm.run(config, "threads").values
    logits = np.concatenate([values[grid.rank_of(d, 0)]["logits"] for d in range(grid.dp)])
    grads, params = tpm.gather_tensors(values, grid, "grads"), tpm.gather_tensors(values, grid, "params")
    return (
        float(np.abs(logits - ref["logits"]).max()),
        max(float(np.abs(grads[k] - ref["grads"][k]).max()) for k in grads),
        max(float(np.abs(params[k] - ref["params"][k]).max()) for k in params),
    )


def table_equality() -> tuple[list[str], list[list]]:
    rows = []
    for dtype in ("float64", "float32"):
        for layout in LAYOUTS:
            diffs = max_differences(tpm.TPConfig(steps=STEPS, dtype=dtype, **layout))
            rows.append([name(layout), dtype, *(f"{d:.0e}" for d in diffs)])
    return ["layout", "dtype", "logits", "gradients", f"weights after {STEPS} steps"], rows


def table_communication() -> tuple[list[str], list[list]]:
    rows = []
    for layout in LAYOUTS[1:]:
        config = tpm.TPConfig(**layout)
        trace = tpm.run(config, "threads").trace
        counts = ", ".join(f"{k} {v}" for k, v in tpc.collectives_per_step(config).items())
        closed = tpc.bytes_per_step(config)
        rows.append(
            [name(layout), counts, f"{sum(m.nbytes for m in trace.messages):,}", f"{closed['tp']:,} + {closed['dp']:,}"]
        )
    return [
        "layout (2 layers)",
        "collectives a TP rank runs per step",
        "bytes on the wire (trace)",
        "closed form: TP + DP groups",
    ], rows


def table_memory() -> tuple[list[str], list[list]]:
    rows = []
    for layout in LAYOUTS:
        config = tpm.TPConfig(dtype="float32", **layout)
        value = tpm.run(config, "threads").values[0]
        params = config.model().params.size
        model_params = Layout(params, ranks=config.tp, tp=config.tp, precision="fp32").bytes()["parameters"]
        rows.append(
            [
                name(layout),
                f"{value['block_activation_nbytes']:,}",
                f"{tpc.activation_model(config):,}",
                f"{value['parameter_nbytes']:,}",
                f"{model_params:,.0f}",
            ]
        )
    return [
        "layout (float32)",
        "block activations measured (B)",
        "Korthikanti + layer-norm 1/std (B)",
        "parameters measured (B)",
        "Layout(tp) parameters (B)",
    ], rows


def _allreduce_on(comm, grid: Grid, axis: str, nbytes: int) -> None:
    dp_group, tp_group = grid.groups(comm)
    allreduce(tp_group if axis == "tp" else dp_group, np.ones(nbytes // 4, np.float32))


def table_groups() -> tuple[list[str], list[list]]:
    rows = []
    tp = 1
    while tp <= GROUP_WORLD:
        grid = Grid.of(GROUP_WORLD, tp)
        costs = tpc.group_costs(grid, GROUP_NBYTES, "gpu-cluster")
        row = [f"dp {grid.dp} x tp {grid.tp}"]
        for axis in ("tp", "dp"):
            measured = launch(
                _allreduce_on, GROUP_WORLD, "threads", topology="gpu-cluster", args=(grid, axis, GROUP_NBYTES)
            ).virtual_time_s
            c = costs[axis]
            link = c["link"] if c["one_link"] else f"{c['link']} (mixed)"
            row += [link, f"{c['allreduce_s'] * 1e6:,.1f}", f"{measured * 1e6:,.1f}"]
        rows.append(row)
        tp *= 2
    return (
        [
            "layout, 16 GPUs",
            "TP ring's link",
            "TP all-reduce, form (µs)",
            "measured (µs)",
            "DP ring's link",
            "DP all-reduce, form (µs)",
            "measured (µs)",
        ],
        rows,
    )


TIME_CONFIG = dict(d_model=128, heads=8, d_ff=512, seq_len=64, batch=8, dtype="float32")  # a wider model: compute shows


def table_time() -> tuple[list[str], list[list]]:
    """One step's virtual time on gpu-cluster (A100 nodes, NVLink inside an island): rank 0's
    charged compute (the split layers' matrix products, ``Region.compute``) and what the
    communication adds on top, the exposed part."""
    rows = []
    for layout in LAYOUTS:
        config = tpm.TPConfig(**TIME_CONFIG, **layout)
        result = tpm.run(config, "threads", topology="gpu-cluster", node="a100")
        compute_s = sum(s.end_s - s.start_s for s in result.trace.spans if s.rank == 0 and s.kind == "compute")
        rows.append(
            [
                name(layout),
                f"{compute_s * 1e6:,.2f}",
                f"{result.virtual_time_s * 1e6:,.2f}",
                f"{(result.virtual_time_s - compute_s) * 1e6:,.2f}",
            ]
        )
    shape = f"d_model {TIME_CONFIG['d_model']}, s {TIME_CONFIG['seq_len']}, batch {TIME_CONFIG['batch']}"
    return (
        [f"layout ({shape}, 2 layers)", "compute, rank 0 (µs)", "virtual time (µs)", "exposed communication (µs)"],
        rows,
    )


TABLES = {
    "parallelism.equality": table_equality,
    "parallelism.communication": table_communication,
    "parallelism.memory": table_memory,
    "parallelism.groups": table_groups,
    "parallelism.time": table_time,
}
