"""Large-batch training's published claims (Goyal et al.'s linear rule and warm-up, LARS,
LAMB), read from the committed large-batch study."""

from __future__ import annotations

from collections.abc import Callable

from ...experiments import large_batch
from .verdict import Claim, Plot


def run_large_batch(quick: bool) -> dict:
    """The large-batch study's cache (``dlsys train --sweep batch``; a stale one is refused
    with what to run): the largest batch each rule keeps within the tolerance of the base
    batch, and every optimizer at the largest batch. Both settings read the same cache: the
    study trains for minutes, and a test reruns its quick twin against it."""
    study = large_batch.require_study()
    s = study["study"]
    base, largest, tol = s["base_batch"], max(s["batches"]), s["tolerance"]
    reach = {rule: large_batch.largest_good_batch(study["sweep"], rule, tol) for rule in large_batch.RULES}
    at_largest = {r["optimizer"]: r["test_accuracy"] for r in study["optimizers"] if r["batch"] == largest}
    base_accuracy = next(r["test_accuracy"] for r in study["sweep"] if r["batch"] == base)
    values = {
        **{f"{rule} reach": batch / base for rule, batch in reach.items()},
        **{f"{name} at largest": acc for name, acc in at_largest.items()},
        "base accuracy": base_accuracy,
        "largest": largest,
        "base": base,
        "tolerance": tol,
    }
    rows = [{"series": r["rule"], "x": r["batch"], "y": r["test_accuracy"]} for r in study["sweep"]]
    rows += [
        {"series": f"{r['optimizer']} (optimizer)", "x": r["batch"], "y": r["test_accuracy"]}
        for r in study["optimizers"]
        if r["optimizer"] != "sgd + warm-up"
    ]
    return {"dlsys": values, "rows": rows, "ours": ""}


def large_batch_runner(summary: Callable[[dict], str]) -> Callable[[bool], dict]:
    def run(quick: bool) -> dict:
        measured = run_large_batch(quick)
        return {**measured, "ours": summary(measured["dlsys"])}

    return run


def _reach(v: dict, rule: str) -> str:
    return f"batch {v[f'{rule} reach'] * v['base']:,.0f} ({v[f'{rule} reach']:g}x base)"


def judge_linear_scaling(paper: dict, measured: dict) -> tuple[str, str]:
    v = measured["dlsys"]
    k = v["linear + warm-up reach"]
    if k > v["fixed reach"] and k * v["base"] < v["largest"]:
        return "shape holds", (
            f"accuracy is flat up to {k:g}x the base batch, then breaks, as in the paper; where it "
            "breaks is the problem's (an MLP on digits in 8 epochs, not ResNet-50 on ImageNet in 90)"
        )
    return "differs", "the linear rule with warm-up does not keep a flat stretch that then breaks in this sweep"


def judge_warmup(paper: dict, measured: dict) -> tuple[str, str]:
    v = measured["dlsys"]
    if v["linear + warm-up reach"] > v["linear reach"]:
        return "shape holds", (
            f"warm-up extends the linear rule from {_reach(v, 'linear')} to {_reach(v, 'linear + warm-up')}"
        )
    return "differs", "warm-up does not extend the linear rule's reach on this problem"


def layerwise_judge(optimizer: str) -> Callable[[dict, dict], tuple[str, str]]:
    """ "holds" if ``optimizer`` keeps the base batch's accuracy at the largest batch,
    "shape holds" if it only beats SGD + warm-up there."""

    def judge(paper: dict, measured: dict) -> tuple[str, str]:
        v = measured["dlsys"]
        ours, sgd, base = v[f"{optimizer} at largest"], v["sgd + warm-up at largest"], v["base accuracy"]
        if ours >= base - v["tolerance"]:
            return "holds", f"{ours:.1%} at batch {v['largest']:,.0f} against {base:.1%} at {v['base']:,.0f}"
        if ours > sgd + v["tolerance"]:
            return "shape holds", (
                f"it trains where SGD + warm-up does not ({ours:.1%} against {sgd:.1%} at batch "
                f"{v['largest']:,.0f}), but stays {(base - ours) * 100:.1f} points below batch {v['base']:,.0f} "
                "in the study's 8 epochs"
            )
        return "differs", f"{ours:.1%} at batch {v['largest']:,.0f}, no better than SGD + warm-up ({sgd:.1%})"

    return judge


PLOT = Plot("line", "global batch", "test accuracy", log_x=True)


def layerwise_claim(optimizer: str, paper: str, statement: str, paper_value: str) -> Claim:
    """ "``optimizer`` trains at a large batch without loss", judged by ``layerwise_judge``."""
    return Claim(
        optimizer,
        paper,
        "abstract",
        statement,
        paper_value,
        large_batch_runner(
            lambda v: (
                f"{v[f'{optimizer} at largest']:.1%} at {v['largest']:,.0f} (SGD + warm-up "
                f"{v['sgd + warm-up at largest']:.1%}, batch {v['base']:,.0f} {v['base accuracy']:.1%})"
            )
        ),
        layerwise_judge(optimizer),
        PLOT,
    )


CLAIMS = [
    Claim(
        "linear-scaling",
        "Goyal et al. 2017 (arXiv 1706.02677)",
        "Figure 1",
        "With the linear scaling rule and warm-up, accuracy holds from batch 256 to 8k (32x), then degrades.",
        "flat to 32x the base batch",
        large_batch_runner(lambda v: f"flat to {_reach(v, 'linear + warm-up')}"),
        judge_linear_scaling,
        PLOT,
        {"linear + warm-up reach": 32.0},
    ),
    Claim(
        "warmup",
        "Goyal et al. 2017 (arXiv 1706.02677)",
        "section 2.2, Figure 2",
        "Without gradual warm-up the linear rule fails at large batches; with it, it trains.",
        "warm-up extends the linear rule",
        large_batch_runner(lambda v: f"linear {_reach(v, 'linear')}, with warm-up {_reach(v, 'linear + warm-up')}"),
        judge_warmup,
        PLOT,
    ),
    layerwise_claim(
        "lars",
        "You, Gitman & Ginsburg 2017 (arXiv 1708.03888)",
        "LARS trains AlexNet at batch 8K and ResNet-50 at 32K without loss of accuracy, where SGD fails.",
        "no loss at 8K-32K",
    ),
    layerwise_claim(
        "lamb",
        "You et al. 2020 (ICLR)",
        "LAMB trains BERT at batch 32K without loss of accuracy, with no per-layer tuning of rates.",
        "no loss at 32K",
    ),
]
