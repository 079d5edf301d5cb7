"""Graded exercises: the registry.

An exercise is a region of reference code in ``dlsys`` between ``# BEGIN SOLUTION <id>``
and ``# END SOLUTION`` (one exercise may own several regions), its graded tests in
``tests/exercises/test_<id>.py`` (every test there carries the pytest marker ``ex_<id>``),
its points and the lesson that leads to it. ``dlsys.grading`` releases the student version
and grades it (docs/exercises.md). An exercise's regions may span files (top-k compression
and the error-feedback memory it needs live apart). A released directory keeps the files'
paths inside the package (``collectives/ring.py``, ``exercises/token_ring.py``, ... next to
``tests/``); their names are unique too, so a submission that lost its folders still grades.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]  # the exercises grade from a source checkout


@dataclass(frozen=True)
class Exercise:
    id: str
    title: str
    file: str  # the file holding the reference regions, relative to the repository root
    points: int
    lesson: str  # the lesson that leads to it, relative to the repository root
    other_files: tuple[str, ...] = ()  # further files holding some of its regions

    @property
    def files(self) -> tuple[str, ...]:
        return (self.file, *self.other_files)

    @property
    def marker(self) -> str:
        """The pytest marker of its graded tests: ``pytest -m ex_<id>``."""
        return f"ex_{self.id}"

    @property
    def student_file(self) -> str:
        """Its path in a released directory and in a submission: the path inside the
        package (dlsys/collectives/ring.py -> collectives/ring.py), so a relative import
        in it names the file it opens (``from .blocks import`` -> collectives/blocks.py)."""
        return self.student_files[0]

    @property
    def student_files(self) -> tuple[str, ...]:
        return tuple(Path(f).relative_to("dlsys").as_posix() for f in self.files)

    @property
    def stub(self) -> str:
        """What a released file raises in place of each of its regions: the exercise, and where it is taught."""
        return f"{self.id}: see {self.lesson}"

    @property
    def tests(self) -> str:
        """Its graded test file, relative to the repository root."""
        return f"tests/exercises/test_{self.id}.py"

    @property
    def module(self) -> str:
        """The dotted module name of ``file`` (dlsys/collectives/ring.py -> dlsys.collectives.ring)."""
        return self.file.removesuffix(".py").replace("/", ".")

    @property
    def modules(self) -> tuple[str, ...]:
        return tuple(f.removesuffix(".py").replace("/", ".") for f in self.files)


EXERCISES: tuple[Exercise, ...] = (
    Exercise(
        "token_ring",
        "pass a token around a ring with send/recv",
        "dlsys/exercises/token_ring.py",
        10,
        "lessons/01_why_distribute.py",
    ),
    Exercise(
        "binomial_broadcast",
        "binomial-tree broadcast in lg p rounds",
        "dlsys/collectives/trees.py",
        15,
        "lessons/02_primitives_alpha_beta.py",
    ),
    Exercise(
        "ring_reduce_scatter", "ring reduce-scatter", "dlsys/collectives/ring.py", 20, "lessons/03_ring_allreduce.py"
    ),
    Exercise("ring_allgather", "ring all-gather", "dlsys/collectives/ring.py", 15, "lessons/03_ring_allreduce.py"),
    Exercise(
        "ring_allreduce",
        "ring all-reduce = reduce-scatter + all-gather",
        "dlsys/collectives/ring.py",
        20,
        "lessons/03_ring_allreduce.py",
    ),
    Exercise(
        "ring_allreduce_cost",
        "the alpha-beta cost of ring all-reduce, and its crossover with recursive doubling",
        "dlsys/exercises/ring_cost.py",
        20,
        "lessons/04_trees_vs_ring.py",
    ),
    Exercise(
        "ps_aggregation",
        "parameter-server aggregation: a BSP round's mean, or each gradient at once",
        "dlsys/ps/server.py",
        15,
        "lessons/05_parameter_server.py",
    ),
    Exercise(
        "ssp_gate",
        "the SSP gate: read only within s clocks of the slowest worker",
        "dlsys/ps/server.py",
        10,
        "lessons/05_parameter_server.py",
    ),
    Exercise(
        "ring_memory_traffic",
        "memory traffic of the ring all-reduce, copied vs lent sends, and the bandwidth bound it implies",
        "dlsys/machine/datapath.py",
        10,
        "lessons/07_real_bytes.py",
    ),
    Exercise(
        "terngrad_quantizer",
        "TernGrad's unbiased stochastic ternary quantizer, packed 2 bits per entry",
        "dlsys/compress/terngrad.py",
        15,
        "lessons/08_gradient_compression.py",
    ),
    Exercise(
        "topk_error_feedback",
        "top-k sparsification with int32 indices, and error feedback that loses nothing",
        "dlsys/compress/topk.py",
        15,
        "lessons/08_gradient_compression.py",
        other_files=("dlsys/compress/compressor.py",),
    ),
    Exercise(
        "lars_local_lr",
        "LARS's layer-wise rate eta ||w|| / (||g|| + beta ||w||), guarded for zero norms",
        "dlsys/learn/optim.py",
        10,
        "lessons/09_large_batches.py",
    ),
    Exercise(
        "goyal_schedule",
        "Goyal et al.'s gradual warm-up and step decay",
        "dlsys/learn/optim.py",
        10,
        "lessons/09_large_batches.py",
    ),
    Exercise(
        "wfbp_iteration",
        "wait-free backpropagation's iteration time, push by push, held to the emulator",
        "dlsys/exercises/overlap.py",
        15,
        "lessons/10_overlap_and_scheduling.py",
    ),
    Exercise(
        "ddp_buckets",
        "PyTorch DDP's gradient buckets: reverse order, at most bucket_cap_mb each",
        "dlsys/schedule/fusion.py",
        10,
        "lessons/10_overlap_and_scheduling.py",
    ),
    Exercise(
        "alpha_beta_fit",
        "fit alpha and beta to measured one-way times (least squares on relative error) "
        "and predict a ring all-reduce from them",
        "dlsys/machine/netstack.py",
        10,
        "lessons/02_primitives_alpha_beta.py",
    ),
    Exercise(
        "contention_step",
        "one step on links that messages share: max-min fair rates, re-solved as flows finish, held to the emulator",
        "dlsys/exercises/contention.py",
        15,
        "lessons/13_topology_and_contention.py",
    ),
    Exercise(
        "zero2_step",
        "a ZeRO-2 step: reduce-scatter the gradient, update the own shard, all-gather the parameters",
        "dlsys/train/zero.py",
        15,
        "lessons/14_models_that_do_not_fit.py",
    ),
    Exercise(
        "tensor_parallel_mlp",
        "Megatron's column-then-row parallel MLP: the split layers and their f and g collectives, forward and backward",
        "dlsys/train/tensor_parallel_layers.py",
        15,
        "lessons/14_models_that_do_not_fit.py",
    ),
    Exercise(
        "pipeline_1f1b_order",
        "the 1F1B (PipeDream-Flush) action list of one pipeline stage",
        "dlsys/train/pipeline.py",
        10,
        "lessons/15_pipelines_experts_layout.py",
    ),
    Exercise(
        "pairwise_alltoall",
        "the pairwise all-to-all: p-1 steps, step k sends to rank r+k and receives from r-k",
        "dlsys/collectives/exchange.py",
        15,
        "lessons/15_pipelines_experts_layout.py",
    ),
)


def get(exercise_id: str) -> Exercise:
    """The exercise with this id (ValueError lists the valid ids)."""
    for exercise in EXERCISES:
        if exercise.id == exercise_id:
            return exercise
    raise ValueError(f"unknown exercise {exercise_id!r}; valid: {', '.join(e.id for e in EXERCISES)}")
