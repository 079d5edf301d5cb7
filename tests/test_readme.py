"""The README's example runs as printed and says what its comments say."""

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

README = Path(__file__).resolve().parent.parent / "README.md"


def test_readme_example_runs(tmp_path, monkeypatch):
    code = re.search(r"```python\n(.*?)```", README.read_text(), re.S).group(1)
    monkeypatch.chdir(tmp_path)
    namespace = {}
    exec(compile(code, str(README), "exec"), namespace)
    result = namespace["result"]
    assert np.array_equal(result.values[0][:3], np.full(3, 28.0, np.float32))
    assert result.virtual_time_s > 0 and (tmp_path / "ring.json").is_file()


# --- every command the README prints is run by a test ------------------------------------

ROOT = README.parent


def readme_commands() -> list[str]:
    """The README's commands: every line of its bash blocks (its comment cut off) and every
    command quoted in its prose (`dlsys ...`, `make ...`, `.venv/bin/...`, `DLSYS_...`)."""
    text = README.read_text()
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", text, re.S):
        commands += [line for line in (re.split(r"\s#\s", raw)[0].strip() for raw in block.splitlines()) if line]
    prose = re.sub(r"```.*?```", "", text, flags=re.S)
    commands += re.findall(r"`((?:dlsys |make |\.venv/bin/|DLSYS_)[^`]*)`", prose)
    return list(dict.fromkeys(commands))


# README command -> the test file that runs it: the same line, or a cheap variant with the
# same command and flags and smaller values (the test file must name each of its words and flags)
RUN_ELSEWHERE = {
    "make app": "tests/app/test_browser.py",  # `make -s app PORT=...`, as a student starts it
    ".venv/bin/dlsys simulate allreduce --algo ring --ranks 8 --size 64MiB --link tcp-10gbe": "tests/cli/test_cli.py",
    ".venv/bin/dlsys presets": "tests/cli/test_cli.py",
    ".venv/bin/dlsys presets --stack tcp-10gbe --size 64KiB": "tests/machine/test_netstack.py",
    ".venv/bin/dlsys train --compress topk --ratio 0.01": "tests/compress/test_compress_comm.py",
    ".venv/bin/dlsys train --strategy allreduce --staleness 3": "tests/train/test_train.py",
    ".venv/bin/dlsys compress --model resnet50 --method dgc": "tests/compress/test_compress_comm.py",
    ".venv/bin/dlsys train --sweep batch --out results/large_batch.json": "tests/train/test_large_batch.py",
    ".venv/bin/dlsys schedule --model resnet50 --policy p3 --workers 4 --link 10Gbps": "tests/schedule/test_schedule.py",
    ".venv/bin/dlsys schedule --model alexnet --sweep 1Gbps 10Gbps 100Gbps": "tests/schedule/test_schedule.py",
    ".venv/bin/dlsys schedule --model vgg19 --p3-paper --sweep 1Gbps 10Gbps 40Gbps": "tests/schedule/test_schedule.py",
    ".venv/bin/dlsys bench allreduce --ranks 2 --size 64MiB": "tests/experiments/test_bench.py",
    ".venv/bin/dlsys train --storage hdd --loader-workers 4 --prefetch 8": "tests/cli/test_cli.py",
    ".venv/bin/dlsys bench emulate --ranks 512": "tests/experiments/test_bench.py",
    ".venv/bin/dlsys mpirun -n 8 -- .venv/bin/python my_ring.py": "tests/comm/test_mpi.py",
    ".venv/bin/dlsys casestudy taihulight --model alexnet --design ps --nodes 64": "tests/experiments/test_taihulight.py",
    ".venv/bin/dlsys casestudy taihulight --model resnet50 --design ring --nodes 2,4,...,512 --scattered": "tests/experiments/test_taihulight.py",
    ".venv/bin/dlsys casestudy taihulight --versus-mpi --nodes 2,4,...,512": "tests/experiments/test_taihulight.py",
    ".venv/bin/dlsys casestudy taihulight --versus-mpi --nodes 2,4,...,512 --static-shares": "tests/experiments/test_taihulight.py",
    ".venv/bin/dlsys plan --model 70b --gpus 1024": "tests/planner/test_plan.py",
    "dlsys plan": "tests/planner/test_plan.py",
    ".venv/bin/dlsys reproduce --quick": "tests/course/test_reproduce.py",
    "python benchmarks/run_all.py": "tests/experiments/test_bench.py",  # --smoke
    ".venv/bin/python lessons/03_ring_allreduce.py": "tests/course/test_lessons.py",  # every lesson, as a script
    "make notebooks": "tests/course/test_notebooks.py",  # its `dlsys lessons build`
    "dlsys lessons build": "tests/course/test_notebooks.py",
    "dlsys exercises release hw": "tests/grading/test_exercises.py",
    "dlsys grade hw": "tests/grading/test_exercises.py",
    "dlsys exercises gradescope hw2 ring_reduce_scatter ring_allgather ring_allreduce -o hw2.zip": "tests/grading/test_gradescope.py",
}

# README command -> {word: cheaper word}: run here, as main(argv) runs it
RUN_HERE = {
    ".venv/bin/dlsys simulate broadcast --algo binomial --ranks 16 --size 1MiB --link rdma-hdr --json": {},
    ".venv/bin/dlsys simulate allreduce --algo ring --ranks 512 --size 60.97MB --link sw26010": {"512": "16"},
    ".venv/bin/dlsys simulate allreduce --ranks 8 --size 16MiB --real": {"16MiB": "1MiB"},
    ".venv/bin/dlsys simulate allreduce --algo hierarchical --ranks 512 --size 60.97MB --topology taihulight": {
        "512": "16",
        "60.97MB": "1MB",
    },
    ".venv/bin/dlsys train --model mlp --dataset digits --workers 4 --strategy ps-ssp --staleness 2 --straggler 3:4": {},
    ".venv/bin/dlsys compress --pareto": {},
    ".venv/bin/dlsys train --schedule p3 --strategy ps-bsp": {},
    ".venv/bin/dlsys bench latency": {},
    ".venv/bin/dlsys bench stack": {},
    ".venv/bin/dlsys pipeline --schedule zb-h1 --stages 4 --microbatches 8": {},
    ".venv/bin/dlsys simulate alltoall --algo bruck --ranks 16 --size 4KiB --link rdma-edr": {},
    ".venv/bin/dlsys reproduce ring-closed-form lars --json": {},
}

# README command -> why no test runs it here (what runs instead)
NOT_RUN = {
    "make test": "the suite itself",
    "make demo": "the Makefile's demo is README's first simulate line (test_make_demo_is_the_readmes_simulate_line)",
    ".venv/bin/dlsys reproduce --write-docs": "rewrites tracked docs; tests/course/test_docs.py holds every generated "
    "block equal to what it would write",
}
MPI_COMMANDS = {  # run here when mpirun is there, else skipped by name
    ".venv/bin/dlsys simulate allreduce --ranks 8 --size 64MiB --backend mpi": {"8": "2", "64MiB": "64KiB"},
    ".venv/bin/dlsys bench allreduce --backend mpi": {},
    'DLSYS_BACKEND=mpi DLSYS_MPIRUN_ARGS="--hostfile hosts" python lessons/03_ring_allreduce.py': {},
}


def test_every_readme_command_is_run_by_a_test():
    listed = [*RUN_ELSEWHERE, *RUN_HERE, *NOT_RUN, *MPI_COMMANDS]
    assert len(listed) == len(set(listed))
    assert set(readme_commands()) == set(listed), "a README command without its test (or a stale entry here)"
    unnamed = []
    for command, test_file in RUN_ELSEWHERE.items():
        source = (ROOT / test_file).read_text()
        words = [w for w in shlex.split(command)[1:] if w.startswith("-") or w.isalpha()]
        unnamed += [(command, w) for w in words if not any(f"{q}{w}{q}" in source for q in "\"'")]
    assert unnamed == [], "a test file that does not name a word or flag of the command it is said to run"


def test_make_demo_is_the_readmes_simulate_line():
    recipe = re.search(r"^demo:.*\n\t(.*)$", (ROOT / "Makefile").read_text(), re.M).group(1)
    assert recipe.replace("$(VENV)", ".venv") in readme_commands()


def _argv(command: str, cheaper: dict) -> list[str]:
    words = shlex.split(command)
    assert words[0] == ".venv/bin/dlsys" and all(word in words for word in cheaper), command
    return [cheaper.get(word, word) for word in words[1:]]


@pytest.mark.parametrize("command", list(RUN_HERE))
def test_a_readme_command_runs(command, tmp_path, monkeypatch, capsys):
    from dlsys.cli import main

    monkeypatch.chdir(tmp_path)  # a command writes only where told: nothing lands here either
    assert main(_argv(command, RUN_HERE[command])) == 0
    assert capsys.readouterr().out.strip()
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("command", [c for c in MPI_COMMANDS if c.startswith(".venv/")])
def test_a_readme_mpi_command_runs(command, tmp_path, monkeypatch, capsys):
    from dlsys.cli import main
    from dlsys.comm.backends.mpi import mpi_unavailable

    if mpi_unavailable() is not None:
        pytest.skip(str(mpi_unavailable()))
    monkeypatch.chdir(tmp_path)
    assert main(_argv(command, MPI_COMMANDS[command])) == 0
    assert "mpi" in capsys.readouterr().out


def test_the_readmes_lesson_on_the_hosts_of_a_hostfile(tmp_path):
    """DLSYS_BACKEND=mpi DLSYS_MPIRUN_ARGS="--hostfile hosts" python lessons/03_ring_allreduce.py,
    with a hostfile of this machine. The lesson itself under mpi takes minutes (an mpirun
    start per launch, dozens of them; tests/course/test_lessons.py runs it on threads), so a
    script of one launch stands for it: the same variables must reach launch and mpirun."""
    from dlsys.comm.backends.mpi import mpi_unavailable

    if mpi_unavailable() is not None:
        pytest.skip(str(mpi_unavailable()))
    (command,) = [c for c in MPI_COMMANDS if c.startswith("DLSYS_")]
    words = shlex.split(command)
    assert words[2:] == ["python", "lessons/03_ring_allreduce.py"]
    (tmp_path / "hosts").write_text("localhost slots=64\n")
    script = tmp_path / "lesson.py"
    script.write_text(
        "import numpy as np, dlsys\nfrom dlsys import collectives\n"
        "def program(comm):\n    return collectives.allreduce(comm, np.full(4, comm.rank), "
        "algorithm='ring')[0]\n"
        "run = dlsys.launch(program, 4, 'threads')\nprint(run.backend, run.values)\n"
    )
    env = dict(os.environ, **dict(w.split("=", 1) for w in words[:2]))
    run = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.split()[0] == "mpi" and "6" in run.stdout  # DLSYS_BACKEND replaced "threads"


def test_a_hostfile_in_dlsys_mpirun_args_reaches_mpirun(monkeypatch):
    from dlsys.comm.backends.mpi import mpi_unavailable, mpirun_command

    if mpi_unavailable() is not None:
        pytest.skip(str(mpi_unavailable()))
    monkeypatch.setenv("DLSYS_MPIRUN_ARGS", "--hostfile hosts")
    assert mpirun_command(4)[0][-2:] == ["--hostfile", "hosts"]
