"""The point-to-point calls take mpi4py's signatures (issue 28): the same names, order and
defaults as mpi4py's lowercase Comm methods, so a student's mpi4py program means here what
it means there; ANY_SOURCE and ANY_TAG resolve deterministically (Communicator's docstring)."""

import inspect

import numpy as np
import pytest

import dlsys
from dlsys.comm import ANY_SOURCE, ANY_TAG, Communicator, Group, Status, fast

# mpi4py's src/mpi4py/MPI/Comm.pyx, "Python Communication": (name, default) in order
MPI4PY = {
    "send": [("obj", None), ("dest", None), ("tag", 0)],
    "ssend": [("obj", None), ("dest", None), ("tag", 0)],
    "isend": [("obj", None), ("dest", None), ("tag", 0)],
    "recv": [("buf", None), ("source", ANY_SOURCE), ("tag", ANY_TAG), ("status", None)],
    "irecv": [("buf", None), ("source", ANY_SOURCE), ("tag", ANY_TAG)],
    "sendrecv": [("sendobj", None), ("dest", None), ("sendtag", 0), ("recvbuf", None), ("source", ANY_SOURCE),
                 ("recvtag", ANY_TAG), ("status", None)],
}


@pytest.mark.parametrize("name", list(MPI4PY))
def test_the_positional_parameters_are_mpi4pys_and_ours_are_keyword_only(name):
    params = list(inspect.signature(getattr(Communicator, name)).parameters.values())[1:]
    positional = [p for p in params if p.kind is p.POSITIONAL_OR_KEYWORD]
    assert [(p.name, None if p.default is p.empty else p.default) for p in positional] == MPI4PY[name]
    assert all(p.kind is p.KEYWORD_ONLY for p in params[len(positional):])
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


def test_every_rank_on_any_source_at_once_is_a_reported_deadlock_and_naming_the_source_ends_it():
    """ANY_SOURCE decides conservatively (recv_any): once every other rank has a message
    here, has finished or waits on this one. Three ranks that all wait on ANY_SOURCE wait
    for each other: reported, not hung; mpi4py would take whatever came first in real time."""
    def program(comm, named):
        right, left = (comm.rank + 1) % comm.size, (comm.rank - 1) % comm.size
        got = comm.sendrecv(np.full(2, comm.rank), right, source=left if named else ANY_SOURCE)
        return int(got[0])

    with pytest.raises(dlsys.DeadlockError, match=r"rank 0 waits for any rank \(any tag\)"):
        dlsys.launch(program, 3, "threads", args=(False,))
    assert dlsys.launch(program, 3, "threads", args=(True,)).values == [2, 0, 1]


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
