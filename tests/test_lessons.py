"""Every lesson runs headless as a plain script in at most 60 s, writes its figures to
files, opens as a notebook with jupytext, and has the parts a lesson must have."""

import os
import subprocess
import sys
import time
from pathlib import Path

import jupytext
import pytest

from dlsys.exercises import EXERCISES, REPO_ROOT
from dlsys.viz.lessons import OUT_DIR_ENV

LESSONS = sorted((REPO_ROOT / "lessons").glob("[0-9][0-9]_*.py"))
BUDGET_S = 60.0


def test_the_first_four_lessons_exist():
    assert [p.name[:2] for p in LESSONS][:4] == ["01", "02", "03", "04"]


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda p: p.stem)
def test_runs_headless_within_budget_and_writes_its_figures(lesson, tmp_path):
    start = time.perf_counter()
    done = subprocess.run([sys.executable, str(lesson)], cwd=tmp_path, capture_output=True, text=True,
                          timeout=BUDGET_S, env=os.environ | {OUT_DIR_ENV: str(tmp_path / "figures")})
    seconds = time.perf_counter() - start
    assert done.returncode == 0, done.stderr
    assert seconds <= BUDGET_S
    figures = [Path(line.split(maxsplit=1)[1]) for line in done.stdout.splitlines() if line.startswith("[figure] ")]
    assert figures and all(f.is_file() and f.stat().st_size > 1000 for f in figures)


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
