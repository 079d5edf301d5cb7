"""The planner's records for the app page, the lesson and docs/planner.md: every fitting
layout ranked by step time, and one layout's breakdown, as tidy rows (``dlsys.planner``)."""

from __future__ import annotations

from ..machine.memory import KINDS
from ..planner import COMPONENTS, MODELS, Plan, breakdown, device_of, model_of, search

DEGREES = ("tp", "pp", "dp", "ep", "zero", "micro_batch", "microbatches", "recompute")


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
    component (``<component>_s``), total, bytes per rank by kind (``<kind>_bytes``), MFU."""
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
) -> dict:
    """One layout's ``planner.breakdown`` (degrees, seconds and bytes by part, fits, MFU)."""
    plan = Plan(model_of(model), gpus, tp, pp, zero, micro_batch, global_batch, recompute, ep=ep)
    return breakdown(plan, device_of(device, device_bytes))


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
        "step",
        "compute",
        "TP",
        "PP",
        "DP (exposed)",
        "EP",
        "bubble",
        "memory / GPU",
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
            *(f"{r[k]:.3f} s" for k in ("step_s", *(f"{c}_s" for c in COMPONENTS))),
            f"{r['memory_bytes'] / 2**30:.1f} GiB",
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
    rows.append(["step (s)", f"{record['step_s']:.4f}", f"MFU {record['mfu']:.1%}"])
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


TABLES = {
    "plan.presets": table_presets,
    "plan.breakdown_7b": table_breakdown,
    "plan.ranked_70b": table_ranked,
    "plan.ranked_8x7b": table_ranked_moe,
}
