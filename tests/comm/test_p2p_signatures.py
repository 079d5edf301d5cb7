"""The point-to-point calls take mpi4py's signatures (issue 28): the same names, order and
defaults as mpi4py's lowercase Comm methods, so a student's mpi4py program means here what
it means there; ANY_SOURCE and ANY_TAG resolve deterministically (Communicator's docstring)."""

import inspect

import numpy as np
import pytest

import dlsys
from dlsys.comm import ANY_SOURCE, ANY_TAG, BACKENDS, Communicator, Group, Status, fast
from dlsys.machine.net import LinkModel
from dlsys.machine.topology import get_network

# mpi4py's src/mpi4py/MPI/Comm.pyx, "Python Communication": (name, default) in order
MPI4PY = {
    "send": [("obj", None), ("dest", None), ("tag", 0)],
    "ssend": [("obj", None), ("dest", None), ("tag", 0)],
    "isend": [("obj", None), ("dest", None), ("tag", 0)],
    "recv": [("buf", None), ("source", ANY_SOURCE), ("tag", ANY_TAG), ("status", None)],
    "irecv": [("buf", None), ("source", ANY_SOURCE), ("tag", ANY_TAG)],
    "sendrecv": [
        ("sendobj", None),
        ("dest", None),
        ("sendtag", 0),
        ("recvbuf", None),
        ("source", ANY_SOURCE),
        ("recvtag", ANY_TAG),
        ("status", None),
    ],
}


@pytest.mark.parametrize("name", list(MPI4PY))
def test_the_positional_parameters_are_mpi4pys_and_ours_are_keyword_only(name):
    params = list(inspect.signature(getattr(Communicator, name)).parameters.values())[1:]
    positional = [p for p in params if p.kind is p.POSITIONAL_OR_KEYWORD]
    assert [(p.name, None if p.default is p.empty else p.default) for p in positional] == MPI4PY[name]
    assert all(p.kind is p.KEYWORD_ONLY for p in params[len(positional) :])
    assert ANY_SOURCE == -1 and ANY_TAG == -1  # mpi4py's values (MPICH's and Open MPI's)


def _ring(form: str):
    def program(comm):
        right, left = (comm.rank + 1) % comm.size, (comm.rank - 1) % comm.size
        x = np.full(3, float(comm.rank))
        if form == "keywords":
            return comm.sendrecv(x, dest=right, source=left)
        if form == "positional":
            return comm.sendrecv(x, right, 0, None, left)
        return fast.shift(comm, right, left, 0)(x)

    return program


@pytest.mark.parametrize("backend", ["threads", "processes"])
def test_positional_keyword_and_fast_sendrecv_are_one_exchange(backend):
    runs = [dlsys.launch(_ring(form), 4, backend) for form in ("keywords", "positional", "fast")]
    for run in runs:
        assert [float(v[0]) for v in run.values] == [3.0, 0.0, 1.0, 2.0]
    assert runs[0].trace.messages == runs[1].trace.messages == runs[2].trace.messages
    assert runs[0].trace.spans == runs[1].trace.spans == runs[2].trace.spans


def test_sendrecvs_third_positional_is_the_send_tag_as_in_mpi4py():
    """comm.sendrecv(x, right, left): mpi4py reads left as sendtag and receives from anyone."""

    def program(comm):
        right, left = (comm.rank + 1) % comm.size, (comm.rank - 1) % comm.size
        status = Status()
        got = comm.sendrecv(np.full(2, comm.rank), right, left, status=status)
        return int(got[0]), status.Get_source(), status.Get_tag()

    run = dlsys.launch(program, 2, "threads")
    assert run.values == [(1, 1, 0), (0, 0, 1)]  # rank r got rank 1-r's, sent with tag r
    assert sorted((m.src, m.tag) for m in run.trace.messages) == [(0, 1), (1, 0)]


MPI = BACKENDS["mpi"].unavailable()
EVERY_BACKEND = [
    "threads",
    "processes",
    pytest.param("mpi", marks=pytest.mark.skipif(MPI is not None, reason=str(MPI))),
]


def token_ring(comm, laps: int = 2):
    """The token ring a student writes with mpi4py's defaults: every rank waits on
    ``comm.recv()`` (ANY_SOURCE) at once, and only rank 0's first token is on its way."""
    if comm.rank == 0:
        comm.send(np.array([0.0]), dest=1)
    got, status = [], Status()
    for lap in range(laps):
        token = comm.recv(status=status)
        got.append((float(token[0]), status.Get_source()))
        if comm.rank != 0 or lap < laps - 1:
            comm.send(token + 1, dest=(comm.rank + 1) % comm.size)
    return got


def test_a_token_ring_of_recv_runs_and_takes_what_naming_the_source_takes():
    """Every rank waits on ANY_SOURCE, so no rank alone can tell that nothing earlier will
    come; the least pending message in virtual time is safe (board.least_pending)."""

    def named(comm, laps=2):
        got = []
        if comm.rank == 0:
            comm.send(np.array([0.0]), dest=1)
        left = (comm.rank - 1) % comm.size
        for lap in range(laps):
            token = comm.recv(source=left)
            got.append((float(token[0]), left))
            if comm.rank != 0 or lap < laps - 1:
                comm.send(token + 1, dest=(comm.rank + 1) % comm.size)
        return got

    run, pinned = dlsys.launch(token_ring, 4, "threads"), dlsys.launch(named, 4, "threads")
    assert run.values == [[(3.0, 3), (7.0, 3)], [(0.0, 0), (4.0, 0)], [(1.0, 1), (5.0, 1)], [(2.0, 2), (6.0, 2)]]
    assert run.values == pinned.values
    assert run.trace.messages == pinned.trace.messages and run.trace.spans == pinned.trace.spans


@pytest.mark.parametrize("backend", EVERY_BACKEND)
def test_the_token_ring_of_recv_gives_the_same_values_and_trace_on_every_backend(backend):
    reference = dlsys.launch(token_ring, 5, "threads", args=(3,), link="rdma-edr")
    run = dlsys.launch(token_ring, 5, backend, args=(3,), link="rdma-edr", timeout_s=60)
    assert run.values == reference.values
    assert run.trace.messages == reference.trace.messages and run.trace.spans == reference.trace.spans


def test_ranks_that_all_send_then_take_any_source_take_their_neighbours():
    """sendrecv with ANY_SOURCE in a ring: every rank has one message waiting and waits on
    the others; the least (ties: the lowest destination) goes first, then the next."""

    def program(comm, named):
        right, left = (comm.rank + 1) % comm.size, (comm.rank - 1) % comm.size
        got = comm.sendrecv(np.full(2, comm.rank), right, source=left if named else ANY_SOURCE)
        return int(got[0])

    anyone, named = (dlsys.launch(program, 3, "threads", args=(flag,)) for flag in (False, True))
    assert anyone.values == named.values == [2, 0, 1]
    assert anyone.trace.messages == named.trace.messages and anyone.trace.spans == named.trace.spans


@pytest.mark.parametrize("backend", EVERY_BACKEND)
def test_ranks_that_all_receive_first_are_a_reported_deadlock(backend):
    """Nothing is pending anywhere: no rule can choose, and the deadlock says who waits."""

    def program(comm):
        token = comm.recv()
        comm.send(token, dest=(comm.rank + 1) % comm.size)

    with pytest.raises(
        dlsys.DeadlockError,
        match=r"rank 0 waits for any rank \(any tag\); "
        r"rank 1 waits for any rank \(any tag\)",
    ):
        dlsys.launch(program, 2, backend, timeout_s=60)


def test_without_a_lookahead_the_ring_of_recv_is_a_reported_deadlock():
    """On links with no latency and no overhead a rank's reply can arrive at the very time of
    the least pending message, so taking it first would depend on who runs first: the rule
    stays off there (Topology.lookahead_s), and naming the source runs."""
    ideal = LinkModel("ideal", latency_s=0.0, bandwidth_Bps=1e9)
    assert get_network(link=ideal).lookahead_s == 0
    with pytest.raises(dlsys.DeadlockError, match=r"rank 1 waits for any rank"):
        dlsys.launch(token_ring, 3, "threads", link=ideal)
    assert dlsys.launch(token_ring, 3, "threads", link=LinkModel("tiny", 1e-9, 1e9)).values[0] == [(2.0, 2), (5.0, 2)]


@pytest.mark.parametrize("backend", ["threads", "processes"])
def test_any_tag_takes_the_sources_oldest_message(backend):
    """MPI's non-overtaking rule: with ANY_TAG, a source's messages come in the order it sent them."""

    def program(comm):
        if comm.rank == 0:
            for tag in (5, 3, 5, 8):
                comm.send(np.array([tag]), dest=1, tag=tag)
            return None
        comm.compute(seconds=1.0)  # everything has arrived: the choice is the mailbox's, not the race's
        first = int(comm.recv(source=0, tag=3)[0])  # a named tag still skips the others
        status, rest = Status(), []
        for _ in range(3):
            rest.append((int(comm.recv(source=0, status=status)[0]), status.tag))
        return first, rest

    assert dlsys.launch(program, 2, backend).values[1] == (3, [(5, 5), (5, 5), (8, 8)])


@pytest.mark.parametrize("backend", ["threads", "processes"])
def test_any_source_is_the_earliest_in_virtual_time(backend):
    def program(comm):
        if comm.rank == 0:
            requests = [comm.irecv() for _ in range(comm.size - 1)]
            status, order = Status(), []
            for request in requests:
                request.wait(status)
                order.append(status.Get_source())
            return order
        comm.compute(seconds=[0.0, 3e-3, 1e-3, 2e-3][comm.rank])
        comm.send(np.zeros(1), 0, tag=comm.rank)

    assert dlsys.launch(program, 4, backend).values[0] == [2, 3, 1]


def test_a_groups_any_source_is_among_its_members_with_group_ranks():
    def program(comm):
        if comm.rank == 1:  # not a member: its earlier message must not be taken
            comm.send(np.array([99]), dest=0, tag=7)
            return None
        group = Group(comm, [0, 2, 3])
        if comm.rank == 0:
            status = Status()
            got = [int(group.recv(status=status)[0]) for _ in range(2)]
            return got, status.source
        comm.compute(seconds=1e-3 * comm.rank)
        group.send(np.array([comm.rank]), dest=0, tag=7)
        return None

    run = dlsys.launch(program, 4, "threads", timeout_s=20)
    assert run.values[0] == ([2, 3], 2)  # world rank 3 is group rank 2
