"""Grading tooling, apart from the exercises it grades (``dlsys.exercises``).

``release`` (student versions with the solution regions stubbed), ``grader`` (run the
graded tests and score them), ``sandbox`` (the forked, resource-limited test runner),
``gradescope`` (the autograder bundle), ``testing`` (how graded tests load a student's
file or the reference) and ``notebooks`` (the lessons as executed notebooks, the student
exercise notebooks).
"""
