"""``dlsys plan``: the layout of a large run, DP x TP x PP (x EP) with ZeRO on a GPU cluster.

    dlsys plan --model 7b --gpus 64 --tp 2 --pp 2 [--zero 1] [--microbatches 16 | --micro-batch-size 2]
    dlsys plan --model 8x7b --gpus 256 --tp 2 --pp 4 --ep 8          # a mixture of experts
    dlsys plan --model 70b --gpus 1024 [--zero Z] [--micro-batch-size B] [--recompute R] [--top 10]
    dlsys plan --model 70B --gpus 1024 --device A100 --tp 8 --pp 8 --virtual-stages 2 --sequence-parallel off
    dlsys plan --layers 24 --hidden 2048 --heads 16 --ffn 8192 --vocab 50304 --seq 2048 --gpus 32

With any of --tp, --pp, --dp: that layout's step (compute, exposed communication per
dimension, the pipeline bubble, the optimizer), the achieved TFLOP/s a GPU and the MFU, and
the fullest GPU's memory by kind against the device. Without them: every layout that fits
(tp dividing the NVLink island of 8, any pp up to the layers, ep dividing dp and a
mixture's experts, ZeRO 0..3, micro-batches of 1, 2, 4, 8 sequences, each recomputation,
sequence parallelism on or off, TP overlap, interleaving; an option given holds it fixed),
fastest first. The model is ``dlsys.planner`` (docs/planner.md): kernels as a roofline on
the device's measured matmul ceiling and HBM bandwidth; times in s, memory in GiB (2^30
bytes). Model and device names in any case.
"""

from __future__ import annotations

import argparse
import json

from ..machine.memory import KINDS, RECOMPUTE
from ..planner import CAVEATS, COMPONENTS, DEVICES, MODELS, Plan, breakdown, device_of, model_of, search
from .options import Checked, integer, print_table, refuse_unused, size

MAX = 10**6
SWITCH = {"on": True, "off": False}


def one_of(names):
    """Checker: one of ``names``, in any case."""

    def check(text: str) -> str:
        if text.lower() not in names:
            raise ValueError(f"must be one of {', '.join(names)} (any case), got {text}")
        return text.lower()

    return check


def add_commands(subparsers) -> None:
    p = subparsers.add_parser(
        "plan",
        help="the layout of a large run: DP x TP x PP x ZeRO, step time and memory",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--model", action=Checked, check=one_of(MODELS), help=f"a preset, any case: {', '.join(MODELS)}")
    for flag, what in (
        ("--layers", "transformer layers"),
        ("--hidden", "hidden size h"),
        ("--heads", "attention heads"),
        ("--kv-heads", "key-value heads (GQA; default: --heads)"),
        ("--ffn", "MLP width (SwiGLU)"),
        ("--vocab", "vocabulary"),
        ("--seq", "sequence length s"),
    ):
        p.add_argument(flag, action=Checked, check=integer(1, MAX * 1000), help=what)
    p.add_argument("--experts", action=Checked, check=integer(0, 4096), help="experts a layer (0: dense MLP)")
    p.add_argument("--top-k", action=Checked, check=integer(1, 4096), help="experts a token runs through")
    p.add_argument("--gpus", required=True, action=Checked, check=integer(1, MAX), help="GPUs = dp x tp x pp")
    p.add_argument("--tp", action=Checked, check=integer(1, MAX), help="tensor-parallel degree (inside an island)")
    p.add_argument("--pp", action=Checked, check=integer(1, MAX), help="pipeline stages (1F1B)")
    p.add_argument("--dp", action=Checked, check=integer(1, MAX), help="data-parallel copies")
    p.add_argument(
        "--ep",
        action=Checked,
        check=integer(1, MAX),
        help="expert-parallel degree (divides dp and the experts; default 1 for one layout)",
    )
    p.add_argument("--zero", action=Checked, check=integer(0, 3), help="ZeRO stage 0..3 (default 0 for one layout)")
    p.add_argument("--microbatches", action=Checked, check=integer(1, MAX), help="m micro-batches a step (one layout)")
    p.add_argument(
        "--micro-batch-size", action=Checked, check=integer(1, MAX), help="sequences a micro-batch (default 1)"
    )
    p.add_argument(
        "--global-batch", default=1024, action=Checked, check=integer(1, 10**9), help="sequences a step (default 1024)"
    )
    p.add_argument("--recompute", choices=RECOMPUTE, help="activation recomputation (default none for one layout)")
    p.add_argument(
        "--virtual-stages",
        action=Checked,
        check=integer(1, MAX),
        help="interleaved 1F1B: chunks a pipeline stage (divides its layers; default 1 for one layout)",
    )
    p.add_argument(
        "--sequence-parallel",
        action=Checked,
        check=one_of(SWITCH),
        help="on or off (default on when tp > 1 for one layout)",
    )
    p.add_argument(
        "--tp-overlap",
        action=Checked,
        check=one_of(SWITCH),
        help="TP collectives overlapped with the GEMMs: on or off (needs sequence parallelism; default off)",
    )
    p.add_argument(
        "--device",
        default="h100",
        action=Checked,
        check=one_of(DEVICES),
        help=f"the accelerator, any case: {', '.join(DEVICES)} (peaks, memory, links: docs/planner.md)",
    )
    p.add_argument(
        "--device-memory", action=Checked, check=size(1), help="its memory, e.g. 80GiB (default the preset's)"
    )
    p.add_argument("--top", default=10, action=Checked, check=integer(1, 10**6), help="layouts to print (search)")
    p.add_argument("--json", action="store_true", help="print JSON (seconds, bytes)")
    p.set_defaults(func=cmd_plan)


def one_layout(args, model, gpus: int) -> Plan:
    """The layout the degrees name: missing tp, pp default to 1, dp to gpus / (tp pp)."""
    tp, pp = args.tp or 1, args.pp or 1
    dp = args.dp if args.dp is not None else gpus // (tp * pp)
    if dp * tp * pp != gpus:
        raise ValueError(f"--dp x --tp x --pp must equal --gpus {gpus}, got {dp} x {tp} x {pp} = {dp * tp * pp}")
    micro_batch = args.micro_batch_size or 1
    if args.microbatches is not None:
        if args.global_batch % (dp * args.microbatches):
            raise ValueError(
                f"--microbatches: dp x microbatches = {dp} x {args.microbatches} must divide "
                f"--global-batch {args.global_batch}"
            )
        micro_batch = args.global_batch // (dp * args.microbatches)
        if args.micro_batch_size not in (None, micro_batch):
            raise ValueError(
                f"--micro-batch-size {args.micro_batch_size} and --microbatches {args.microbatches} "
                f"disagree: global batch {args.global_batch} / (dp {dp} x {args.microbatches}) = "
                f"{micro_batch}"
            )
    return Plan(
        model,
        gpus,
        tp,
        pp,
        args.zero or 0,
        micro_batch,
        args.global_batch,
        args.recompute or "none",
        ep=args.ep or 1,
        device=device_of(args.device, args.device_memory),
        sequence_parallel=_switch(args.sequence_parallel),
        virtual_stages=args.virtual_stages or 1,
        tp_overlap=bool(_switch(args.tp_overlap)),
    )


def _switch(value: str | None) -> bool | None:
    return None if value is None else SWITCH[value]


def cmd_plan(args) -> int:
    model = model_of(
        args.model,
        layers=args.layers,
        hidden=args.hidden,
        heads=args.heads,
        kv_heads=args.kv_heads,
        ffn=args.ffn,
        vocab=args.vocab,
        seq_len=args.seq,
        experts=args.experts,
        top_k=args.top_k,
    )
    device = device_of(args.device, args.device_memory)
    if any(v is not None for v in (args.tp, args.pp, args.dp)):
        record = breakdown(one_layout(args, model, args.gpus))
        if args.json:
            print(json.dumps(record))
            return 0
        print_layout(record, model)
        return 0
    refuse_unused(
        {"--microbatches": args.microbatches},
        "the search (give --tp, --pp or --dp for one layout; --micro-batch-size holds the search's)",
    )
    rows = search(
        model,
        args.gpus,
        args.global_batch,
        device,
        zero=args.zero,
        micro_batch=args.micro_batch_size,
        recompute=args.recompute,
        ep=args.ep,
        sequence_parallel=_switch(args.sequence_parallel),
        tp_overlap=_switch(args.tp_overlap),
        virtual_stages=args.virtual_stages,
    )
    if args.json:
        print(json.dumps(rows[: args.top]))
        return 0
    title = (
        f"{model.name} ({model.params() / 1e9:.2f} B parameters) on {args.gpus} x {device.name} "
        f"({device.memory_bytes / 2**30:g} GiB), global batch {args.global_batch} x {model.seq_len} tokens: "
    )
    if not rows:
        print(title + "no layout fits; give more GPUs, --device-memory, or allow recomputation")
        return 1
    print(title + f"{len(rows)} layouts fit, the fastest {min(args.top, len(rows))}:")
    header = ("#", "tp", "pp", "dp", "ep", "ZeRO", "b", "m", "v", "SP", "overlap", "recompute", "step s")
    header += (*(f"{c} s" for c in COMPONENTS), "GiB/GPU", "TFLOP/s", "MFU")
    lines = [header] + [
        (
            str(i),
            *(str(r[k]) for k in ("tp", "pp", "dp", "ep", "zero", "micro_batch", "microbatches", "virtual_stages")),
            "on" if r["sequence_parallel"] else "off",
            "on" if r["tp_overlap"] else "off",
            r["recompute"],
            f"{r['step_s']:.3f}",
            *(f"{r['seconds'][c]:.3f}" for c in COMPONENTS),
            f"{r['memory_bytes'] / 2**30:.1f}",
            f"{r['tflops']:.0f}",
            f"{r['mfu']:.1%}",
        )
        for i, r in enumerate(rows[: args.top], start=1)
    ]
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    for line in lines:
        print("  ".join(cell.rjust(w) for cell, w in zip(line, widths)))
    print(
        "b: sequences a micro-batch, m: micro-batches a step, v: chunks a stage (interleaved 1F1B); tp, pp, dp, "
        "ep: exposed communication; bubble: 1F1B's fill and drain"
    )
    print(RATES.format(peak=device.peak_flops / 1e12, device=device.name))
    print(f"caveats: {CAVEATS}")
    return 0


RATES = (
    "TFLOP/s: achieved a GPU in Megatron's count (Narayanan et al. 2021, eq. 3: the matrix products the step "
    "runs, recomputation included); MFU: the model's FLOPs (no recomputation) / (GPUs x {peak:g} TFLOP/s, "
    "the {device}'s dense BF16 peak x step)"
)


def print_layout(record: dict, model) -> None:
    step = record["step_s"]
    rows = [(c, f"{record['seconds'][c]:10.4f} s  {record['seconds'][c] / step:6.1%}") for c in COMPONENTS]
    rows.append(("step", f"{step:10.4f} s"))
    rows.append(
        (
            "achieved",
            f"{record['tflops']:10.1f} TFLOP/s a GPU ({record['hfu']:.1%} of peak, Megatron's count); "
            f"MFU {record['mfu']:.1%}",
        )
    )
    print_table(
        rows,
        f"{model.name} ({model.params() / 1e9:.2f} B parameters) on {record['gpus']} GPUs: dp {record['dp']} "
        f"x tp {record['tp']} x pp {record['pp']}"
        + (f" (ep {record['ep']})" if record["ep"] > 1 else "")
        + f", ZeRO {record['zero']}, {record['microbatches']} "
        f"micro-batches of {record['micro_batch']} sequences, recompute {record['recompute']}, "
        f"v {record['virtual_stages']}, SP {'on' if record['sequence_parallel'] else 'off'}, "
        f"TP overlap {'on' if record['tp_overlap'] else 'off'}, {record['device']}",
    )
    rows = [(k, f"{record['bytes'][k] / 2**30:10.2f} GiB") for k in KINDS]
    rows.append(
        (
            "total",
            f"{record['memory_bytes'] / 2**30:10.2f} GiB of {record['device_bytes'] / 2**30:g} GiB "
            f"({record['device']}): {'fits' if record['fits'] else 'does NOT fit'}",
        )
    )
    print_table(rows, "the fullest GPU (pipeline stage 0: the embedding, pp micro-batches of activations in flight)")
    print(RATES.format(peak=record["device_peak_flops"] / 1e12, device=record["device"]))
    print(f"caveats: {CAVEATS}")
