"""recv_any's silence rule across processes: no moment at which a rank that a delivery is
waking looks silent (the ps-asp golden run once took a later push first under load); and
the rule for a world where every rank waits (board.least_pending) reads only what held."""

import numpy as np
import pytest

import dlsys
from dlsys.comm.board import (
    ANY_SOURCE,
    ANY_TAG,
    BLOCKED,
    DONE,
    EARLIEST,
    EARLIEST_SRC,
    FROM,
    POSTED,
    PULLED,
    RELEASE,
    RUNNING,
    SEEN,
    STATE,
    SYNC_ACK,
    WAIT_SRC,
    WAIT_TAG,
    least_pending,
    new_board,
    silent,
)
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


def waiting_world():
    """Rank 0 and rank 1 wait on ANY_SOURCE, each with a message pending from rank 2, which
    has finished; rank 0's arrives at 2 us, rank 1's at 1 us."""
    board = new_board(3)
    board[2, STATE], board[2, POSTED] = DONE, 2
    for rank, arrive_s in ((0, 2e-6), (1, 1e-6)):
        row = board[rank]
        row[STATE], row[WAIT_SRC], row[WAIT_TAG] = BLOCKED, ANY_SOURCE, ANY_TAG
        row[PULLED], row[FROM + 2] = 1, 1
        row[EARLIEST], row[EARLIEST_SRC], row[SEEN] = arrive_s, 2, 1
    return board


def test_the_least_pending_message_goes_first_ties_to_the_lowest_destination():
    board = waiting_world()
    assert least_pending(board) == (1e-6, 1, 2)
    board[0, EARLIEST] = 1e-6
    assert least_pending(board) == (1e-6, 0, 2)
    board[0, EARLIEST_SRC] = board[1, EARLIEST_SRC] = ANY_SOURCE  # nothing pending: a deadlock
    board[0, EARLIEST] = board[1, EARLIEST] = np.inf
    assert least_pending(board) == (np.inf, ANY_SOURCE, ANY_SOURCE)


@pytest.mark.parametrize("change", ["running", "in flight", "stale candidate", "lent array", "synchronous send"])
def test_the_least_pending_rule_holds_back_unless_every_rank_waits_with_nothing_in_flight(change):
    board = waiting_world()
    if change == "running":
        board[1, STATE] = RUNNING
    elif change == "in flight":
        board[2, POSTED] += 1
    elif change == "stale candidate":  # a message came after rank 1 chose its candidate
        board[1, PULLED] += 1
        board[2, POSTED] += 1
    else:
        board[1, WAIT_SRC], board[1, WAIT_TAG] = 2, RELEASE if change == "lent array" else SYNC_ACK
    assert least_pending(board) is None


def test_a_delivery_to_a_rank_in_recv_any_never_leaves_its_old_candidate_standing():
    """Rank 1 chose its candidate (1 us); rank 2 sends it another message. At every store of
    the delivery, the old candidate must not be taken for the least pending message."""
    board = waiting_world()
    board[2, POSTED] += 1  # counted before it was posted, as Communicator._post does
    box = Mailbox(1, board)
    box._pulled, box._from[2] = 1, 1
    seen = []
    box.row = Watched(box.row, lambda: seen.append(least_pending(board)))
    box.deliver(Header(2, 0, 0.0, 8, "", np.dtype("f8").str, (1,)), None)
    assert seen and not any(seen), seen


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
