"""Graded tests: ``test_<id>.py`` holds exercise <id>'s tests, all marked ``ex_<id>``.

In the reference checkout they test the reference solutions; in a released directory
(or with $DLSYS_STUDENT_DIR set, as ``dlsys grade DIR`` does) they test the student's files:
all of them, or those of the exercises in $DLSYS_STUDENT_EXERCISES (a homework's).
"""

from pathlib import Path

from dlsys.exercises import EXERCISES
from dlsys.grading.testing import student_exercises, student_root, use_student_files

_root = student_root(Path(__file__).parent)
if _root is not None:
    use_student_files(_root, student_exercises())


def pytest_configure(config):
    for exercise in EXERCISES:
        config.addinivalue_line("markers", f"{exercise.marker}: graded tests of exercise {exercise.id}")
