"""The published runs the planner is held to: Megatron-LM on Selene (Narayanan et al.,
"Efficient Large-Scale Language Model Training on GPU Clusters Using Megatron-LM", SC'21).

Table 1 (weak scaling, section 5.1): GPT models of 1.7 B to 1 T parameters, vocabulary
51,200, sequences of 2,048 tokens, on DGX A100 80GB nodes, every run with full activation
recomputation, achieved TFLOP/s a GPU counted by equation 3 (96 B s l h^2 (1 + s/(6h) +
V/(16 l h))) and its share of the A100's 312 TFLOP/s. Section 5.1 adds GPT-3 (175 B: 96
layers, h = 12,288, 96 heads) on 1,024 GPUs at batch 1,536: 140 TFLOP/s a GPU (TP 8, PP 8,
DP 16, as issue 35 reads it). Section 5.4.1 (Figure 13): a 161 B GPT (32 layers of h =
20,480, 128 heads; 12 l h^2 = 161 B) on 64 GPUs, tensor x pipeline = 64, is fastest at
TP 8 / PP 8 at every batch size.

The runs as the paper describes them: Megatron's DDP (no ZeRO), no sequence parallelism
and no TP overlap (neither existed in 2021), dropout, full recomputation; the micro-batch
and the interleaving (section 2.2.2; Table 1 does not give them) are the planner's best
choice. Nothing in ``efficiency`` or ``devices`` is fitted to these rows.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from .devices import DEVICES
from .models import Model
from .search import search

SOURCE = "Narayanan et al., SC'21"
TOLERANCE = 0.20  # |dlsys / paper - 1| a row may miss by
TOP = 3  # the paper's (tp, pp) among the planner's this many best
RUN: dict[str, Any] = dict(recompute="full", zero=0, sequence_parallel=False, tp_overlap=False)


class Run(NamedTuple):
    """A published run: the model's shape, its layout, and what it measured."""

    params_b: float
    heads: int
    hidden: int
    layers: int
    tp: int
    pp: int
    gpus: int
    batch: int
    tflops: float
    percent: int
    where: str = "Table 1"

    @property
    def dp(self) -> int:
        return self.gpus // (self.tp * self.pp)

    def model(self) -> Model:
        """The GPT of Narayanan et al. (section 5.1): h -> 4h -> h with GeLU, biases,
        learned positions, a tied output layer."""
        return gpt(f"GPT {self.params_b:g}B", self.layers, self.hidden, self.heads)


def gpt(name: str, layers: int, hidden: int, heads: int) -> Model:
    return Model(
        name,
        layers=layers,
        hidden=hidden,
        heads=heads,
        kv_heads=heads,
        ffn=4 * hidden,
        vocab=51200,
        seq_len=2048,
        tied=True,
        gated=False,
        biases=True,
        positions=True,
        published_params=0,
        source=f"{SOURCE}, section 5.1 (GPT, V = 51,200, s = 2,048)",
    )


TABLE_1 = (
    Run(1.7, 24, 2304, 24, 1, 1, 32, 512, 137, 44),
    Run(3.6, 32, 3072, 30, 2, 1, 64, 512, 138, 44),
    Run(7.5, 32, 4096, 36, 4, 1, 128, 512, 142, 46),
    Run(18.4, 48, 6144, 40, 8, 1, 256, 1024, 135, 43),
    Run(39.1, 64, 8192, 48, 8, 2, 512, 1536, 138, 44),
    Run(76.1, 80, 10240, 60, 8, 4, 1024, 1792, 140, 45),
    Run(145.6, 96, 12288, 80, 8, 8, 1536, 2304, 148, 47),
    Run(310.1, 128, 16384, 96, 8, 16, 1920, 2160, 155, 50),
    Run(529.6, 128, 20480, 105, 8, 35, 2520, 2520, 163, 52),
    Run(1008.0, 160, 25600, 128, 8, 64, 3072, 3072, 163, 52),
)
GPT3 = Run(175.0, 96, 12288, 96, 8, 8, 1024, 1536, 140, 45, "section 5.1")
FIGURE_13 = gpt("GPT 161B", 32, 20480, 128)
FIGURE_13_GPUS, FIGURE_13_BATCHES = 64, (32, 128, 512)
FIGURE_13_LAYOUTS = ((2, 32), (4, 16), (8, 8))  # (tp, pp) inside a DGX; TP 16 and 32 cross servers


def predict(run: Run) -> dict:
    """The planner's fastest fitting run in the paper's layout (``RUN``, its tp and pp) on A100s."""
    rows = search(run.model(), run.gpus, run.batch, DEVICES["a100"], tp=run.tp, pp=run.pp, **RUN)
    if not rows:
        raise ValueError(f"{run.params_b:g}B: no layout with tp {run.tp}, pp {run.pp} fits the A100's memory")
    return rows[0]


def layout_rank(run: Run) -> tuple[int, int]:
    """Where the paper's (tp, pp) ranks among every (tp, pp) the planner tries for this run
    (``RUN`` held, each at its fastest micro-batch and interleaving), and how many there are."""
    best: dict[tuple[int, int], float] = {}
    for row in search(run.model(), run.gpus, run.batch, DEVICES["a100"], **RUN):
        best.setdefault((row["tp"], row["pp"]), row["step_s"])
    order = sorted(best, key=best.__getitem__)
    return (order.index((run.tp, run.pp)) + 1 if (run.tp, run.pp) in best else 0), len(order)


def table_1_lines(runs=(*TABLE_1, GPT3)) -> list[dict]:
    """One line a run: the paper's TFLOP/s a GPU and share of peak beside the planner's, the
    ratio, whether it is within ``TOLERANCE``, and the rank of the paper's layout."""
    lines = []
    for run in runs:
        row = predict(run)
        rank, layouts = layout_rank(run)
        ratio = row["tflops"] / run.tflops
        lines.append(
            {
                "run": f"{run.params_b:g}B on {run.gpus} GPUs ({run.where})",
                "layout": f"tp {run.tp} pp {run.pp} dp {run.dp}, batch {run.batch}",
                "paper_tflops": run.tflops,
                "paper_percent": run.percent,
                "dlsys_tflops": row["tflops"],
                "dlsys_percent": 100 * row["hfu"],
                "ratio": ratio,
                "within": abs(ratio - 1) <= TOLERANCE,
                "rank": rank,
                "layouts": layouts,
                "ranked": 1 <= rank <= TOP,
                "choice": f"micro-batch {row['micro_batch']}, v {row['virtual_stages']}",
            }
        )
    return lines


def figure_13_lines() -> list[dict]:
    """Section 5.4.1: for each batch, the planner's TFLOP/s a GPU of each (tp, pp) of 64
    A100s and whether TP 8 / PP 8 is the fastest, as Megatron measured."""
    lines = []
    for batch in FIGURE_13_BATCHES:
        tflops = {}
        for tp, pp in FIGURE_13_LAYOUTS:
            rows = search(FIGURE_13, FIGURE_13_GPUS, batch, DEVICES["a100"], tp=tp, pp=pp, **RUN)
            tflops[(tp, pp)] = rows[0]["tflops"] if rows else 0.0
        best = max(tflops, key=tflops.__getitem__)
        lines.append({"batch": batch, "tflops": tflops, "best": best, "holds": best == (8, 8)})
    return lines
