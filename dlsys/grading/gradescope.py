"""A homework as Gradescope's autograder bundle, and what runs inside it.

Gradescope's specification (gradescope-autograders.readthedocs.io, "Autograder
Specifications"): a zip with ``setup.sh`` and ``run_autograder`` at its root; Gradescope
unpacks it into /autograder/source, runs setup.sh once (as root, on Ubuntu) to build the
image, then for each submission puts the student's files in /autograder/submission, runs
run_autograder and reads /autograder/results/results.json. Like otter-grader's ``otter
generate``, the bundle carries everything grading needs, pinned:

    setup.sh                  a venv with the wheel below and pytest (python3.11 from apt if needed)
    run_autograder            python -m dlsys.grading.gradescope run /autograder
    dlsys-autograder.json     the homework: name, exercises, files to upload, limits, visibility, commit
    wheels/dlsys-*.whl        this checkout, built into the bundle (the exact grader and reference)
    tests/exercises/          the homework's graded tests and their conftest
    README.md                 for the teacher: what students upload

``$DLSYS_AUTOGRADER_ROOT`` stands for /autograder in both scripts, so a test can run the
bundle in a temporary tree.
"""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

from ..exercises import REPO_ROOT, get
from ..outputs import check_writable, write_atomic
from . import isolation
from .grader import MEMORY_BYTES, TIMEOUT_S, TestResult, grade, gradescope_results, score_table

CONFIG = "dlsys-autograder.json"
ROOT_ENV = "DLSYS_AUTOGRADER_ROOT"
VISIBILITIES = ("visible", "hidden", "after_due_date", "after_published")  # Gradescope's per-test settings
_EXECUTABLE = 0o100755 << 16  # zip external attributes: a regular file, rwxr-xr-x (unzip restores them)
_BUILD_TIMEOUT_S = 600  # pip may first fetch setuptools for the isolated build

SETUP_SH = """\
#!/usr/bin/env bash
# Gradescope runs this once, as root, while it builds the autograder image: a venv holding the
# dlsys this bundle pins (wheels/) with pytest. $DLSYS_AUTOGRADER_ROOT stands for /autograder;
# pip's own variables (PIP_FIND_LINKS, PIP_NO_INDEX, ...) say where the dependencies come from.
set -euo pipefail
source_dir="${DLSYS_AUTOGRADER_ROOT:-/autograder}/source"
python="${DLSYS_PYTHON:-python3}"
if ! "$python" -c 'import sys; assert sys.version_info >= (3, 11)' 2>/dev/null; then
    # Ubuntu 22.04's python3 is 3.10; dlsys needs 3.11, which its universe packages
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3.11 python3.11-venv
    python=python3.11
elif ! "$python" -c 'import ensurepip' 2>/dev/null; then
    # Ubuntu leaves venv's pip bootstrap out of python3 itself
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \\
        "python3.$("$python" -c 'import sys; print(sys.version_info[1])')-venv"
fi
"$python" -m venv "$source_dir/.venv"
wheel=$(ls "$source_dir"/wheels/dlsys-*.whl)
"$source_dir/.venv/bin/python" -m pip install --quiet --disable-pip-version-check "$wheel[grade]"
# the graded code runs as an unprivileged uid: what only the grader reads is root's alone, the
# installed package (the reference) included: the graded code imports the run's course build
# (-I: the venv's own site-packages, never a dlsys in the working directory or on PYTHONPATH,
# which chmod would lock away from everyone else)
package=$("$source_dir/.venv/bin/python" -I -c 'import dlsys, os; print(os.path.dirname(dlsys.__file__))')
case "$package" in
    "$source_dir/.venv/"*) ;;
    *) echo "setup.sh: dlsys imported from $package, not from the venv $source_dir/.venv" >&2; exit 1 ;;
esac
chmod -R go-rwx "$source_dir/wheels" "$source_dir/tests" "$source_dir/dlsys-autograder.json" "$package"
"""

RUN_AUTOGRADER = """\
#!/usr/bin/env bash
# Gradescope runs this for every submission (it copies this file to /autograder/run_autograder,
# so it finds the bundle by the root, not by its own place).
root="${DLSYS_AUTOGRADER_ROOT:-/autograder}"
exec "$root/source/.venv/bin/python" -m dlsys.grading.gradescope run "$root"
"""


def _commit() -> str:
    """This checkout's commit, '+dirty' if it has uncommitted changes; 'unknown' outside git."""
    try:
        sha = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=30, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", "dlsys", "tests/exercises", "pyproject.toml"],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return sha + ("+dirty" if dirty else "")


def build_wheel(out_dir: Path) -> Path:
    """A wheel of this checkout, built from a copy (the build writes build/ and egg-info)."""
    with tempfile.TemporaryDirectory(prefix="dlsys-wheel-") as tmp:
        src = Path(tmp) / "src"
        shutil.copytree(REPO_ROOT / "dlsys", src / "dlsys", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        for name in ("pyproject.toml", "README.md"):
            shutil.copyfile(REPO_ROOT / name, src / name)
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "wheel",
                "--quiet",
                "--no-deps",
                "--disable-pip-version-check",
                "-w",
                str(out_dir),
                str(src),
            ],
            capture_output=True,
            text=True,
            timeout=_BUILD_TIMEOUT_S,
        )
        if done.returncode != 0:
            raise RuntimeError(f"building the dlsys wheel failed:\n{done.stdout}{done.stderr}")
    (wheel,) = Path(out_dir).glob("dlsys-*.whl")
    return wheel


def _readme(name: str, exercises, files: list[str], visibility: str) -> str:
    rows = "\n".join(f"| `{e.id}` | {e.points} | {e.title} |" for e in exercises)
    return f"""# {name}: dlsys autograder for Gradescope

Upload this zip as a Programming Assignment's autograder (base image: Ubuntu 22.04 or
24.04). Students upload {", ".join(f"`{f}`" for f in files)} (from `dlsys exercises release`;
in folders or not). Test results are `{visibility}` to students.

| exercise | points | task |
| --- | --- | --- |
{rows}
"""


def build(
    name: str,
    exercise_ids: list[str],
    out,
    visibility: str = "visible",
    timeout_s: float = TIMEOUT_S,
    memory_mib: int = MEMORY_BYTES >> 20,
) -> dict:
    """Write the autograder zip of homework ``name`` grading ``exercise_ids`` to ``out``;
    returns its config (dlsys-autograder.json)."""
    if not exercise_ids:
        raise ValueError("a homework needs at least one exercise")
    exercises = [get(i) for i in dict.fromkeys(exercise_ids)]
    if visibility not in VISIBILITIES:
        raise ValueError(f"visibility must be one of {', '.join(VISIBILITIES)}, got {visibility!r}")
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    check_writable(out)  # before the wheel's build: a minute, then nowhere to put it
    files = list(dict.fromkeys(n for e in exercises for n in e.student_files))
    with tempfile.TemporaryDirectory(prefix="dlsys-bundle-") as tmp:
        wheel = build_wheel(Path(tmp))
        config = {
            "name": name,
            "exercises": [e.id for e in exercises],
            "files": files,
            "points": sum(e.points for e in exercises),
            "visibility": visibility,
            "timeout_s": timeout_s,
            "memory_mib": memory_mib,
            "wheel": wheel.name,
            "commit": _commit(),
        }
        tests = [REPO_ROOT / "tests" / "exercises" / "conftest.py", *(REPO_ROOT / e.tests for e in exercises)]
        bundle = io.BytesIO()  # a few MiB: built in memory, written whole (outputs.write_atomic)
        with zipfile.ZipFile(bundle, "w", zipfile.ZIP_DEFLATED) as z:
            for arcname, text in (("setup.sh", SETUP_SH), ("run_autograder", RUN_AUTOGRADER)):
                info = zipfile.ZipInfo(arcname, date_time=(2026, 1, 1, 0, 0, 0))
                info.external_attr, info.compress_type = _EXECUTABLE, zipfile.ZIP_DEFLATED
                z.writestr(info, text)
            z.writestr(CONFIG, json.dumps(config, indent=2))
            z.writestr("README.md", _readme(name, exercises, files, visibility))
            z.write(wheel, f"wheels/{wheel.name}")
            for test in tests:
                z.write(test, f"tests/exercises/{test.name}")
        write_atomic(out, bundle.getvalue())
    return config


def gather(submission: Path, files: list[str], dest: Path) -> list[str]:
    """Copy each expected file (collectives/ring.py) from the submission into ``dest`` at
    its path: the copy at that path in the shallowest folder (students zip folders), else
    the shallowest file of its name (an upload that lost its folders; the names are
    unique); returns notes for the student."""
    notes = []
    for name in files:
        found = sorted(
            (p for p in submission.rglob(Path(name).name) if p.is_file() and "__MACOSX" not in p.parts),
            key=lambda p: (not p.as_posix().endswith(f"/{name}"), len(p.parts), str(p)),
        )
        if not found:
            notes.append(f"missing: {name} (its exercises score 0)")
            continue
        if len(found) > 1:
            notes.append(f"several {Path(name).name}: graded {found[0].relative_to(submission)}")
        (dest / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(found[0], dest / name)
    return notes


def gradescope_report(results: list[TestResult], config: dict, notes: list[str], seconds: float) -> dict:
    """results.json: per test a readable name, its score, visibility and (failed) why, then
    pytest's report; on top, the notes and the score table."""
    report = gradescope_results(results)
    for test, r in zip(report["tests"], results):
        test["name"] = f"{r.exercise}: {r.name.split('::', 1)[-1]}"
        test["visibility"] = config["visibility"]
        test["output"] = "passed" if r.passed else f"{r.reason}\n\n{r.output}"
    report["output"] = "\n".join([*notes, score_table(results)])
    report["execution_time"] = round(seconds, 1)
    report["extra_data"] = {"homework": config["name"], "dlsys_commit": config["commit"]}
    return report


def run(root) -> int:
    """Grade /autograder/submission (``root``/submission) and write results/results.json.

    Every process of the submission is dead before results.json is written (each test's
    die with its pid namespace or its uid, ``isolation.contain`` and ``end_untrusted``; then
    ``kill_descendants``), and results/ is root's and not writable by the tests' uids, so
    nothing rewrites it after; the file is written whole (temporary file, then rename)."""
    root = Path(root)
    config = json.loads((root / "source" / CONFIG).read_text())
    start = time.monotonic()
    with isolation.grade_run() as folder:
        try:
            (folder / "submission").mkdir()
            notes = gather(root / "submission", config["files"], folder / "submission")
            results = grade(
                folder / "submission",
                config["exercises"],
                config["timeout_s"],
                config["memory_mib"] << 20,
                root=root / "source",
                homework=True,
            )
        except Exception as exc:  # the student must see a result, not Gradescope's "no results.json"
            isolation.kill_descendants()
            _write_results(
                root, {"score": 0.0, "output": f"the autograder failed: {exc}", "visibility": config["visibility"]}
            )
            print(f"the autograder failed: {exc}", file=sys.stderr)
            return 1
        isolation.kill_descendants()
        report = gradescope_report(results, config, notes, time.monotonic() - start)
        _write_results(root, report)
    print(report["output"])
    return 0


def _write_results(root: Path, report: dict) -> None:
    results = root / "results"
    results.mkdir(parents=True, exist_ok=True)  # a submission may have deleted it
    results.chmod(0o755)  # only its owner (the grader) writes in it
    write_atomic(results / "results.json", json.dumps(report, indent=2))


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] != "run":
        sys.exit("usage: python -m dlsys.grading.gradescope run AUTOGRADER_ROOT")
    sys.exit(run(sys.argv[2]))
