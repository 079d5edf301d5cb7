"""Write the student version: every solution region replaced by a stub, plus the tests.

A region is the lines between ``# BEGIN SOLUTION <exercise id>`` and ``# END SOLUTION``;
the student version replaces it, markers included, by
``raise NotImplementedError("<exercise id>: see <lesson>")`` at the marker's indentation
(minitorch's stubs name their task the same way).
"""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import asdict
from pathlib import Path
from typing import Callable, NamedTuple

from ..exercises import EXERCISES, REPO_ROOT, get
from ..outputs import write_atomic
from .testing import MANIFEST

_BEGIN = re.compile(r"^(\s*)# BEGIN SOLUTION(?: (\S+))?\s*$")
_END = re.compile(r"^\s*# END SOLUTION\s*$")


class Region(NamedTuple):
    exercise: str
    indent: str
    begin: int  # line index of the BEGIN marker
    end: int  # line index of the END marker
    body: str  # the lines in between


def find_regions(source: str, path: str = "<source>") -> list[Region]:
    """The solution regions of ``source``; ValueError (with file and line) on a malformed one."""
    known = {e.id for e in EXERCISES}
    lines = source.splitlines(keepends=True)
    regions, open_at = [], None
    for i, line in enumerate(lines):
        if begin := _BEGIN.match(line):
            if open_at is not None:
                raise ValueError(f"{path}:{i + 1}: BEGIN SOLUTION inside the region opened at line {open_at + 1}")
            if begin.group(2) not in known:
                raise ValueError(
                    f"{path}:{i + 1}: BEGIN SOLUTION needs a known exercise id "
                    f"({', '.join(sorted(known))}), got {begin.group(2)!r}"
                )
            open_at, exercise, indent = i, begin.group(2), begin.group(1)
        elif _END.match(line):
            if open_at is None:
                raise ValueError(f"{path}:{i + 1}: END SOLUTION without BEGIN SOLUTION")
            regions.append(Region(exercise, indent, open_at, i, "".join(lines[open_at + 1 : i])))
            open_at = None
    if open_at is not None:
        raise ValueError(f"{path}:{open_at + 1}: BEGIN SOLUTION is never closed")
    return regions


def replace_regions(source: str, new_body: Callable[[Region], str], path: str = "<source>") -> str:
    """``source`` with every region (markers included) replaced by ``new_body(region)``."""
    lines = source.splitlines(keepends=True)
    for region in reversed(find_regions(source, path)):
        lines[region.begin : region.end + 1] = [new_body(region)]
    return "".join(lines)


def stub(region: Region) -> str:
    return f'{region.indent}raise NotImplementedError("{get(region.exercise).stub}")  # your code here\n'


def student_source(source: str, path: str = "<source>") -> str:
    """The student version of a reference file: every region replaced by its stub."""
    return replace_regions(source, stub, path)


def _readme() -> str:
    rows = "\n".join(
        f"| `{e.id}` | {e.points} | {', '.join(f'`{n}`' for n in e.student_files)} | `{e.lesson}` | {e.title} |"
        for e in EXERCISES
    )
    return f"""# dlsys exercises

Fill in every `raise NotImplementedError("<exercise id>: see <lesson>")` in the files
below; the docstring above each one says what to write, and the lesson explains why. Each
file keeps its path inside the dlsys package and replaces that module when graded:
`collectives/ring.py` is `dlsys.collectives.ring`, and its `from .blocks import send`
opens `dlsys/collectives/blocks.py` of the installed package (or `collectives/blocks.py`
here, if this folder holds it).

| exercise | points | file | lesson | task |
| --- | --- | --- | --- | --- |
{rows}

Check your work here (the tests in tests/ are the graded tests):

    dlsys grade .                               # score table of every exercise
    python -m pytest tests -m ex_ring_allreduce  # one exercise, with pytest's options (-x, --pdb)
"""


def release(dest, force: bool = False) -> list[Path]:
    """Write the student version into ``dest``: the stubbed exercise files at their paths
    inside the package, the graded tests in tests/, a README and the exercises.json
    manifest. Returns the written paths.

    Refuses to overwrite existing files (a student's work) unless ``force``.
    """
    dest = Path(dest)
    stubbed = {dest / name: REPO_ROOT / file for e in EXERCISES for name, file in zip(e.student_files, e.files)}
    copied = {dest / "tests" / t.name: t for t in sorted((REPO_ROOT / "tests" / "exercises").glob("*.py"))}
    readme, manifest = dest / "README.md", dest / MANIFEST
    targets = [*stubbed, *copied, readme, manifest]
    existing = [str(t) for t in targets if t.exists()]
    if existing and not force:
        raise FileExistsError(f"release would overwrite {', '.join(existing)}; choose an empty DIR or pass force")
    (dest / "tests").mkdir(parents=True, exist_ok=True)
    for target, source in stubbed.items():
        target.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(target, student_source(source.read_text(), str(source.relative_to(REPO_ROOT))))
    for target, source in copied.items():
        shutil.copyfile(source, target)
    write_atomic(readme, _readme())
    write_atomic(manifest, json.dumps([asdict(e) for e in EXERCISES], indent=2))
    return targets
