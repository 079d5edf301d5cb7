"""The Communicator's virtual-time rules, the backends, the trace, faults and leaks."""

import gc
import json
import os
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import psutil
import pytest

import dlsys
from dlsys import collectives
from dlsys.comm import BACKENDS as BACKENDS_BY_NAME
from dlsys.comm import LEND_MIN_NBYTES, DeadlockError, RankFailed
from dlsys.machine.net import LinkModel, get_node

LINK = LinkModel("test", latency_s=2e-6, bandwidth_Bps=1e9, overhead_s=1e-6, kernel_copies=1, copy_bandwidth_Bps=4e9)
BACKENDS = ["threads", "processes"]
# a script outside the repository imports this checkout's dlsys, not an installed one
REPO_ENV = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def shm_segments():
    """Segments of runs launched by this process (names carry the launcher's pid)."""
    return {f for f in os.listdir("/dev/shm") if f.startswith(f"dlsys-{os.getpid()}-")}


@pytest.fixture(autouse=True)
def no_leaks():
    """Every test leaves no /dev/shm segment and no child process behind."""
    before = shm_segments()
    yield
    deadline = time.monotonic() + 5
    while psutil.Process().children(recursive=True) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert psutil.Process().children(recursive=True) == []
    assert shm_segments() - before == set()


def ping(comm, nbytes):
    if comm.rank == 0:
        comm.send(np.zeros(nbytes, np.uint8), 1, label="ping")
    elif comm.rank == 1:
        comm.recv(source=0)
    return comm.clock


def test_one_message_costs_alpha_plus_n_beta():
    n = 10_000
    result = dlsys.launch(ping, 2, "threads", link=LINK, args=(n,))
    assert result.clocks_s[0] == pytest.approx(LINK.send_overhead_s(n))
    assert result.clocks_s[1] == pytest.approx(LINK.message_s(n), rel=1e-12)
    (message,) = result.trace.messages
    assert (message.src, message.dst, message.nbytes, message.label) == (0, 1, n, "ping")
    assert message.arrive_s - message.depart_s == pytest.approx(LINK.latency_s + n / LINK.bandwidth_Bps)


def test_egress_serializes_back_to_back_sends_and_ingress_serializes_incast():
    link = LinkModel("bw", 0.0, 1e6)  # 1 MB/s, no latency, no overhead

    def program(comm):
        if comm.rank == 0:
            comm.send(np.zeros(1000, np.uint8), 1)
            comm.send(np.zeros(1000, np.uint8), 2)
        elif comm.rank in (1, 2):
            comm.recv(source=0)
            comm.send(np.zeros(1000, np.uint8), 3)
        else:
            comm.recv(source=1), comm.recv(source=2)
        return comm.clock

    clocks = dlsys.launch(program, 4, "threads", link=link).values
    assert clocks[1] == pytest.approx(1e-3) and clocks[2] == pytest.approx(2e-3)
    assert clocks[3] == pytest.approx(3e-3)  # the two messages share rank 3's ingress


def test_compute_uses_node_model_and_straggler_slowdown():
    node = get_node("v100")

    def program(comm):
        comm.compute(flops=1e12, label="fwd")
        comm.compute(seconds=0.5)
        return comm.clock

    clocks = dlsys.launch(program, 2, "threads", node=[node, node.slowed(4)]).values
    assert clocks[0] == pytest.approx(1e12 / node.sustained_flops + 0.5)
    assert clocks[1] == pytest.approx(4 * clocks[0])


def test_isend_irecv_wait_and_sendrecv():
    def program(comm):
        right, left = (comm.rank + 1) % comm.size, (comm.rank - 1) % comm.size
        request = comm.irecv(source=left, tag=5)
        comm.isend(np.array([comm.rank]), right, tag=5).wait()
        got = request.wait()
        swapped = comm.sendrecv(np.array([comm.rank * 10]), dest=right, source=left)
        return int(got[0]), int(swapped[0])

    assert dlsys.launch(program, 3, "threads").values == [(2, 20), (0, 0), (1, 10)]


def test_tags_match_independently():
    def program(comm):
        if comm.rank == 0:
            comm.send(np.array([1]), 1, tag=1)
            comm.send(np.array([2]), 1, tag=2)
        else:
            return int(comm.recv(source=0, tag=2)[0]), int(comm.recv(source=0, tag=1)[0])

    assert dlsys.launch(program, 2, "threads").values[1] == (2, 1)


def traced_program(comm):
    x = comm.rng.standard_normal(1000).astype(np.float32)
    comm.compute(flops=1e9 * (comm.rank + 1), label="forward")
    y = collectives.allreduce(comm, x, algorithm="ring")
    z = collectives.broadcast(comm, y, root=1)
    if comm.rank == 0:
        order = [comm.recv_any()[0] for _ in range(comm.size - 1)]
    else:
        comm.compute(seconds=1e-3 * (comm.size - comm.rank))
        comm.send(z[:10], 0)
        order = None
    return float(z.sum()), order


def test_same_program_and_seed_give_identical_traces_on_every_backend():
    runs = [dlsys.launch(traced_program, 5, backend, link="rdma-edr", seed=11) for backend in BACKENDS]
    assert runs[0].values == runs[1].values
    assert runs[0].trace == runs[1].trace
    assert runs[0].clocks_s == runs[1].clocks_s
    assert runs[0].values[0][1] == [4, 3, 2, 1]  # recv_any: earliest virtual arrival first
    again = dlsys.launch(traced_program, 5, "threads", link="rdma-edr", seed=11)
    assert again.trace == runs[0].trace


def test_trace_exports_chrome_json_and_counts_bytes(tmp_path):
    result = dlsys.launch(traced_program, 4, "threads", seed=1)
    path = tmp_path / "trace.json"
    result.trace.save_chrome(path)
    events = json.loads(path.read_text())["traceEvents"]
    assert {e["ph"] for e in events} == {"M", "X"}
    assert sum(1 for e in events if e.get("cat") == "message") == len(result.trace.messages)
    assert sum(result.trace.bytes_per_link().values()) == sum(result.trace.bytes_sent_per_rank())
    assert result.trace.makespan_s == pytest.approx(result.virtual_time_s)
    spans, messages = result.trace.records()
    assert spans[0].keys() == {"rank", "start_s", "end_s", "kind", "label"}


def failing(comm):
    if comm.rank == 2:
        raise ZeroDivisionError("rank two divides by zero")
    comm.recv(source=(comm.rank + 1) % comm.size)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_rank_that_raises_fails_the_run_naming_the_rank_with_its_traceback(backend):
    start = time.monotonic()
    with pytest.raises(RankFailed) as info:
        dlsys.launch(failing, 4, backend)
    assert time.monotonic() - start < 10
    assert info.value.rank == 2
    assert "ZeroDivisionError: rank two divides by zero" in str(info.value)
    assert "in failing" in info.value.rank_traceback


def killed(comm):
    if comm.rank == 1:
        os.kill(os.getpid(), signal.SIGKILL)
    comm.recv(source=(comm.rank + 1) % comm.size)


def test_a_rank_killed_with_sigkill_fails_the_run_within_10_s():
    start = time.monotonic()
    with pytest.raises(RankFailed, match="rank 1 failed.*SIGKILL"):
        dlsys.launch(killed, 3, "processes")
    assert time.monotonic() - start < 10


def unmatched(comm):
    if comm.rank == 0:
        comm.recv(source=1, tag=9)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_receive_that_can_never_be_matched_raises_deadlock(backend):
    start = time.monotonic()
    with pytest.raises(DeadlockError, match="rank 0 waits for rank 1 \\(tag 9\\); finished: ranks 1"):
        dlsys.launch(unmatched, 2, backend)
    assert time.monotonic() - start < 10


def sleeper(comm):
    time.sleep(30)


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_run_has_a_wall_clock_deadline(backend):
    start = time.monotonic()
    with pytest.raises(TimeoutError, match="did not finish within timeout_s=1"):
        dlsys.launch(sleeper if backend == "processes" else unmatched_forever, 2, backend, timeout_s=1.0)
    assert time.monotonic() - start < 5


def one_computes_one_waits(comm, compute_s):
    """Rank 0 computes past the deadline while rank 1 waits for it (tag 3); rank 2 is done."""
    if comm.rank == 0:
        comm.recv(source=1, tag=1)
        end = time.monotonic() + compute_s
        while time.monotonic() < end:  # Python bytecode, so a threads run can stop it (time.sleep is one C call)
            pass
    elif comm.rank == 1:
        comm.send(np.zeros(1), 0, tag=1)
        comm.recv(source=0, tag=3)


@pytest.mark.parametrize(
    "backend,timeout_s", [("threads", 1), ("processes", 5)]
)  # processes take ~1 s to start on a busy machine
def test_a_timeout_says_what_each_unfinished_rank_was_doing(backend, timeout_s):
    with pytest.raises(TimeoutError) as raised:
        dlsys.launch(one_computes_one_waits, 3, backend, args=(timeout_s + 2,), timeout_s=timeout_s)
    assert str(raised.value) == (
        f"the run did not finish within timeout_s={timeout_s}: rank 0 computing; "
        "rank 1 waits for rank 0 (tag 3); 1 of 3 ranks finished"
    )


def unmatched_forever(comm):
    if comm.rank == 0:
        comm.recv(source=1)
    else:
        time.sleep(3)  # running, so not a deadlock, but slower than the deadline


def test_keyboard_interrupt_leaves_no_process_and_no_segment():
    stop = threading.Event()

    def press_ctrl_c():
        # Python swallows a KeyboardInterrupt raised while a finalizer (__del__) runs
        # ("Exception ignored in ..."), which garbage from earlier tests can make happen:
        # then press again, as a user would, long after a caught one has been handled.
        delay_s = 1.0
        while not stop.wait(delay_s):
            signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)
            delay_s = 5.0

    gc.collect()
    threading.Thread(target=press_ctrl_c, daemon=True).start()
    try:
        with pytest.raises(KeyboardInterrupt):
            dlsys.launch(sleeper, 3, "processes")
    finally:
        stop.set()


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(world_size=0), "world_size must be an integer in 1.."),
        (dict(world_size=2.5), "world_size"),
        (dict(backend="carrier-pigeon"), "backend must be one of threads, processes"),
        (dict(link="fast"), "unknown link preset 'fast'; valid: tcp-1gbe"),
        (dict(node="abacus"), "unknown node preset 'abacus'"),
        (dict(node=["v100"]), "one per rank"),
        (dict(timeout_s=-1), "timeout_s"),
        (dict(seed=-1), "seed"),
    ],
)
def test_bad_launch_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        dlsys.launch(ping, **({"world_size": 2, "args": (1,)} | kwargs))


def test_a_bad_dlsys_backend_variable_is_named(monkeypatch):
    monkeypatch.setenv("DLSYS_BACKEND", "carrier-pigeon")
    with pytest.raises(ValueError, match="environment variable DLSYS_BACKEND must be one of threads, processes, mpi"):
        dlsys.launch(traced_program, 2)


@pytest.mark.parametrize(
    "call,match",
    [
        (lambda comm: comm.send(np.zeros(1), 5), "dest must be another rank in 0..1"),
        (lambda comm: comm.send(np.zeros(1), comm.rank), "dest must be another rank"),
        (lambda comm: comm.recv(source=-2), r"source must be another rank in 0..1 or ANY_SOURCE \(-1\)"),
        (lambda comm: comm.recv(source=5), r"source must be another rank in 0..1 or ANY_SOURCE"),
        (
            lambda comm: comm.recv(1 - comm.rank),
            r"recv: buf \(mpi4py's receive buffer\) must be None or an array, "
            r"got \d; to receive from rank \d, name it: comm.recv\(source=\d\)",
        ),
        (lambda comm: comm.irecv(1 - comm.rank), r"irecv: buf .* comm.irecv\(source=\d\)"),
        (lambda comm: comm.recv(source=1 - comm.rank, tag=-2), r"tag must be an int >= 0 or ANY_TAG \(-1\), got -2"),
        (lambda comm: comm.recv(source=1 - comm.rank, status="s"), "recv: status must be None or a dlsys.comm.Status"),
        (
            lambda comm: comm.sendrecv(np.zeros(1), 1 - comm.rank, 0, 1 - comm.rank),
            r"sendrecv: recvbuf .* "
            r"comm.sendrecv\(source=\d\)",
        ),
        (lambda comm: comm.sendrecv(np.zeros(1), 1 - comm.rank, -1), "sendtag must be an int >= 0, got -1"),
        (lambda comm: comm.sendrecv(np.zeros(1), 1 - comm.rank, source=1 - comm.rank, recvtag=-3), "recvtag must be"),
        (lambda comm: comm.send(np.zeros(1), 1 - comm.rank, tag=-2), "tag must be an int >= 0"),
        (lambda comm: comm.send(np.array([object()]), 1 - comm.rank), "x must be a numeric array"),
        (lambda comm: comm.compute(seconds=-1), "seconds must be a finite number >= 0"),
        (lambda comm: comm.compute(), "exactly one of"),
    ],
)
def test_bad_communicator_calls_name_the_argument(call, match):
    with pytest.raises(RankFailed, match=match):
        dlsys.launch(call, 2, "threads")


def test_link_and_node_models_validate_their_numbers():
    with pytest.raises(ValueError, match="bandwidth_Bps"):
        LinkModel("x", 1e-6, 0)
    with pytest.raises(ValueError, match="latency_s"):
        LinkModel("x", -1, 1e9)
    with pytest.raises(ValueError, match="slowdown"):
        get_node("v100").slowed(0.5)


SCRIPT = """
import numpy as np, dlsys
from dlsys import collectives
def program(comm, scale):
    return collectives.allreduce(comm, np.full(4, comm.rank * scale), algorithm="ring").tolist()

print(dlsys.launch(program, 3, "processes", args=(2.0,)).values[0])
"""


def test_programs_defined_in_a_stdin_script_run_on_processes():
    """`python -` has no importable __main__: the program must travel by value."""
    out = subprocess.run([sys.executable, "-"], input=SCRIPT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[6.0, 6.0, 6.0, 6.0]"


def test_a_script_without_main_guard_is_not_re_executed_by_ranks(tmp_path):
    script = tmp_path / "lesson.py"
    script.write_text(SCRIPT + "\nprint('top level ran')\n")
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60, env=REPO_ENV)
    assert out.returncode == 0, out.stderr
    assert out.stdout.count("top level ran") == 1


def test_launch_from_a_server_thread_on_processes():
    box = {}

    def serve():
        box["values"] = dlsys.launch(lambda comm: comm.rank * 2, 2, "processes").values

    worker = threading.Thread(target=serve)
    worker.start()
    worker.join(60)
    assert box["values"] == [0, 2]


def test_rank_return_values_and_rng_are_seeded_per_rank():
    def program(comm):
        return comm.rng.integers(0, 1 << 30)

    a = dlsys.launch(program, 3, "threads", seed=5).values
    b = dlsys.launch(program, 3, "processes", seed=5).values
    assert a == b and len(set(a)) == 3
    assert dlsys.launch(program, 3, "threads", seed=6).values != a


@pytest.mark.parametrize(
    "backend",
    [
        "threads",
        pytest.param(
            "mpi",
            marks=pytest.mark.skipif(
                BACKENDS_BY_NAME["mpi"].unavailable() is not None, reason=str(BACKENDS_BY_NAME["mpi"].unavailable())
            ),
        ),
    ],
)
def test_recv_any_with_every_source_finished_is_an_error(backend):
    def program(comm):
        if comm.rank == 0:
            time.sleep(0.2)
            comm.recv_any()

    with pytest.raises(RankFailed, match="every source"):
        dlsys.launch(program, 3, backend)


# --- lent sends: isend of comm.alloc memory is zero-copy on processes ------------------------
# The receiver's array is the sender's buffer; the sender's request completes when the
# receiver drops it (MPI's rule: don't write an isend buffer before wait). Virtual time
# does not change: the trace is the same as with copied sends, on every backend.


LENT = LEND_MIN_NBYTES // 4  # float32 elements: the smallest payload that is lent, not copied


def lend_once(comm, n):
    if comm.rank == 0:
        buf = comm.alloc(n)
        buf[:] = 7
        comm.isend(buf, 1).wait()
        buf[:] = 0  # allowed after wait: the receiver has dropped its array
        return len(getattr(comm._transport, "pool", []))  # copied sends would fill the pool
    got = comm.recv(source=0)
    return got.flags.writeable, float(got.sum())


@pytest.mark.parametrize("backend", BACKENDS)
def test_alloc_memory_travels_by_isend_and_the_values_arrive(backend):
    pool, (writeable, total) = dlsys.launch(lend_once, 2, backend, args=(LENT,)).values
    assert total == 7 * LENT
    if backend == "processes":
        assert pool == 0 and not writeable  # lent, not copied; the receiver only reads it


def test_small_payloads_are_copied_even_from_alloc_memory():
    pool, (writeable, total) = dlsys.launch(lend_once, 2, "processes", args=(LENT - 1,)).values
    assert total == 7 * (LENT - 1) and pool == 1 and writeable  # eager: a copy beats a round trip


def hold_then_drop(comm):
    if comm.rank == 0:
        request = comm.isend(comm.alloc(LENT), 1)
        comm.recv(source=1)  # rank 1 holds the array now
        request.wait()
        return time.monotonic()
    got = comm.recv(source=0)
    comm.send(np.zeros(1), 0)
    time.sleep(0.3)
    dropped_at = time.monotonic()
    del got
    return dropped_at


def test_the_senders_wait_returns_only_after_the_receiver_dropped_the_array():
    done_at, dropped_at = dlsys.launch(hold_then_drop, 2, "processes").values
    assert done_at >= dropped_at  # CLOCK_MONOTONIC is one clock for every process


def hold_and_wait(comm):
    if comm.rank == 0:
        comm.isend(comm.alloc(LENT), 1).wait()
        comm.send(np.zeros(1), 1)
    else:
        first = comm.recv(source=0)  # held while waiting for the next message: rank 0 never gets it back
        return first, comm.recv(source=0)


def test_holding_a_lent_array_while_waiting_on_its_sender_is_a_named_deadlock():
    with pytest.raises(DeadlockError, match="rank 0 waits for rank 1 to drop the array rank 0 lent it"):
        dlsys.launch(hold_and_wait, 2, "processes", timeout_s=60)


def lend_and_leave(comm):
    if comm.rank == 0:
        buf = comm.alloc(LENT)
        buf[:] = 3
        comm.isend(buf, 1)  # never waited: the buffer stays valid after this rank is gone
        return None
    time.sleep(0.3)
    return float(comm.recv(source=0).sum())


def test_a_sender_that_finishes_without_waiting_leaves_valid_data():
    assert dlsys.launch(lend_and_leave, 2, "processes").values[1] == 3 * LENT


def ring_on_alloc(comm, n, in_place):
    x = comm.alloc(n)
    results = []
    for repeat in range(3):  # rewriting the buffers between calls must be safe
        x[:] = np.arange(n) * (comm.rank + 1) + repeat
        out = x if in_place else comm.alloc(n)
        results.append(collectives.allreduce(comm, x, out=out).copy())
    return results, len(getattr(comm._transport, "pool", []))


@pytest.mark.parametrize("p", [2, 3, 4])
@pytest.mark.parametrize("in_place", [False, True])
def test_ring_allreduce_on_lent_memory_is_exact(p, in_place):
    n = p * LENT + 3  # blocks of different sizes, each large enough to be lent
    result = dlsys.launch(ring_on_alloc, p, "processes", args=(n, in_place))
    for repeat in range(3):
        want = np.arange(n) * p * (p + 1) / 2 + p * repeat
        for values, _ in result.values:
            np.testing.assert_array_equal(values[repeat], want.astype(np.float32))
    assert all(pool == 0 for _, pool in result.values)  # every block was lent, none copied


def test_lending_does_not_change_the_trace():
    runs = [
        dlsys.launch(ring_on_alloc, 3, backend, args=(3 * LENT + 2, False), link="rdma-edr") for backend in BACKENDS
    ]
    assert runs[0].trace.spans == runs[1].trace.spans and runs[0].trace.messages == runs[1].trace.messages
    assert runs[0].virtual_time_s == runs[1].virtual_time_s


@pytest.mark.parametrize(
    "call,error,match",
    [
        (lambda comm: comm.alloc(-1), ValueError, "alloc: shape must be an int >= 0"),
        (lambda comm: comm.alloc((2, 1.5)), ValueError, "alloc: shape"),
        (lambda comm: comm.alloc(3, object), TypeError, "alloc: dtype must be numeric"),
    ],
)
@pytest.mark.parametrize("backend", BACKENDS)
def test_bad_alloc_arguments_name_the_argument(backend, call, error, match):
    with pytest.raises(RankFailed, match=match):
        dlsys.launch(call, 2, backend, timeout_s=60)


def test_alloc_of_nothing_is_an_empty_array():
    assert dlsys.launch(lambda comm: comm.alloc((0, 3)).shape, 2, "processes").values == [(0, 3)] * 2


def test_threads_pause_the_cyclic_gc_during_a_run_and_restore_it():
    def program(comm):
        return gc.isenabled()

    assert gc.isenabled()
    assert dlsys.launch(program, 2, "threads").values == [False, False]
    assert gc.isenabled()
