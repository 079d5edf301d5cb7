"""The lessons as notebooks: executed lesson notebooks, and student exercise notebooks.

``lessons/NN_name.py`` (jupytext percent format) is the source of truth. Its paired
notebook ``notebooks/NN_name.ipynb`` (jupytext pairing ``lessons//py:percent,notebooks//ipynb``)
is the same cells, executed by nbclient, figures included as plotly's own output
(``application/vnd.plotly.v1+json``: JupyterLab, Notebook 7 and VS Code draw it offline,
and it is a tenth of the size of embedding plotly.js).

``notebooks/exercises/NN_name.ipynb`` is the student version of a lesson's exercises, as
nbgrader's ``generate_assignment`` makes one: each file holding the lesson's exercises,
its solution regions replaced by stubs (``release.student_source``), in a ``%%writefile``
cell, then a cell that grades it with ``dlsys grade``.
"""

from __future__ import annotations

import os
from pathlib import Path

import jupytext
import nbformat

from ..exercises import EXERCISES, REPO_ROOT
from .release import student_source

LESSONS_DIR = REPO_ROOT / "lessons"
NOTEBOOKS_DIR = REPO_ROOT / "notebooks"
PAIRING = "lessons//py:percent,notebooks//ipynb"
CELL_TIMEOUT_S = 300  # a lesson runs in about a minute at most (tests/test_lessons.py)
PLOTLY_RENDERER = "plotly_mimetype"


def lessons() -> list[Path]:
    return sorted(LESSONS_DIR.glob("[0-9][0-9]_*.py"))


def lesson_notebook(lesson: Path) -> nbformat.NotebookNode:
    """The lesson's cells as a notebook (not executed), paired with its script."""
    notebook = jupytext.read(lesson)
    notebook.metadata.setdefault("jupytext", {})["formats"] = PAIRING
    return notebook


def execute(notebook: nbformat.NotebookNode, cwd: Path = REPO_ROOT) -> nbformat.NotebookNode:
    """Run every cell in a fresh kernel (nbclient), in ``cwd``; raises on a failing cell."""
    from nbclient import NotebookClient  # only building needs a kernel

    previous = os.environ.get("PLOTLY_RENDERER")
    os.environ["PLOTLY_RENDERER"] = PLOTLY_RENDERER  # the kernel inherits it: fig.show() emits plotly's JSON
    try:
        NotebookClient(notebook, timeout=CELL_TIMEOUT_S, kernel_name="python3", record_timing=False,
                       resources={"metadata": {"path": str(cwd)}}).execute()
    finally:
        if previous is None:
            del os.environ["PLOTLY_RENDERER"]
        else:
            os.environ["PLOTLY_RENDERER"] = previous
    return notebook


def exercise_notebook(lesson: Path) -> nbformat.NotebookNode | None:
    """The student version of ``lesson``'s exercises; None if it leads to none."""
    mine = [e for e in EXERCISES if e.lesson == f"lessons/{lesson.name}"]
    if not mine:
        return None
    files = dict.fromkeys((f, name) for e in mine for f, name in zip(e.files, e.student_files))
    ids = " ".join(f"`{e.id}` ({e.points} points)" for e in mine)
    cells = [nbformat.v4.new_markdown_cell(
        f"# Exercises of lesson {lesson.name[:2]}: {ids}\n\n"
        f"The lesson is `lessons/{lesson.name}` (or `notebooks/{lesson.stem}.ipynb`). In each cell below, "
        "replace every `raise NotImplementedError(\"<exercise id>: see <lesson>\")` with your code; the docstring "
        "above it says what to write. Running a cell writes its file next to this notebook, at its path inside "
        "the dlsys package (`%%writefile`); the last cell grades those files with the graded tests, as the "
        "autograder will."),
        nbformat.v4.new_code_cell("import os\n\n"
                                  f"for folder in {sorted({str(Path(n).parent) for _, n in files})!r}:\n"
                                  "    os.makedirs(folder, exist_ok=True)")]
    for file, name in files:
        source = student_source((REPO_ROOT / file).read_text(), file)
        cells.append(nbformat.v4.new_code_cell(f"%%writefile {name}\n{source}"))
    # the kernel's own python: the dlsys it imports, whatever the shell's PATH holds
    cells.append(nbformat.v4.new_code_cell("import sys\n\n!{sys.executable} -m dlsys.cli grade . "
                                           + " ".join(f"--exercise {e.id}" for e in mine)))
    notebook = nbformat.v4.new_notebook(cells=cells)
    notebook.metadata["kernelspec"] = {"display_name": "Python 3", "language": "python", "name": "python3"}
    return notebook


def write(notebook: nbformat.NotebookNode, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(notebook, path)
    return path


def build(out: Path = NOTEBOOKS_DIR, only: list[str] | None = None, lessons_too: bool = True) -> list[Path]:
    """Write every student exercise notebook under ``out`` and, unless not ``lessons_too``,
    every lesson's executed notebook; ``only``: lessons whose names start with these (01, 03_ring)."""
    written = []
    for lesson in lessons():
        if only and not any(lesson.name.startswith(o) for o in only):
            continue
        if (exercises := exercise_notebook(lesson)) is not None:
            written.append(write(exercises, out / "exercises" / f"{lesson.stem}.ipynb"))
        if lessons_too:
            written.append(write(execute(lesson_notebook(lesson)), out / f"{lesson.stem}.ipynb"))
    return written


def cell_sources(notebook: nbformat.NotebookNode) -> list[tuple[str, str]]:
    """(cell type, source) of every cell: what must agree between a script and its notebook."""
    return [(c.cell_type, c.source) for c in notebook.cells]


def out_of_sync(out: Path = NOTEBOOKS_DIR) -> list[str]:
    """Why the notebooks under ``out`` differ from the lessons (empty: in sync). Compares
    cells' sources only, so it needs no kernel: the outputs are the build's business."""
    problems = []
    for lesson in lessons():
        path = out / f"{lesson.stem}.ipynb"
        if not path.is_file():
            problems.append(f"{path} is missing")
        elif cell_sources(nbformat.read(path, as_version=4)) != cell_sources(lesson_notebook(lesson)):
            problems.append(f"{path} differs from {lesson.relative_to(REPO_ROOT)}")
        exercises = exercise_notebook(lesson)
        student = out / "exercises" / f"{lesson.stem}.ipynb"
        if exercises is not None and (not student.is_file() or cell_sources(nbformat.read(student, as_version=4))
                                      != cell_sources(exercises)):
            problems.append(f"{student} is missing or differs from the exercises of {lesson.name}")
    return problems
