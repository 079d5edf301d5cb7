"""The TaihuLight paper's figs 9-11 (SPEC section 11): which PS/ring ratios a single-server
alpha-beta model of the PS designs can reach (``ratio_bounds``), against the paper's
(``published_figures``, ``verdicts``); the designs run by dlsys.experiments.taihulight."""

from __future__ import annotations

import math
from dataclasses import replace

from .. import collectives
from ..machine.net import get_node
from ..machine.profiles import profile
from ..machine.topology import get_network
from ..train.caffe import real_sizes
from .taihulight import LINK, NODE, run_design

# The paper's PS/ring communication ratios (SPEC section 11): (model, nodes, ratio); "little
# difference below 16 (8) nodes" is read at the largest power of two below, as a ratio of at most
# LITTLE_DIFFERENCE (the paper gives no number: "little" read as "within a factor of two").
PUBLISHED_RATIOS = (("alexnet", 256, 10.0), ("googlenet", 32, 77.0), ("resnet50", 32, 98.0))
LITTLE_DIFFERENCE = (("alexnet", 8), ("googlenet", 4), ("resnet50", 4))
LITTLE_DIFFERENCE_RATIO = 2.0
PS_DESIGNS = ("ps", "ps-gather", "ps-reduce")
# a node that computes in no time: what is left of an iteration is its communication
NO_COMPUTE_NODE = replace(
    get_node(NODE), name="sw26010, compute free", peak_flops=math.inf, memory_bandwidth_Bps=math.inf
)


def ratio_bounds(design: str, model: str, nodes: int, link=LINK, scale: int = 1) -> dict:
    """The smallest and largest PS/ring ratio of communication time (no compute to hide it)
    that any alpha-beta schedule of ``design`` can give, on ``nodes`` = p = 2^k nodes, a
    zero-copy ``link`` (alpha a, beta b), layers n_1..n_L, N = sum n_j (as a run of
    ``scale`` logical parameters per real one holds them). The ring is exact:
    R = 2(p-1)(a + m b), m its largest block (N/p when p divides N). The PS, T_lo <= T <= T_hi:

      ps         T_lo = 2a + p N b: rank 0's ingress takes (p-1) N bytes of gradients, and none
                 leaves a worker before W (one message of N bytes) has reached it.
                 T_hi = (p-1)((L+1) a + 2 N b): every message after the one before.
      ps-gather  T_lo = 2a + p N b: a gather still brings every rank's n_j into rank 0.
                 T_hi = k (a + N b) + sum_j (k a + (p-1) n_j b): the binomial broadcast and the
                 L binomial gathers one after another.
      ps-reduce  T_lo = 2a + 2 k N b: rank 1 holds W only after rank 0 has sent it k times, and
                 each reduce brings k messages of n_j into rank 0, the first from rank 1.
                 T_hi = k (a + N b) + sum_j k (a + n_j b).

    The serial sums bound the real schedule because every time in the emulator is a max-plus
    function of the times before it: starting each collective when the last one has ended
    everywhere can only be later. Ratios on this link: T_lo / R, T_hi / R. For any alpha and beta
    (``any_lo``, ``any_hi``): with T = A a + B N b and R = C a + D N b, T / R lies between
    A / C and B / D (the mediant inequality), so the ratio can never leave
    [min(A_lo/C, B_lo/D), max(A_hi/C, B_hi/D)], whatever the machine."""
    if design not in PS_DESIGNS:
        raise ValueError(f"design: the bounds are for the PS designs; valid: {', '.join(PS_DESIGNS)}")
    if not (isinstance(nodes, int) and nodes >= 2 and nodes & (nodes - 1) == 0):
        raise ValueError(f"nodes must be a power of two >= 2, got {nodes!r}")
    link = get_network(link, LINK, "link").link
    a, b = link.alpha_s, link.beta_s_per_byte
    sizes = [4 * scale * size for size in real_sizes(profile(model), scale)]
    p, k, layers, n = nodes, nodes.bit_length() - 1, len(sizes), sum(sizes)
    ring = collectives.closed_form("allreduce", "ring", p, n, link, itemsize=4 * scale)
    lower = {"ps": (2, p), "ps-gather": (2, p), "ps-reduce": (2, 2 * k)}[design]  # (A, B) of T_lo
    upper = {
        "ps": ((p - 1) * (layers + 1), 2 * (p - 1)),
        "ps-gather": (k * (layers + 1), k + p - 1),
        "ps-reduce": (k * (layers + 1), 2 * k),
    }[design]
    c = 2 * (p - 1)
    d = (ring - c * a) / (n * b)  # 2 (p-1) m / N
    return {
        "design": design,
        "model": model,
        "nodes": p,
        "layers": layers,
        "gradient_nbytes": n,
        "lo": (lower[0] * a + lower[1] * n * b) / ring,
        "hi": (upper[0] * a + upper[1] * n * b) / ring,
        "any_lo": min(lower[0] / c, lower[1] / d),
        "any_hi": max(upper[0] / c, upper[1] / d),
    }


def communication_only(model: str, design: str, nodes: int, topology=LINK) -> dict:
    """A design's iteration with compute free (``NO_COMPUTE_NODE``), emulated on ``topology``
    (the sw26010 link for every pair by default): its communication_s is what
    ``ratio_bounds`` bounds (at the record's ``scale``)."""
    return run_design(model, design, nodes, True, topology, node=NO_COMPUTE_NODE)


def published_figures(emulate: bool = False, link=LINK) -> list[dict]:
    """Each of the paper's PS/ring figures (figs 9-11) against ``ratio_bounds``: one row per
    (figure, PS design) with the bracket on this link and for any alpha and beta, whether the
    paper's ratio is reachable on this link (``here``) and on any link (``anywhere``), a
    sentence saying why, and (``emulate``) the emulated ratio with compute free."""
    figures = [(m, p, r, f"{m}: {r:g}x at {p} nodes") for m, p, r in PUBLISHED_RATIOS]
    figures += [(m, p, None, f"{m}: little difference at {p} nodes") for m, p in LITTLE_DIFFERENCE]
    rows = []
    for model, nodes, ratio, figure in figures:
        ring = communication_only(model, "ring", nodes, link) if emulate else None
        for design in PS_DESIGNS:
            ps = communication_only(model, design, nodes, link) if emulate else None
            bound = ratio_bounds(design, model, nodes, link, ring["scale"] if emulate else 1)
            if ratio is None:  # "little difference": some ratio <= LITTLE_DIFFERENCE_RATIO is reachable
                here, anywhere = bound["lo"] <= LITTLE_DIFFERENCE_RATIO, bound["any_lo"] <= LITTLE_DIFFERENCE_RATIO
                target = f"<= {LITTLE_DIFFERENCE_RATIO:g}x"
            else:
                here = bound["lo"] <= ratio <= bound["hi"]
                anywhere = bound["any_lo"] <= ratio <= bound["any_hi"]
                target = f"{ratio:g}x"
            side = (
                ""
                if here
                else (
                    " (it can only be larger)" if ratio is None or ratio < bound["lo"] else " (it can only be smaller)"
                )
            )
            why = (
                f"{design} gives {bound['lo']:.3g}x to {bound['hi']:.3g}x on this link{side}, "
                f"{bound['any_lo']:.3g}x to {bound['any_hi']:.3g}x on any link; the paper: {target}"
            )
            rows.append(
                {
                    "figure": figure,
                    "model": model,
                    "nodes": nodes,
                    "paper_ratio": ratio,
                    **bound,
                    "here": here,
                    "anywhere": anywhere,
                    "why": why,
                    "emulated": ps["communication_s"] / ring["communication_s"] if emulate else None,
                }
            )
    return rows


def verdicts(rows: list[dict]) -> list[dict]:
    """One line per figure of ``published_figures``: the designs that reach it on this link,
    on some link, and a sentence."""
    out = []
    for figure in dict.fromkeys(r["figure"] for r in rows):
        mine = [r for r in rows if r["figure"] == figure]
        here = [r["design"] for r in mine if r["here"]]
        anywhere = [r["design"] for r in mine if r["anywhere"]]
        if here:
            text = f"reachable on this link by {', '.join(here)}"
        elif anywhere:
            text = f"not reachable on this link by any design; on a link of other alpha/beta by {', '.join(anywhere)}"
        else:
            text = "not reachable by any single-server alpha-beta model of these designs, on any link"
        out.append(
            {
                "figure": figure,
                "model": mine[0]["model"],
                "nodes": mine[0]["nodes"],
                "here": here,
                "anywhere": anywhere,
                "verdict": text,
                "why": "; ".join(r["why"] for r in mine),
            }
        )
    return out
