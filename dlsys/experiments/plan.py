"""The planner's records for the app page, the lesson and docs/planner.md: every fitting
layout ranked by step time, and one layout's breakdown, as tidy rows (``dlsys.planner``)."""

from __future__ import annotations

from ..machine.memory import KINDS
from ..planner import COMPONENTS, DEVICES, MODELS, Plan, breakdown, device_of, model_of, search
from ..planner import published as megatron

DEGREES = (
    "tp",
    "pp",
    "dp",
    "ep",
    "zero",
    "micro_batch",
    "microbatches",
    "recompute",
    "sequence_parallel",
    "tp_overlap",
    "virtual_stages",
)


def ranked(
    model: str = "70b",
    gpus: int = 1024,
    global_batch: int = 1024,
    device: str = "h100",
    device_bytes: int | None = None,
    top: int | None = None,
    **fixed,
) -> list[dict]:
    """One row per fitting layout, fastest first: its rank, degrees, step seconds by
    component (``<component>_s``), total, bytes per rank by kind (``<kind>_bytes``),
    achieved TFLOP/s a GPU and MFU."""
    rows = search(model_of(model), gpus, global_batch, device_of(device, device_bytes), **fixed)
    return [_flat(i, row) for i, row in enumerate(rows[:top] if top else rows, start=1)]


def layout_record(
    model: str = "7b",
    gpus: int = 64,
    tp: int = 1,
    pp: int = 1,
    zero: int = 0,
    micro_batch: int = 1,
    global_batch: int = 1024,
    recompute: str = "none",
    device: str = "h100",
    device_bytes: int | None = None,
    ep: int = 1,
    **schedule,
) -> dict:
    """One layout's ``planner.breakdown`` (degrees, seconds and bytes by part, fits,
    TFLOP/s, MFU); ``schedule``: sequence_parallel, tp_overlap, virtual_stages."""
    plan = Plan(
        model_of(model),
        gpus,
        tp,
        pp,
        zero,
        micro_batch,
        global_batch,
        recompute,
        ep=ep,
        device=device_of(device, device_bytes),
        **schedule,
    )
    return breakdown(plan)


def components(record: dict) -> list[dict]:
    """A breakdown's step as tidy rows: component, seconds, share of the step."""
    return [
        {"component": c, "seconds": record["seconds"][c], "share": record["seconds"][c] / record["step_s"]}
        for c in COMPONENTS
    ]


def memory_rows(record: dict) -> list[dict]:
    """A breakdown's bytes per rank as tidy rows: kind, bytes, the device's bytes."""
    return [{"kind": k, "bytes": record["bytes"][k], "device_bytes": record["device_bytes"]} for k in KINDS]


def _flat(rank: int, row: dict) -> dict:
    return {
        "rank": rank,
        **{k: row[k] for k in DEGREES},
        "step_s": row["step_s"],
        **{f"{c}_s": row["seconds"][c] for c in COMPONENTS},
        **{f"{k}_bytes": row["bytes"][k] for k in KINDS},
        "memory_bytes": row["memory_bytes"],
        "device_bytes": row["device_bytes"],
        "tflops": row["tflops"],
        "mfu": row["mfu"],
    }


def table_ranked(
    model: str = "70b", gpus: int = 1024, top: int = 10, global_batch: int = 1024
) -> tuple[list[str], list[list]]:
    """docs/planner.md: the fastest layouts of ``model`` on ``gpus`` H100s."""
    header = [
        "#",
        "tp",
        "pp",
        "dp",
        "ep",
        "ZeRO",
        "micro-batch",
        "micro-batches",
        "recompute",
        "SP",
        "TP overlap",
        "v",
        "step",
        "compute",
        "TP",
        "PP",
        "DP (exposed)",
        "EP",
        "bubble",
        "optimizer",
        "memory / GPU",
        "TFLOP/s",
        "MFU",
    ]
    rows = [
        [
            r["rank"],
            r["tp"],
            r["pp"],
            r["dp"],
            r["ep"],
            r["zero"],
            r["micro_batch"],
            r["microbatches"],
            r["recompute"],
            "on" if r["sequence_parallel"] else "off",
            "on" if r["tp_overlap"] else "off",
            r["virtual_stages"],
            *(f"{r[k]:.3f} s" for k in ("step_s", *(f"{c}_s" for c in COMPONENTS))),
            f"{r['memory_bytes'] / 2**30:.1f} GiB",
            f"{r['tflops']:.0f}",
            f"{r['mfu']:.1%}",
        ]
        for r in ranked(model, gpus, global_batch, top=top)
    ]
    return header, rows


def table_presets() -> tuple[list[str], list[list]]:
    """docs/planner.md: each preset's shape, our count and the published one."""
    header = [
        "preset",
        "model",
        "layers",
        "hidden",
        "heads",
        "kv heads",
        "ffn",
        "experts (top k)",
        "vocab",
        "seq",
        "parameters (formula)",
        "active",
        "published",
        "formula / published",
    ]
    return header, [
        [
            key,
            m.name,
            m.layers,
            m.hidden,
            m.heads,
            m.kv_heads,
            m.ffn,
            f"{m.experts} ({m.top_k})" if m.experts else "dense",
            m.vocab,
            m.seq_len,
            f"{m.params():,}",
            f"{m.active_params():,}",
            f"{m.published_params:,}",
            f"{m.params() / m.published_params:.4f}",
        ]
        for key, m in MODELS.items()
    ]


def table_breakdown(
    model: str = "7b",
    gpus: int = 64,
    tp: int = 2,
    pp: int = 2,
    zero: int = 1,
    micro_batch: int = 4,
    recompute: str = "selective",
) -> tuple[list[str], list[list]]:
    """docs/planner.md: one layout's step by component and its memory by kind."""
    record = layout_record(model, gpus, tp, pp, zero, micro_batch, recompute=recompute)
    rows = [
        [f"{r['component']} (s)", f"{r['seconds']:.4f}", f"{r['share']:.1%} of the step"] for r in components(record)
    ]
    rows.append(
        ["step (s)", f"{record['step_s']:.4f}", f"{record['tflops']:.0f} TFLOP/s a GPU, MFU {record['mfu']:.1%}"]
    )
    rows += [[f"{r['kind']} (GiB)", f"{r['bytes'] / 2**30:.2f}", ""] for r in memory_rows(record)]
    rows.append(
        [
            "memory (GiB)",
            f"{record['memory_bytes'] / 2**30:.2f}",
            f"{'fits' if record['fits'] else 'does not fit'} in {record['device_bytes'] / 2**30:g} GiB",
        ]
    )
    title = (
        f"{record['model']}, {gpus} GPUs: dp {record['dp']} x tp {tp} x pp {pp}, ZeRO {zero}, "
        f"{record['microbatches']} micro-batches of {micro_batch}, recompute {recompute}"
    )
    return [title, "value", ""], rows


def table_ranked_moe() -> tuple[list[str], list[list]]:
    """docs/planner.md: the fastest layouts of Mixtral-8x7B on 256 H100s, 256 sequences a step."""
    return table_ranked("8x7b", 256, top=8, global_batch=256)


def table_devices() -> tuple[list[str], list[list]]:
    """docs/planner.md: every device's numbers and where they come from."""
    header = [
        "device",
        "name",
        "peak (dense BF16)",
        "matmul ceiling",
        "HBM",
        "HBM bandwidth",
        "SMs",
        "NVLink",
        "InfiniBand",
        "source",
    ]
    return header, [
        [
            key,
            d.name,
            f"{d.peak_flops / 1e12:g} TFLOP/s",
            f"{d.gemm_flops / 1e12:g} TFLOP/s ({d.gemm_flops / d.peak_flops:.1%})",
            f"{d.memory_bytes / 2**30:.1f} GiB",
            f"{d.hbm_Bps / 1e9:,.0f} GB/s",
            d.sms,
            f"{d.island} GPUs, {d.nvlink_Bps / 1e9:g} GB/s each way",
            f"{d.ib_Bps * 8 / 1e9:g} Gb/s a GPU",
            d.source,
        ]
        for key, d in DEVICES.items()
    ]


def table_megatron() -> tuple[list[str], list[list]]:
    """docs/planner.md: Megatron SC'21's Table 1 (and GPT-3 of section 5.1) beside the planner."""
    header = [
        "run",
        "layout",
        "paper TFLOP/s (of peak)",
        "dlsys TFLOP/s (of peak)",
        "dlsys / paper",
        "within 20%",
        "layout's rank",
        "planner's choice",
    ]
    return header, [
        [
            line["run"],
            line["layout"],
            f"{line['paper_tflops']:g} ({line['paper_percent']}%)",
            f"{line['dlsys_tflops']:.0f} ({line['dlsys_percent']:.0f}%)",
            f"{line['ratio']:.2f}",
            "yes" if line["within"] else "no",
            f"{line['rank']} of {line['layouts']}",
            line["choice"],
        ]
        for line in megatron.table_1_lines()
    ]


def table_figure_13() -> tuple[list[str], list[list]]:
    """docs/planner.md: section 5.4.1's 161B on 64 A100s, TFLOP/s a GPU by (tp, pp) and batch."""
    lines = megatron.figure_13_lines()
    layouts = megatron.FIGURE_13_LAYOUTS
    header = ["batch", *(f"tp {t} pp {p}" for t, p in layouts), "fastest", "TP 8 best (paper)"]
    return header, [
        [
            line["batch"],
            *(f"{line['tflops'][k]:.0f}" for k in layouts),
            f"tp {line['best'][0]} pp {line['best'][1]}",
            "yes" if line["holds"] else "no",
        ]
        for line in lines
    ]


TABLES = {
    "plan.devices": table_devices,
    "plan.megatron": table_megatron,
    "plan.figure_13": table_figure_13,
    "plan.presets": table_presets,
    "plan.breakdown_7b": table_breakdown,
    "plan.ranked_70b": table_ranked,
    "plan.ranked_8x7b": table_ranked_moe,
}
