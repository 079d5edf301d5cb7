"""docs/scheduling.md's tables: P3 against MXNet as P3's paper ran them."""

from __future__ import annotations

from ...experiments import p3_paper
from ...units import format_seconds
from .. import reproduce
from . import Sources, markdown_table


def p3_sweep_rows(model: str, bandwidths) -> tuple[list[list[str]], list[dict], list[dict]]:
    """The rows of ``p3_sweeps`` for one model at ``bandwidths``, with the records behind them
    (links shared, then not shared)."""
    sweep = p3_paper.p3_reproduction(model, bandwidths)
    apart = p3_paper.p3_reproduction(model, bandwidths, sharing=False)
    rows = [
        [
            model,
            r["link"],
            format_seconds(r["mxnet_s"]),
            format_seconds(r["p3_s"]),
            f"{r['gain']:+.0%}",
            f"{a['gain']:+.0%}",
            f"{r['ceiling_gain']:+.0%}",
            format_seconds(r["bound_s"]),
            format_seconds(r["compute_s"]),
            f"{r['paper_max_gain']:+.0%}",
        ]
        for r, a in zip(sweep, apart)
    ]
    return rows, sweep, apart


def p3_sweeps(src: Sources) -> str:
    """P3 against MXNet as P3's paper ran them (``p3_paper.p3_reproduction``: co-located
    servers, links shared), ResNet-50 and VGG-19 at ``reproduce.scheduling.P3_BANDWIDTHS``, beside
    the gain with each rank's links its own (``sharing=False``), the largest gain the
    link's bound leaves over MXNet's time (``ceiling_gain``) and the paper's largest gain."""
    rows, best, best_apart = [], {}, {}
    for model in ("resnet50", "vgg19"):
        model_rows, sweep, apart = p3_sweep_rows(model, reproduce.scheduling.P3_BANDWIDTHS)
        best[model] = max(sweep, key=lambda r: r["gain"])
        best_apart[model] = max(apart, key=lambda r: r["gain"])
        rows += model_rows
    verdict = "; ".join(
        f"{m} {r['gain']:+.0%} at {r['link']} ({best_apart[m]['gain']:+.0%} at "
        f"{best_apart[m]['link']} with links not shared; the paper: up to {r['paper_max_gain']:+.0%})"
        for m, r in best.items()
    )
    return markdown_table(P3_SWEEP_COLUMNS, rows) + f"\nThe largest gain in this model: {verdict}.\n"


P3_SWEEP_COLUMNS = [
    "model",
    "link",
    "MXNet",
    "P3",
    "P3's gain",
    "P3's gain, links not shared",
    "the bound's ceiling",
    "the link's bound",
    "compute",
    "the paper's largest gain",
]


def p3_anatomy_rows(link: str) -> tuple[list[list[str]], dict]:
    """The rows of ``p3_anatomy`` at one link, with the records behind them by (policy, sharing)."""
    rows, of = [], {}
    for sharing in (True, False):
        for r in p3_paper.p3_anatomy("resnet50", link, sharing=sharing):
            of[r["policy"], sharing] = r
            rows.append(
                [
                    r["link"],
                    "shared" if sharing else "not shared",
                    r["policy"],
                    format_seconds(r["iteration_s"]),
                    format_seconds(r["first_wait_s"]),
                    format_seconds(r["posted_s"]),
                    format_seconds(r["pushes_in_s"]),
                    format_seconds(r["reply_s"]),
                    format_seconds(r["held_s"]),
                    format_seconds(r["kept_wait_s"]),
                    "-" if r["egress_busy"] is None else f"{r['egress_busy']:.0%}",
                ]
            )
    return rows, of


def p3_anatomy(src: Sources) -> str:
    """Where ResNet-50's iteration goes under MXNet and P3 (``p3_paper.p3_anatomy``) at
    ``reproduce.scheduling.P3_ANATOMY_BANDWIDTHS``, links shared and not."""
    rows, said = [], []
    for link in reproduce.scheduling.P3_ANATOMY_BANDWIDTHS:
        link_rows, of = p3_anatomy_rows(link)
        rows += link_rows
        shared, apart = of["p3", True], of["p3", False]
        said.append(
            f"at {link}, P3's last push of conv1 leaves {format_seconds(shared['posted_s'])} after the "
            f"backward's end with links shared ({format_seconds(apart['posted_s'])} not shared) and its "
            f"server holds its update {format_seconds(shared['held_s'])} "
            f"({format_seconds(shared['kept_wait_s'])} of it waiting for pushes the run took first; not "
            f"shared {format_seconds(apart['held_s'])}, where MXNet's holds it "
            f"{format_seconds(of['mxnet', False]['held_s'])})"
        )
    return markdown_table(P3_ANATOMY_COLUMNS, rows) + "\nSo " + "; ".join(said) + ".\n"


P3_ANATOMY_COLUMNS = [
    "link",
    "links",
    "policy",
    "iteration",
    "next forward waits",
    "conv1's last push leaves",
    "conv1's pushes in",
    "its reply leaves",
    "held at the server",
    "of which waiting for another push",
    "egress busy",
]
