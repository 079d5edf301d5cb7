"""The notebooks in notebooks/: their cells are the lessons' (a cheap comparison, no kernel),
they were executed without error and hold their figures, they stay small; one lesson and
one student exercise notebook really run through nbclient here."""

import json
import shutil

import nbformat
import pytest

from dlsys.exercises import EXERCISES
from dlsys.grading import notebooks

LESSONS = notebooks.lessons()
MAX_NOTEBOOK_BYTES = (
    768 * 1024
)  # plotly's JSON, not plotly.js: 40-150 KiB a lesson; lesson 10's Gantt of P3's slices ~670 (per-socket pacing posts more, smaller waits)
PLOTLY = "application/vnd.plotly.v1+json"


def test_every_notebook_matches_its_lesson_script():
    assert notebooks.out_of_sync() == []


def test_a_changed_script_is_out_of_sync(tmp_path):
    out = tmp_path / "notebooks"
    shutil.copytree(notebooks.NOTEBOOKS_DIR, out)
    path = out / f"{LESSONS[0].stem}.ipynb"
    notebook = nbformat.read(path, as_version=4)
    notebook.cells[-1].source += "\nprint('edited in the notebook, not in the script')"
    nbformat.write(notebook, path)
    (out / "exercises" / f"{LESSONS[0].stem}.ipynb").unlink()
    assert notebooks.out_of_sync(out) == [
        f"{path} differs from lessons/{LESSONS[0].name}",
        f"{out / 'exercises' / LESSONS[0].name[:-3]}.ipynb is missing or differs "
        f"from the exercises of {LESSONS[0].name}",
    ]


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda p: p.stem)
def test_notebook_is_executed_with_its_figures_and_small(lesson):
    path = notebooks.NOTEBOOKS_DIR / f"{lesson.stem}.ipynb"
    notebook = nbformat.read(path, as_version=4)
    code = [c for c in notebook.cells if c.cell_type == "code"]
    assert all(c.execution_count for c in code), "every code cell ran"
    outputs = [o for c in code for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    shows = sum(c.source.count("show(") for c in code)
    figures = [o for o in outputs if PLOTLY in o.get("data", {})]
    assert shows and len(figures) >= shows, "every show() left its figure"
    assert path.stat().st_size <= MAX_NOTEBOOK_BYTES
    assert notebook.metadata["jupytext"]["formats"] == notebooks.PAIRING


def test_a_lesson_notebook_executes_with_nbclient():
    notebook = notebooks.execute(notebooks.lesson_notebook(LESSONS[0]))
    outputs = [o for c in notebook.cells if c.cell_type == "code" for o in c.outputs]
    assert any(PLOTLY in o.get("data", {}) for o in outputs)
    assert not [o for o in outputs if o.output_type == "error"]


def test_student_notebooks_hold_stubs_not_solutions():
    for lesson in LESSONS:
        notebook = notebooks.exercise_notebook(lesson)
        mine = [e for e in EXERCISES if e.lesson == f"lessons/{lesson.name}"]
        if notebook is None:
            assert not mine
            continue
        text = "\n".join(c.source for c in notebook.cells)
        assert "BEGIN SOLUTION" not in text and "END SOLUTION" not in text
        for e in mine:
            assert f'raise NotImplementedError("{e.id}: see {e.lesson}")' in text and f"--exercise {e.id}" in text


def test_a_student_notebook_writes_its_files_and_grades_them(tmp_path):
    """Run as a student would, unchanged: the stubs are written and score 0."""
    notebook = notebooks.execute(notebooks.exercise_notebook(LESSONS[0]), cwd=tmp_path)
    assert (tmp_path / "exercises" / "token_ring.py").is_file()
    printed = "".join(o.get("text", "") for o in notebook.cells[-1].outputs)
    assert [line.split() for line in printed.splitlines() if line.startswith("total")] == [
        ["total", "0/5", "0.00/10.00"]
    ], json.dumps(notebook.cells[-1].outputs)[:2000]


def test_a_rebuild_changes_nothing_and_refuses_an_edited_notebook_unless_forced(tmp_path, capsys):
    from dlsys.cli import main

    out = tmp_path / "notebooks"
    build = ["lessons", "build", "--exercises", "--only", "03", "--out", str(out)]
    assert main(build) == 0
    path = out / "exercises" / "03_ring_allreduce.ipynb"
    first = path.read_bytes()
    assert main(build) == 0 and path.read_bytes() == first, "ids or digest changed on a rebuild"

    notebook = nbformat.read(path, as_version=4)
    notebook.cells[2].source += "\n# my answer"
    nbformat.write(notebook, path)
    edited = path.read_bytes()
    capsys.readouterr()
    assert main(build) == 2 and path.read_bytes() == edited
    assert "edited since the last build" in capsys.readouterr().err
    assert main([*build, "--force"]) == 0 and path.read_bytes() == first


def test_a_notebook_whose_cells_are_the_scripts_is_rebuilt_even_if_touched(tmp_path):
    lesson = LESSONS[0]
    path = notebooks.write(notebooks.lesson_notebook(lesson), tmp_path / f"{lesson.stem}.ipynb")
    assert not notebooks.edited(path, notebooks.lesson_notebook(lesson))
    notebook = nbformat.read(path, as_version=4)
    notebook.metadata["touched"] = "by an editor"  # outputs or metadata only: nothing a rebuild loses
    nbformat.write(notebook, path)
    assert not notebooks.edited(path, notebooks.lesson_notebook(lesson))
    notebook.cells[-1].source += "\nprint('mine')"
    nbformat.write(notebook, path)
    assert notebooks.edited(path, notebooks.lesson_notebook(lesson))


def test_only_a_prefix_no_lesson_has_is_refused_naming_the_lessons(capsys):
    from dlsys.cli import main

    assert main(["lessons", "build", "--only", "99"]) == 2
    assert f"no lesson starts with '99'; the lessons: {LESSONS[0].name}" in capsys.readouterr().err
