"""The playground (dlsys.grading.playground and app/views/playground.py): a student's own rank
program run in the grader's sandbox; its starters, its errors in words, its time limit."""

import os
import sys
import time
from pathlib import Path

import psutil
import pytest
from streamlit.testing.v1 import AppTest

from dlsys.grading import playground as pg
from dlsys.machine.net import get_link

APP_DIR = Path(__file__).resolve().parents[2] / "app"
sys.path.insert(0, str(APP_DIR))


def closed_form(name: str, p: int, nbytes: int, link: str = "tcp-10gbe") -> float:
    model = get_link(link)
    return pg.closed_form_s(pg.STARTERS[name][1], p, nbytes, model.alpha_s, model.beta_s_per_byte)


@pytest.mark.parametrize("p", [2, 5, 8])
def test_the_starters_give_their_values_and_the_closed_form(p):
    nbytes = 4096
    ring = pg.run_program(pg.STARTERS["token ring"][0], p, nbytes=nbytes)
    assert ring.error is None
    assert ring.values == [repr(float(p))] + [repr(float(r)) for r in range(1, p)]  # rank r holds token + r
    assert ring.time_s == pytest.approx(closed_form("token ring", p, nbytes), rel=1e-12)
    assert len(ring.trace.messages) == p
    # every rank waits on comm.recv() (ANY_SOURCE) at once; naming the source is the same run
    assert "comm.recv()" in pg.STARTERS["token ring"][0]
    left = "comm.recv(source=(comm.rank - 1) % comm.size)"
    named = pg.run_program(pg.STARTERS["token ring"][0].replace("comm.recv()", left), p, nbytes=nbytes)
    assert named.values == ring.values and named.trace.messages == ring.trace.messages
    total = repr(p * (p + 1) / 2)  # ranks hold 1, 2, ..., p
    naive = pg.run_program(pg.STARTERS["naive all-reduce"][0], p, nbytes=nbytes)
    assert naive.error is None and naive.values == [total] * p and len(naive.trace.messages) == p * (p - 1)
    allreduce = pg.run_program(pg.STARTERS["ring all-reduce"][0], p, nbytes=nbytes)
    assert allreduce.error is None and allreduce.values == [total] * p
    if (nbytes // 8) % p == 0:  # the textbook form is exact for equal blocks
        assert allreduce.time_s == pytest.approx(closed_form("ring all-reduce", p, nbytes), rel=1e-12)


def test_a_deadlock_names_every_rank_and_what_it_waits_for():
    run = pg.run_program("def program(comm):\n    return comm.recv(source=1 - comm.rank)\n", 2)
    assert run.error["kind"] == "deadlock"
    assert [(w["rank"], w["source"], w["tag"]) for w in run.error["waits"]] == [(0, 1, None), (1, 0, None)]
    text = pg.describe_error(run.error)
    assert "rank 0 waits for rank 1 (any tag)" in text and "rank 1 waits for rank 0 (any tag)" in text
    tagged = pg.run_program("def program(comm):\n    return comm.recv(None, 1 - comm.rank, 3)\n", 2)
    assert [(w["rank"], w["source"], w["tag"]) for w in tagged.error["waits"]] == [(0, 1, 3), (1, 0, 3)]


@pytest.mark.parametrize("p", [2, 5])
def test_the_ssend_starter_deadlocks_in_words_and_sendrecv_fixes_it(p):
    """The classic deadlock: every rank in ssend, none at its recv; sendrecv (or send) ends it."""
    source, formula = pg.STARTERS["ssend deadlock (fix it)"]
    run = pg.run_program(source, p)
    assert run.error["kind"] == "deadlock"
    text = pg.describe_error(run.error)
    for r in range(p):
        assert f"rank {r} waits for rank {(r + 1) % p} to receive its synchronous send" in text
    fixed = source.replace(
        "    comm.ssend(x, dest=right)\n    return comm.recv(source=left)[0]",
        "    return comm.sendrecv(x, dest=right, source=left)[0]",
    )
    assert fixed != source
    run = pg.run_program(fixed, p, nbytes=1024)
    assert run.error is None and run.values == [repr(float((r - 1) % p)) for r in range(p)]
    model = get_link("tcp-10gbe")
    assert run.time_s == pytest.approx(
        pg.closed_form_s(formula, p, 1024, model.alpha_s, model.beta_s_per_byte), rel=1e-12
    )


def test_a_program_uses_mpi4py_names_any_source_and_status():
    source = (
        "def program(comm):\n"
        "    if comm.rank == 0:\n"
        "        status, got = MPI.Status(), []\n"
        "        for _ in range(comm.size - 1):\n"
        "            x = comm.recv(source=MPI.ANY_SOURCE, tag=MPI.ANY_TAG, status=status)\n"
        "            got.append((status.Get_source(), status.Get_tag(), int(x[0])))\n"
        "        return got\n"
        "    comm.compute(seconds=1e-3 * (comm.size - comm.rank))\n"
        "    comm.send(np.full(4, comm.rank), dest=0, tag=10 + comm.rank)\n"
    )
    run = pg.run_program(source, 4)
    assert run.error is None
    assert run.values[0] == repr([(3, 13, 3), (2, 12, 2), (1, 11, 1)])  # the earliest in virtual time first


def test_an_exception_names_the_rank_and_the_line():
    source = "def program(comm):\n    x = comm.rank\n    if x == 2:\n        return 1 / 0\n    return x\n"
    run = pg.run_program(source, 3)
    assert run.error == {"kind": "exception", "rank": 2, "message": "ZeroDivisionError: division by zero", "line": 4}
    assert (
        pg.describe_error(run.error) == "rank 2 raised ZeroDivisionError: division by zero at line 4 of your program."
    )
    syntax = pg.run_program("def program(comm):\n    return (\n", 2)
    assert syntax.error["kind"] == "syntax" and syntax.error["line"] == 2


def _leftovers() -> tuple[set, set]:
    return {c.pid for c in psutil.Process().children(recursive=True)}, set(os.listdir("/dev/shm"))


@pytest.mark.serial
@pytest.mark.parametrize(
    "source, kind",
    [
        ("def program(comm):\n    while True:\n        pass\n", "timeout"),  # the ranks' deadline says who
        ("while True:\n    pass\n", "timeout"),  # the sandbox is killed
        ("import os\ndef program(comm):\n    while True:\n        os.fork()\n", None),  # a fork bomb
    ],
)
def test_a_loop_or_a_bomb_ends_at_the_time_limit_and_leaves_nothing(source, kind):
    before = _leftovers()
    start = time.monotonic()
    run = pg.run_program(source, 2, time_limit_s=8)
    assert time.monotonic() - start < 8 + 6
    assert run.error is not None and run.values == []
    if kind is not None:
        assert run.error["kind"] == kind and "did not" in run.error["message"], run.error
    assert _leftovers()[0] <= before[0] and _leftovers()[1] <= before[1]


@pytest.mark.parametrize(
    "formula",
    [
        "__import__('os').system('true')",
        "p.__class__",
        "open('x')",
        "lambda: 1",
        "[p]",
        "alpha if p else beta",
        "10 ** 10 ** 10",
        "log2(p, 2)",
        "n ** -p / 0",
    ],
)
def test_a_closed_form_is_arithmetic_only(formula):
    with pytest.raises(ValueError, match="closed form"):
        pg.closed_form_s(formula, 4, 1024, 1e-5, 1e-9)


def test_a_closed_form_evaluates_its_names_and_functions():
    assert pg.closed_form_s("2 * (p - 1) * alpha + ceil(log2(p)) * n * beta - floor(0.5)", 4, 8, 1.0, 0.5) == 14.0


def test_bad_settings_are_refused_before_any_run():
    with pytest.raises(ValueError, match="ranks"):
        pg.run_program("", 17)
    with pytest.raises(ValueError, match="topology"):
        pg.run_program("", 4, topology="torus")


def test_the_page_runs_a_starter_and_reports_a_deadlock():
    at = AppTest.from_file(str(APP_DIR / "streamlit_app.py"), default_timeout=120)
    at.run()
    at.switch_page("views/playground.py").run()
    assert not at.exception and not at.error
    at.selectbox(key="pg_starter").set_value("ring all-reduce")
    at.slider(key="pg_ranks").set_value(8)
    at.run()
    assert not at.exception and not at.error
    assert at.metric[0].value == at.metric[1].value  # the ring's closed form is exact
    assert at.dataframe[0].value["returned"].tolist() == [repr(36.0)] * 8
    at.text_area(key="pg_code_ring all-reduce").set_value("def program(comm):\n    comm.recv(source=1 - comm.rank)\n")
    at.slider(key="pg_ranks").set_value(2)
    at.run()
    assert not at.exception and "rank 0 waits for rank 1" in at.error[0].value
    at.text_area(key="pg_code_ring all-reduce").set_value(pg.STARTERS["ring all-reduce"][0])
    at.text_input(key="pg_formula_ring all-reduce").set_value("__import__('os')")
    at.run()
    assert not at.exception and "not" in at.error[0].value and "__import__" in at.error[0].value
