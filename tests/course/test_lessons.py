"""Every lesson runs headless as a plain script within its CPU budget, writes its figures
to files, opens as a notebook with jupytext, and has the parts a lesson must have."""

import os
import resource
import subprocess
import sys
from pathlib import Path

import jupytext
import pytest
from test_figure_lint import assert_lint_clean, figure_in_html

from dlsys.exercises import EXERCISES, REPO_ROOT
from dlsys.viz.lessons import OUT_DIR_ENV

LESSONS = sorted((REPO_ROOT / "lessons").glob("[0-9][0-9]_*.py"))

# A lesson's budget is CPU time (user + system) of its whole process tree, which a loaded
# machine does not stretch as it stretches wall-clock time, counted in units of a reference
# program's CPU time measured in the same session, so that a slower CPU scales both. The
# budget is MARGIN times what the lesson took here (TOOK_UNITS, lesson number: units; a
# failure prints the new figure): room for a loaded machine's slower caches (CPU time grew
# by up to a quarter at a load average of 11 on 2 cores) and another CPU's other balance of
# interpreter and numpy speed, while a lesson that became 5 times slower fails
# (test_a_lesson_five_times_slower_fails_its_budget).
MARGIN = 2.5
TOOK_UNITS = {
    "01": 1.9,
    "02": 2.9,
    "03": 2.2,
    "04": 47.9,
    "05": 1.7,
    "06": 2.8,
    "07": 8.9,
    "08": 5.1,
    "09": 3.8,
    "10": 6.3,
    "11": 2.5,
    "12": 21.0,
    "13": 2.1,
    "14": 4.0,
    "15": 5.4,
}
REFERENCE = """
import dlsys
from dlsys.experiments import collective_program, train
from dlsys.learn.task import TrainConfig
for seed in range(8):
    train("allreduce", TrainConfig(epochs=1, batch_size=16, seed=seed), 3)
    dlsys.launch(collective_program, 8, "threads", link="tcp-10gbe", seed=seed,
                 args=("allreduce", "ring", 1 << 16, "float32", "sum", seed))
"""
# wall clock, for a lesson that hangs (it spends no CPU time while it waits): far beyond the
# longest lesson on a loaded machine (lesson 04: 134 s of wall clock for 36 CPU s, load average 12)
DEADLINE_S = 600.0
# one BLAS thread: OpenBLAS's idle threads spin, and the longer the more the machine is loaded
ONE_BLAS_THREAD = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}


def cpu_seconds(command, **kwargs) -> tuple[subprocess.CompletedProcess, float]:
    """Run ``command``; its CPU time with every descendant it waited for (RUSAGE_CHILDREN
    counts a reaped child's own reaped children)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=DEADLINE_S,
        env=os.environ | ONE_BLAS_THREAD | kwargs.pop("env", {}),
        **kwargs,
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return done, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


@pytest.fixture(scope="module")
def unit_s():
    """CPU seconds of the reference program: the least of three runs (noise only adds)."""
    runs = [cpu_seconds([sys.executable, "-c", REFERENCE]) for _ in range(3)]
    assert all(done.returncode == 0 for done, _ in runs), runs[0][0].stderr
    return min(seconds for _, seconds in runs)


def budget_s(lesson: Path, unit_s: float) -> float:
    assert lesson.name[:2] in TOOK_UNITS, f"enter what {lesson.name} takes in TOOK_UNITS"
    return MARGIN * TOOK_UNITS[lesson.name[:2]] * unit_s


def run_lesson(lesson: Path, folder: Path, times: int = 1):
    """The lesson as a student runs it, ``times`` times over in one process tree."""
    command = (
        [sys.executable, str(lesson)]
        if times == 1
        else [
            sys.executable,
            "-c",
            (
                f"import subprocess, sys\nfor _ in range({times}): subprocess.run([sys.executable, {str(lesson)!r}], check=True)"
            ),
        ]
    )
    return cpu_seconds(command, cwd=folder, env={OUT_DIR_ENV: str(folder / "figures")})


def test_the_first_four_lessons_exist():
    assert [p.name[:2] for p in LESSONS][:4] == ["01", "02", "03", "04"]


@pytest.mark.timeout(DEADLINE_S + 60)
@pytest.mark.parametrize("lesson", LESSONS, ids=lambda p: p.stem)
def test_runs_headless_within_budget_and_writes_its_figures(lesson, tmp_path, unit_s):
    done, seconds = run_lesson(lesson, tmp_path)
    assert done.returncode == 0, done.stderr
    assert seconds <= budget_s(lesson, unit_s), f"{seconds:.1f} CPU s = {seconds / unit_s:.1f} units"
    figures = [Path(line.split(maxsplit=1)[1]) for line in done.stdout.splitlines() if line.startswith("[figure] ")]
    assert figures and all(f.is_file() and f.stat().st_size > 1000 for f in figures)
    for figure in figures:  # what the lesson draws passes the figure lint (dlsys/viz/lint.py) at 1280 px
        assert_lint_clean(figure_in_html(figure), figure.name)


@pytest.mark.timeout(DEADLINE_S + 60)
def test_a_lesson_five_times_slower_fails_its_budget(tmp_path, unit_s):
    """Lesson 01 (among the quickest: most of it is the interpreter's start-up) run five times
    over stands for itself made five times slower."""
    lesson = LESSONS[0]
    done, seconds = run_lesson(lesson, tmp_path, times=5)
    assert done.returncode == 0, done.stderr
    assert seconds > budget_s(lesson, unit_s), f"{seconds:.1f} CPU s = {seconds / unit_s:.1f} units"


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda p: p.stem)
def test_is_a_notebook_with_goal_concept_try_it_and_exercise(lesson):
    notebook = jupytext.read(lesson)
    markdown = "\n".join(c.source for c in notebook.cells if c.cell_type == "markdown")
    assert sum(c.cell_type == "code" for c in notebook.cells) >= 3
    for part in ("**Goal.**", "$$", "## Try it", "## Exercise"):
        assert part in markdown, f"{lesson.name} lacks {part!r}"
    for exercise in EXERCISES:
        if exercise.lesson == f"lessons/{lesson.name}":
            assert f"`{exercise.id}`" in markdown, f"{lesson.name} must lead to exercise {exercise.id}"
