"""The Gradescope autograder bundle end to end, as Gradescope runs it: unpacked into a tree
like /autograder (source/, submission/, results/), setup.sh run once into a fresh venv
(pip finds the dependencies in a local wheelhouse, so the network's speed does not
matter), then run_autograder per submission: the reference, the released stubs, a
partly right one, a hostile one and one that keeps rewriting results.json. Slow (a venv,
five gradings): one test."""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
import zipfile
from importlib.metadata import version
from pathlib import Path

import pytest
from test_exercises import RIGHT_TOKEN_RING, WHOLE_BUFFERS  # the partially correct ring, graded here again

from dlsys.exercises import EXERCISES, REPO_ROOT, get
from dlsys.grading.gradescope import CONFIG, ROOT_ENV
from dlsys.grading.release import release, replace_regions

HOMEWORK = ["token_ring", "ring_reduce_scatter", "ring_allgather", "ring_allreduce"]
SETUP_TIMEOUT_S = 600
RUN_TIMEOUT_S = 300


# Deletes its working directory (its tests and its own files) on 2 ranks, leaves on 3, loops
# on 4; right otherwise. The tests on 5 and 6 ranks run after the deletion and must pass.
HOSTILE_TOKEN_RING = (
    """\
    import os, shutil, sys
    right, left = (comm.rank + 1) % comm.size, (comm.rank - 1) % comm.size
    if comm.size == 2 and comm.rank == 0:
        shutil.rmtree(os.getcwd())
    if comm.size == 3:
        sys.exit(0)
    while comm.size == 4:
        pass
"""
    + RIGHT_TOKEN_RING
)


# A detached daemon that keeps writing full marks into results.json for a minute, and no
# answer: the grader writes results.json once every process of the submission is dead.
REWRITER_TOKEN_RING = """\
    import json, os, time
    if comm.rank == 0 and os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            forged = json.dumps({"score": 65.0, "output": "forged"})
            for _ in range(1200):
                try:
                    with open(os.environ["DLSYS_AUTOGRADER_ROOT"] + "/results/results.json", "w") as f:
                        f.write(forged)
                except OSError:
                    pass
                time.sleep(0.05)
        os._exit(0)
    raise NotImplementedError("token_ring")
"""


def bundle_requirements() -> list[str]:
    """What setup.sh installs beside the wheel: dlsys's own dependencies and its grade extra
    (read from this checkout's pyproject.toml, which the wheel is built from, so a new
    dependency needs no edit here, nor a reinstall of dlsys)."""
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    return [
        re.split(r"[<>=!~\[ ;]", req.strip(), maxsplit=1)[0]
        for req in [*project["dependencies"], *project["optional-dependencies"]["grade"]]
    ]


def files_with(bodies: dict) -> dict:
    """The homework's reference files (name -> text) with some regions replaced."""
    files = {}
    for e in map(get, HOMEWORK):
        for file, name in zip(e.files, e.student_files):
            files[name] = replace_regions((REPO_ROOT / file).read_text(), lambda r: bodies.get(r.exercise, r.body))
    return files


def run_autograder(root, submission: dict) -> dict:
    """Gradescope's steps for one submission: a fresh submission/ and results/, then run_autograder."""
    for sub in ("submission", "results"):
        shutil.rmtree(root / sub, ignore_errors=True)
        (root / sub).mkdir()
    for name, text in submission.items():
        (root / "submission" / name).parent.mkdir(parents=True, exist_ok=True)
        (root / "submission" / name).write_text(text)
    shutil.copy2(root / "source" / "run_autograder", root / "run_autograder")  # as Gradescope does
    done = subprocess.run(
        [str(root / "run_autograder")],
        cwd=root,
        env=clean_env(root),
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads((root / "results" / "results.json").read_text())


def clean_env(root) -> dict:
    """This environment without our PYTHONPATH (the bundle's venv must grade with its own wheel)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return env | {ROOT_ENV: str(root)}


def scores(report) -> dict:
    """Points per exercise (to 3 decimals: results.json rounds each test's share)."""
    out = {}
    for test in report["tests"]:
        out[test["tags"][0]] = out.get(test["tags"][0], 0) + test["score"]
    return {k: round(v, 3) for k, v in out.items()}


@pytest.fixture
def readable_by_all():
    """A temporary folder every user may read (pytest's tmp_path is root's alone): the
    grader runs the submission as a uid of its own, which imports dlsys from the bundle's venv there."""
    path = Path(tempfile.mkdtemp(prefix="dlsys-autograder-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_bundle_installs_and_grades_reference_stubs_partial_and_hostile(tmp_path, readable_by_all):
    bundle = tmp_path / "autograder.zip"
    from dlsys.cli import main

    assert (
        main(
            [
                "exercises",
                "gradescope",
                "hw1",
                *HOMEWORK,
                "-o",
                str(bundle),
                "--timeout-s",
                "3",
                "--visibility",
                "after_due_date",
            ]
        )
        == 0
    )
    names = set(zipfile.ZipFile(bundle).namelist())
    assert {"setup.sh", "run_autograder", CONFIG, "tests/exercises/conftest.py"} <= names
    assert {f"tests/exercises/test_{e}.py" for e in HOMEWORK} <= names
    assert "tests/exercises/test_ps_aggregation.py" not in names  # only the homework's tests
    assert [n for n in names if n.startswith("wheels/dlsys-") and n.endswith(".whl")]

    root = readable_by_all / "autograder"
    (root / "source").mkdir(parents=True)
    with zipfile.ZipFile(bundle) as z:  # as unzip does: contents, then each file's mode
        z.extractall(root / "source")
        for info in z.infolist():
            if info.external_attr >> 16:
                (root / "source" / info.filename).chmod(info.external_attr >> 16 & 0o777)
    wheelhouse = tmp_path / "wheelhouse"
    pins = [f"{name}=={version(name)}" for name in bundle_requirements()]
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--quiet",
            "--disable-pip-version-check",
            "-d",
            str(wheelhouse),
            *pins,
        ],
        check=True,
        timeout=SETUP_TIMEOUT_S,
        capture_output=True,
    )
    start = time.perf_counter()
    env = clean_env(root) | {"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(wheelhouse), "DLSYS_PYTHON": sys.executable}
    # run from this checkout, whose dlsys a bare ``python -c "import dlsys"`` would find first
    done = subprocess.run(
        ["bash", str(root / "source" / "setup.sh")],
        env=env,
        capture_output=True,
        text=True,
        timeout=SETUP_TIMEOUT_S,
        cwd=REPO_ROOT,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    print(f"\nsetup.sh: {time.perf_counter() - start:.1f} s")
    where = subprocess.run(
        [str(root / "source/.venv/bin/python"), "-c", "import dlsys; print(dlsys.__file__)"],
        cwd=root,
        env=clean_env(root),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    assert where.startswith(str(root / "source/.venv/")), where  # the pinned wheel, not this checkout
    for private in ("wheels", "tests", CONFIG):  # the grader's alone: the graded code runs as another uid
        assert (root / "source" / private).stat().st_mode & 0o077 == 0, private
    # setup.sh ran in this checkout: it locked the venv's package, not this checkout's
    assert (REPO_ROOT / "dlsys" / "__init__.py").stat().st_mode & 0o004

    points = {e.id: e.points for e in EXERCISES if e.id in HOMEWORK}
    reference = run_autograder(root, {f"hw1/{n}": t for n, t in files_with({}).items()})  # in a folder
    assert reference["score"] == reference["max_score"] == pytest.approx(sum(points.values()), abs=1e-3)
    assert {t["visibility"] for t in reference["tests"]} == {"after_due_date"}
    assert all(t["status"] == "passed" for t in reference["tests"])

    released = tmp_path / "released"
    release(released)
    # uploaded file by file, as Gradescope's form does: the folders are lost, the names are unique
    stubs = run_autograder(root, {Path(n).name: (released / n).read_text() for n in files_with({})})
    assert stubs["score"] == 0 and stubs["max_score"] == reference["max_score"]
    assert all("NotImplementedError" in t["output"] for t in stubs["tests"])

    partial = files_with({"ring_allreduce": WHOLE_BUFFERS})
    del partial["exercises/token_ring.py"]
    report = run_autograder(root, partial)
    got = scores(report)
    assert got["token_ring"] == 0 and "missing: exercises/token_ring.py" in report["output"]
    assert (
        got["ring_reduce_scatter"] == points["ring_reduce_scatter"]
        and got["ring_allgather"] == points["ring_allgather"]
    )
    assert 0 < got["ring_allreduce"] < points["ring_allreduce"]

    hostile = run_autograder(root, files_with({"token_ring": HOSTILE_TOKEN_RING}))
    token = {t["name"].split(": ", 1)[1]: t for t in hostile["tests"] if t["tags"] == ["token_ring"]}
    failed = {name for name, t in token.items() if t["status"] == "failed"}
    # the deleting test may fail itself; the tests on 5 and 6 ranks, run after it, must not
    assert failed - {"test_each_rank_returns_the_token_it_received[2]"} == {
        "test_one_lap_costs_p_messages_one_after_the_other",
        "test_keeps_dtype_and_shape",
    }, failed
    assert "timed out after 3 s" in token["test_one_lap_costs_p_messages_one_after_the_other"]["output"]
    assert {k: v for k, v in scores(hostile).items() if k != "token_ring"} == {
        k: v for k, v in points.items() if k != "token_ring"
    }
    assert (root / "source" / "tests" / "exercises" / "test_token_ring.py").is_file()

    rewritten = run_autograder(root, files_with({"token_ring": REWRITER_TOKEN_RING}))
    time.sleep(1.0)  # a surviving rewriter would strike now
    assert json.loads((root / "results" / "results.json").read_text()) == rewritten
    assert scores(rewritten)["token_ring"] == 0
