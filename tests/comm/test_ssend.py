"""Synchronous sends (issue 28, point 7): ``comm.ssend`` and ``launch(eager_limit_bytes=)``
show the classic "everyone sends first" deadlock, reported with who waits for whom; the
fixes (sendrecv, odd/even order) give the same values and traces on every backend; the
default (buffered) sends are unchanged."""

import numpy as np
import pytest

import dlsys
from dlsys.comm import DeadlockError
from dlsys.comm.backends.mpi import mpi_unavailable
from dlsys.machine.net import LinkModel

BACKENDS = [
    "threads",
    "processes",
    pytest.param("mpi", marks=pytest.mark.skipif(mpi_unavailable() is not None, reason="no MPI")),
]


def neighbours(comm):
    return (comm.rank + 1) % comm.size, (comm.rank - 1) % comm.size


def everyone_sends_first(comm):
    right, left = neighbours(comm)
    comm.send(np.full(100, comm.rank, np.float32), right)
    return comm.recv(source=left)


def everyone_ssends_first(comm):
    right, left = neighbours(comm)
    comm.ssend(np.full(100, comm.rank, np.float32), right)
    return comm.recv(source=left)


def odd_even(comm):
    right, left = neighbours(comm)
    x = np.full(100, comm.rank, np.float32)
    if comm.rank % 2 == 0:
        comm.ssend(x, right)
        return comm.recv(source=left)
    got = comm.recv(source=left)
    comm.ssend(x, right)
    return got


def with_sendrecv(comm):
    right, left = neighbours(comm)
    return comm.sendrecv(np.full(100, comm.rank, np.float32), right, source=left)


def with_requests(comm):
    right, left = neighbours(comm)
    request = comm.irecv(source=left)
    comm.compute(seconds=1e-6 * comm.rank)
    sent = comm.isend(np.full(100, comm.rank, np.float32), right)
    got = request.wait()
    sent.wait()
    return got


@pytest.mark.parametrize("backend", BACKENDS)
def test_everyone_sends_first_deadlocks_only_when_sends_are_synchronous(backend):
    assert [int(v[0]) for v in dlsys.launch(everyone_sends_first, 4, backend).values] == [3, 0, 1, 2]
    for program, limit in ((everyone_sends_first, 0), (everyone_ssends_first, None)):
        with pytest.raises(DeadlockError) as error:
            dlsys.launch(program, 4, backend, eager_limit_bytes=limit, timeout_s=60)
        for rank in range(4):
            assert f"rank {rank} waits for rank {(rank + 1) % 4} to receive its synchronous send" in str(error.value)


@pytest.mark.parametrize("program", [odd_even, with_sendrecv, with_requests])
@pytest.mark.parametrize("backend", BACKENDS[1:])
def test_the_fixes_give_the_threads_values_and_trace(program, backend):
    want = dlsys.launch(program, 4, "threads", eager_limit_bytes=0)
    got = dlsys.launch(program, 4, backend, eager_limit_bytes=0)
    assert [int(v[0]) for v in got.values] == [3, 0, 1, 2]
    assert got.trace.spans == want.trace.spans and got.trace.messages == want.trace.messages
    assert got.clocks_s == want.clocks_s


LINK = LinkModel("test", 1e-3, 1e9, 0.0)


def receiver_after(comm, delay_s):
    if comm.rank == 0:
        comm.ssend(np.zeros(10), 1)
    else:
        comm.compute(seconds=delay_s)
        comm.recv(source=0)
    return comm.clock


@pytest.mark.parametrize("delay_s,sender_s", [(1.0, 1.0 + 1e-3), (0.0, 2e-3)])
def test_a_synchronous_send_completes_one_latency_after_the_match(delay_s, sender_s):
    """VirtualClock.matched: m = max(r, d + alpha), the sender's t = max(t, m + alpha): a late
    receive is matched when posted (r = 1 s), an early one when the envelope arrives (alpha)."""
    assert dlsys.launch(receiver_after, 2, "threads", link=LINK, args=(delay_s,)).values[0] == sender_s


def test_the_eager_limit_makes_only_larger_sends_synchronous():
    def program(comm):
        if comm.rank == 0:
            comm.send(np.zeros(100, np.float32), 1)  # 400 bytes
            return comm.clock
        comm.compute(seconds=1.0)
        comm.recv(source=0)

    assert dlsys.launch(program, 2, "threads", link=LINK, eager_limit_bytes=400).values[0] < 1.0
    assert dlsys.launch(program, 2, "threads", link=LINK, eager_limit_bytes=399).values[0] == 1.0 + 1e-3


def test_default_and_large_eager_limit_keep_the_buffered_trace():
    from dlsys.experiments import collective_program

    args = ("allreduce", "ring", 64, "float32", "sum", 0)
    base = dlsys.launch(collective_program, 4, "threads", args=args)
    big = dlsys.launch(collective_program, 4, "threads", args=args, eager_limit_bytes=1 << 20)
    assert big.trace.spans == base.trace.spans and big.trace.messages == base.trace.messages


@pytest.mark.parametrize(
    "kwargs", [{"eager_limit_bytes": -1}, {"eager_limit_bytes": 1.5}, {"eager_limit_bytes": 0, "sharing": True}]
)
def test_bad_eager_limit_is_refused_before_any_rank_starts(kwargs):
    with pytest.raises(ValueError, match="eager_limit_bytes"):
        dlsys.launch(everyone_sends_first, 2, "threads", **kwargs)
