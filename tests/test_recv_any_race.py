"""recv_any's silence rule across processes: no moment at which a rank that a delivery is
waking looks silent (the ps-asp golden run once took a later push first under load)."""

import numpy as np
import pytest

import dlsys
from dlsys.comm.board import BLOCKED, FROM, STATE, WAIT_SRC, WAIT_TAG, new_board, silent
from dlsys.comm.mailbox import Header, Mailbox


class Watched:
    """A board row that asks ``check`` after every store (another process may read the
    board between any two stores of a delivery)."""

    def __init__(self, row, check):
        self.row, self.check = row, check

    def __getitem__(self, i):
        return self.row[i]

    def __setitem__(self, i, value):
        self.row[i] = value
        self.check()

    def __len__(self):
        return len(self.row)


def test_a_rank_being_woken_never_looks_silent():
    """Rank 0 is in recv_any; rank 1 waits for rank 2 (tag 5); rank 2 sent it that message
    and now waits for rank 0. While rank 1's reader thread delivers it, rank 1 must not look
    silent to rank 0 at any store: it is about to run, and may send rank 0 an earlier message."""
    size = 3
    board = new_board(size)
    sent = FROM + size
    board[2, sent + 1] = 1  # rank 2 sent rank 1 one message (counted before it was posted)
    board[2, STATE], board[2, WAIT_SRC], board[2, WAIT_TAG] = BLOCKED, 0, 7
    box = Mailbox(1, board)
    box.row[WAIT_SRC], box.row[WAIT_TAG], box.row[STATE] = 2, 5, BLOCKED
    seen = []
    box.row = Watched(box.row, lambda: seen.append(silent(board, 1, 0)))
    assert not silent(board, 1, 0)  # its message from rank 2 is in flight
    box.deliver(Header(2, 5, 0.0, 8, "", np.dtype("f8").str, (1,)), None)
    assert seen and not any(seen), seen
    assert board[1, STATE] != BLOCKED


def asp_pushes(comm, rounds):
    """A server takes pushes in virtual-arrival order (recv_any); workers push at close
    virtual times and wait for the server's reply, as the ASP parameter server does."""
    if comm.rank == 0:
        order = []
        for _ in range(rounds * (comm.size - 1)):
            src, x = comm.recv_any(list(range(1, comm.size)), tag=1)
            order.append(src)
            comm.send(x, src, tag=2)
        return order
    for step in range(rounds):
        comm.compute(seconds=1e-3 * (1 + 0.013 * comm.rank + 0.0007 * step))
        comm.send(np.full(4, comm.rank, np.float64), 0, tag=1)
        comm.recv(source=0, tag=2)
    return None


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_recv_any_order_matches_threads_under_load():
    """The order the server takes pushes in is the same on processes as on threads, run
    after run (the race showed once in a dozen loaded runs: 20 runs of 200 choices)."""
    expected = dlsys.launch(asp_pushes, 4, "threads", args=(50,)).values[0]
    for _ in range(20):
        assert dlsys.launch(asp_pushes, 4, "processes", args=(50,)).values[0] == expected
