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

import copy
import hashlib
import os
from collections import Counter
from pathlib import Path

import jupytext
import nbformat

from ..exercises import EXERCISES, REPO_ROOT
from ..outputs import write_atomic
from .release import student_source

LESSONS_DIR = REPO_ROOT / "lessons"
NOTEBOOKS_DIR = REPO_ROOT / "notebooks"
PAIRING = "lessons//py:percent,notebooks//ipynb"
CELL_TIMEOUT_S = 300  # a lesson runs in about a minute at most (tests/course/test_lessons.py)
PLOTLY_RENDERER = "plotly_mimetype"
WRITTEN = "dlsys_build_sha256"  # notebook metadata: the digest of what ``write`` wrote


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
        NotebookClient(
            notebook,
            timeout=CELL_TIMEOUT_S,
            kernel_name="python3",
            record_timing=False,
            resources={"metadata": {"path": str(cwd)}},
        ).execute()
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
    cells = [
        nbformat.v4.new_markdown_cell(
            f"# Exercises of lesson {lesson.name[:2]}: {ids}\n\n"
            f"The lesson is `lessons/{lesson.name}` (or `notebooks/{lesson.stem}.ipynb`). In each cell below, "
            'replace every `raise NotImplementedError("<exercise id>: see <lesson>")` with your code; the docstring '
            "above it says what to write. Running a cell writes its file next to this notebook, at its path inside "
            "the dlsys package (`%%writefile`); the last cell grades those files with the graded tests, as the "
            "autograder will."
        ),
        nbformat.v4.new_code_cell(
            "import os\n\n"
            f"for folder in {sorted({str(Path(n).parent) for _, n in files})!r}:\n"
            "    os.makedirs(folder, exist_ok=True)"
        ),
    ]
    for file, name in files:
        source = student_source((REPO_ROOT / file).read_text(), file)
        cells.append(nbformat.v4.new_code_cell(f"%%writefile {name}\n{source}"))
    # the kernel's own python: the dlsys it imports, whatever the shell's PATH holds
    cells.append(
        nbformat.v4.new_code_cell(
            "import sys\n\n!{sys.executable} -m dlsys.cli grade . " + " ".join(f"--exercise {e.id}" for e in mine)
        )
    )
    notebook = nbformat.v4.new_notebook(cells=cells)
    notebook.metadata["kernelspec"] = {"display_name": "Python 3", "language": "python", "name": "python3"}
    return notebook


def stable_ids(notebook: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """Each cell's id from its type, source and how many equal cells came before: a rebuild
    gives every unchanged cell the id it had, so version control shows only real changes
    (nbformat 4.5 wants ids unique, 1-64 of [a-zA-Z0-9-_])."""
    seen: Counter = Counter()
    for cell in notebook.cells:
        key = f"{cell.cell_type}\0{cell.source}"
        cell.id = hashlib.sha256(f"{key}\0{seen[key]}".encode()).hexdigest()[:16]
        seen[key] += 1
    return notebook


def _digest(notebook: nbformat.NotebookNode) -> str:
    """sha256 of the notebook as nbformat writes it, without the digest itself."""
    bare = copy.deepcopy(notebook)
    bare.metadata.pop(WRITTEN, None)
    return hashlib.sha256(nbformat.writes(bare).encode()).hexdigest()


def edited(path: Path, fresh: nbformat.NotebookNode) -> bool:
    """Whether rebuilding ``path`` as ``fresh`` would lose someone's work: it differs from what
    ``write`` last put there (the digest in its metadata) and its cells differ from ``fresh``'s
    (a notebook whose cells are the script's holds nothing the rebuild does not)."""
    if not path.exists():
        return False
    old = nbformat.read(path, as_version=4)
    return old.metadata.get(WRITTEN) != _digest(old) and cell_sources(old) != cell_sources(fresh)


def write(notebook: nbformat.NotebookNode, path: Path) -> Path:
    """Write ``notebook`` whole (``outputs.write_atomic``), its ids stable, its digest in its
    metadata for ``edited`` to recognise it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    notebook = stable_ids(notebook)
    notebook.metadata[WRITTEN] = _digest(notebook)
    write_atomic(path, nbformat.writes(notebook) + "\n")
    return path


def build(
    out: Path = NOTEBOOKS_DIR, only: list[str] | None = None, lessons_too: bool = True, force: bool = False
) -> list[Path]:
    """Write every student exercise notebook under ``out`` and, unless not ``lessons_too``,
    every lesson's executed notebook; ``only``: lessons whose names start with these (01, 03_ring).
    Before any lesson runs, refuses (FileExistsError) to overwrite a notebook someone has
    edited (``edited``) unless ``force``."""
    chosen = [lesson for lesson in lessons() if not only or any(lesson.name.startswith(o) for o in only)]
    plan = []  # (notebook, path, execute it?)
    for lesson in chosen:
        if (exercises := exercise_notebook(lesson)) is not None:
            plan.append((exercises, out / "exercises" / f"{lesson.stem}.ipynb", False))
        if lessons_too:
            plan.append((lesson_notebook(lesson), out / f"{lesson.stem}.ipynb", True))
    mine = [str(path) for notebook, path, _ in plan if edited(path, notebook)]
    if mine and not force:
        raise FileExistsError(
            f"{', '.join(mine)}: edited since the last build; a rebuild would lose that work "
            "(move it away, or pass --force to overwrite)"
        )
    return [write(execute(notebook) if run else notebook, path) for notebook, path, run in plan]


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
        if exercises is not None and (
            not student.is_file() or cell_sources(nbformat.read(student, as_version=4)) != cell_sources(exercises)
        ):
            problems.append(f"{student} is missing or differs from the exercises of {lesson.name}")
    return problems
