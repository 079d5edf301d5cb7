"""What runs inside the untrusted child of a graded test (``untrusted.Submission``): the
student's files in place of the reference.

``use_student_files(root, [exercise id], functions, reference)`` makes ``import
dlsys.collectives.ring`` (and the exercise's other modules) load ``root/collectives/ring.py``
instead of the reference, with the reference's of the functions that hold other exercises'
regions (each exercise is graded on its own), and every other exercise's module from the
folder ``reference`` (files the trusted parent wrote: the reference with the graded
exercise's regions stubbed, as the child's own files are the course build); the rest of
dlsys (the Communicator, the link models) stays as it is, so a submission is graded by the
same emulator it was written against.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType

from ..exercises import EXERCISES

STUDENT_DIR_ENV = "DLSYS_STUDENT_DIR"
# A homework grades some exercises; the modules of the others stay the reference, so a
# student uploads only the homework's files (comma-separated exercise ids; unset: all).
STUDENT_EXERCISES_ENV = "DLSYS_STUDENT_EXERCISES"
MANIFEST = "exercises.json"  # written by release: marks a released directory
TIMEOUT_ENV = "DLSYS_GRADE_TIMEOUT_S"  # what the student's code may take in one test (untrusted.Submission)
LAUNCH_TIMEOUT_S = 10.0  # a graded run that takes longer is a hung program, not a slow one


def locate(root: Path, student_file: str) -> Path | None:
    """Where the submission ``root`` holds ``student_file`` (collectives/ring.py): at that
    path, else under its name alone (an upload that lost its folders; the names are
    unique); None if it holds neither."""
    for path in (root / student_file, root / Path(student_file).name):
        if path.is_file():
            return path
    return None


class _ReferenceFunctions(importlib.abc.Loader):
    """Executes the student's module, then puts back the ``reference`` module's functions
    that ``foreign`` names (qualified: ``KVServer.aggregate``)."""

    def __init__(self, inner, reference: ModuleType | None, foreign: list[str]):
        self.inner, self.reference, self.foreign = inner, reference, foreign

    def create_module(self, spec):
        return self.inner.create_module(spec)

    def exec_module(self, module):
        self.inner.exec_module(module)
        for qualname in self.foreign:
            *outer, name = qualname.split(".")
            theirs, ours = module, self.reference
            for part in outer:
                theirs, ours = getattr(theirs, part), getattr(ours, part)
            setattr(theirs, name, getattr(ours, name))


class _StudentFinder(importlib.abc.MetaPathFinder):
    """Finds each exercise module in the student's directory, every other exercise's module
    in the folder ``reference`` (None: where it is)."""

    def __init__(self, root: Path, exercises, reference: Path | None, foreign: dict[str, list[str]]):
        self.root, self.reference, self.foreign = root, reference, foreign
        self.files = {module: name for e in exercises for module, name in zip(e.modules, e.student_files)}
        self.others = {module: name for e in EXERCISES for module, name in zip(e.modules, e.student_files)}

    def find_spec(self, name, path=None, target=None):
        if name not in self.files:
            if self.reference is not None and name in self.others:
                return importlib.util.spec_from_file_location(name, self.reference / self.others[name])
            return None
        found = locate(self.root, self.files[name])
        if found is None:
            raise ModuleNotFoundError(f"the submission has no {self.root / self.files[name]}", name=name)
        spec = importlib.util.spec_from_file_location(name, found)
        foreign = self.foreign.get(name, [])
        spec.loader = _ReferenceFunctions(spec.loader, self._reference_module(name) if foreign else None, foreign)
        return spec

    def _reference_module(self, name: str) -> ModuleType:
        """``name`` executed from the reference folder, kept out of sys.modules: the source of
        the functions the student's module takes from it."""
        spec = importlib.util.spec_from_file_location(name, self.reference / self.others[name])
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module


def use_student_files(
    root, exercise_ids=None, reference_functions: dict[str, list[str]] | None = None, reference=None
) -> None:
    """From now on, the modules of ``exercise_ids`` (default: every exercise) are imported
    from the student directory ``root``, with the functions named in ``reference_functions``
    ({module: ["KVServer.aggregate", ...]}) taken from the folder ``reference``, which also
    holds every other exercise's module (at its path in a released directory)."""
    imported = sorted({m for e in EXERCISES for m in e.modules if m in sys.modules})
    if imported:
        raise RuntimeError(f"too late to grade student files: {', '.join(imported)} already imported")
    exercises = [e for e in EXERCISES if exercise_ids is None or e.id in exercise_ids]
    sys.meta_path.insert(
        0,
        _StudentFinder(
            Path(root).resolve(),
            exercises,
            None if reference is None else Path(reference).resolve(),
            reference_functions or {},
        ),
    )


def student_exercises() -> list[str] | None:
    """The exercise ids whose files a submission replaces: $DLSYS_STUDENT_EXERCISES, else all (None)."""
    ids = os.environ.get(STUDENT_EXERCISES_ENV)
    return ids.split(",") if ids else None


def student_root(tests_dir) -> Path | None:
    """The student directory to grade: $DLSYS_STUDENT_DIR, else the released directory that
    holds ``tests_dir`` (DIR/tests, next to DIR/exercises.json); None for the reference."""
    if os.environ.get(STUDENT_DIR_ENV):
        return Path(os.environ[STUDENT_DIR_ENV])
    root = Path(tests_dir).resolve().parent
    return root if (root / MANIFEST).is_file() else None
