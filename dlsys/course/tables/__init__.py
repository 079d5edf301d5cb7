"""The writers of docs/'s generated tables (``dlsys.course.docs``), one module per room's
document; here what they share: the ``Sources`` they read and the Markdown table."""

from __future__ import annotations

from functools import cached_property

from ...experiments.large_batch import require_study
from ...experiments.taihulight import run_design
from ...experiments.training import train
from ...train.strategies import STRATEGIES
from .. import reproduce

STRAGGLER = (3, 4.0)  # (worker, slowdown)


class Sources:
    """What the tables are made from, each computed once when first asked for;
    ``claims`` may be given (records of ``reproduce.run_claims(quick=True)``)."""

    def __init__(self, claims: list[dict] | None = None):
        self._designs: dict[tuple, dict] = {}
        if claims is not None:
            self.claims = claims

    @cached_property
    def study(self) -> dict:
        return require_study()

    @cached_property
    def claims(self) -> list[dict]:
        return reproduce.run_claims(quick=True)

    def design(self, model: str, design: str, nodes: int, contiguous: bool = True) -> dict:
        """``taihulight.run_design`` (a link per pair), each case run once."""
        key = (model, design, nodes, contiguous)
        if key not in self._designs:
            self._designs[key] = run_design(model, design, nodes, contiguous)
        return self._designs[key]

    @cached_property
    def strategies(self) -> dict[str, dict]:
        """Every strategy at ``TrainConfig()`` on 4 workers, 10 GbE (docs/training.md)."""
        return {name: train(name) for name in STRATEGIES}

    @cached_property
    def straggler(self) -> dict[str, dict]:
        """Worker 3 four times slower on RDMA, where compute matters (docs/training.md)."""
        return {
            name: train(name, link="rdma-edr", straggler=STRAGGLER)
            for name in STRATEGIES
            if name == "allreduce" or name.startswith("ps-")
        }


def markdown_table(header: list[str], rows: list[list]) -> str:
    cells = [[str(c).replace("|", "\\|") for c in row] for row in [header, *rows]]
    lines = ["| " + " | ".join(cells[0]) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in cells[1:]]) + "\n"
