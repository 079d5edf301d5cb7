"""Graded tests: ``test_<id>.py`` holds exercise <id>'s tests, all marked ``ex_<id>``.

A graded test never runs the student's code itself: it passes a module-level *observe*
function to the ``student`` fixture, ``student.run(observe, **kwargs)``, which runs it in an
untrusted child on the student's files and returns plain data (dlsys.grading.untrusted);
the test judges that data here, against the reference or a numpy oracle. The student's
files are those of the released directory holding these tests, or of $DLSYS_STUDENT_DIR
(``dlsys grade DIR`` sets it); without either, the reference's. Only the exercise under
test comes from them: every other exercise is the reference's.
"""

import os
from pathlib import Path

import pytest

from dlsys.exercises import EXERCISES
from dlsys.grading import untrusted
from dlsys.grading.testing import TIMEOUT_ENV, student_exercises, student_root

untrusted.preload()
_root = student_root(Path(__file__).parent)
_graded = student_exercises()


def pytest_configure(config):
    for exercise in EXERCISES:
        config.addinivalue_line("markers", f"{exercise.marker}: graded tests of exercise {exercise.id}")


@pytest.fixture(autouse=True)
def explicit_backend(monkeypatch):
    """$DLSYS_BACKEND replaces the backend of every launch (a lesson, unchanged, on mpi); a
    graded test means the backend it names, here and in the student's child."""
    monkeypatch.delenv("DLSYS_BACKEND", raising=False)


@pytest.fixture
def student(request) -> untrusted.Submission:
    """Runs observe functions on the student's code of this test's exercise."""
    exercise = Path(request.node.fspath).stem.removeprefix("test_")
    root = _root if _graded is None or exercise in _graded else None
    return untrusted.Submission(root, exercise, float(os.environ.get(TIMEOUT_ENV, "30")))
