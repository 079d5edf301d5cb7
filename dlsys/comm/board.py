"""The status board: what every rank is doing, readable by every rank and the launcher.

One row of float64 per rank (shared memory on the processes backend):

    STATE     RUNNING, BLOCKED (waiting in its mailbox) or DONE
    WAIT_SRC  whom a BLOCKED rank waits for (ANY_SOURCE for recv_any)
    WAIT_TAG  the tag it waits for (ANY_TAG: any program tag; RELEASE: a receiver must drop an array it was lent;
              SYNC_ACK: a receiver must match a synchronous send)
    POSTED    messages this rank has sent; PULLED: messages delivered to its mailbox
    EPOCH     how many waits this rank has entered (only grows: a reader that reads it twice sees
              whether the rank left its wait in between)
    EARLIEST, EARLIEST_SRC, SEEN  a rank in recv_any: when its earliest pending candidate
              arrives and from whom (inf, -1: none), computed when PULLED was SEEN
    FROM + s  messages delivered to this rank from rank s
    SENT + d  messages this rank sent to rank d   (SENT = FROM + size)

Two questions are answered from it alone, with no message exchanged:

* deadlock (``stalled``, then ``deadlock_report`` says who waits for whom): every live rank is BLOCKED and every posted message has
  been delivered (sum POSTED == sum PULLED), so nothing can ever wake anyone;
* silence (``silent``, recv_any's conservative rule): nothing more can come from src to
  me before I send again;
* the least pending message (``least_pending``, the rule for ranks that all wait at once):
  every unfinished rank waits in a receive and nothing is in flight, so the pending
  message that arrives first is safe to take.

``status_report`` says what every unfinished rank is doing (for a run past its deadline).

A rank bumps its counters before it marks itself BLOCKED, so readers read STATE first.
"""

from __future__ import annotations

import numpy as np

STATE, WAIT_SRC, WAIT_TAG, POSTED, PULLED, EPOCH, EARLIEST, EARLIEST_SRC, SEEN = range(9)
FROM = 9
ANY_SOURCE = -1  # mpi4py's MPI.ANY_SOURCE (MPICH's and Open MPI's value)
ANY_TAG = -1  # mpi4py's MPI.ANY_TAG: a WAIT_TAG of any program tag (>= 0)
RELEASE = -2
SYNC_ACK = -3  # the tag of a synchronous send's acknowledgement (program tags are >= 0)
RUNNING, BLOCKED, DONE = 0.0, 1.0, 2.0


def board_width(size: int) -> int:
    return FROM + 2 * size


def new_board(size: int, buffer=None) -> np.ndarray:
    """A zeroed board for ``size`` ranks, in ``buffer`` (shared memory) if given."""
    if buffer is None:
        return np.zeros((size, board_width(size)))
    return np.frombuffer(buffer, dtype=np.float64).reshape(size, board_width(size))


def board_row(board: np.ndarray, rank: int) -> memoryview:
    """Rank's row as a memoryview: the same memory, but reading or writing one number costs
    a third of numpy's item access (it happens several times per message)."""
    return memoryview(board[rank])


def silent(board: np.ndarray, src: int, me: int) -> bool:
    """Nothing more can come from src to me before I send again: everything it sent me has
    been delivered, and it finished, or it waits on a rank with everything that rank sent it
    delivered, which finished or waits in the same way, and so on, until the chain reaches
    me (or a rank already on it: those wait on each other for good).

    The chain is read twice and must read the same: its counters only grow, so a rank that
    was woken (or sent anything) between the reads shows; once both reads agree, every
    rank on it stays blocked until I send (the last one waits on me)."""
    if board[src, FROM + len(board) + me] != board[me, FROM + src]:
        return False
    first = _chain(board, src, me)
    return first is not None and _chain(board, src, me) == first


def _chain(board: np.ndarray, src: int, me: int) -> list | None:
    """The (state, waits for, posted, delivered from it) of each rank from src to the end of
    its chain of waits, or None if the chain reaches a rank that may still send."""
    sent, seen, rows = FROM + len(board), set(), []
    x = src
    while x != me and x not in seen:
        seen.add(x)
        row = board[x]
        state, y = row[STATE], int(row[WAIT_SRC])
        if state == DONE:
            rows.append((x, state))
            break
        if state != BLOCKED or y < 0 or row[WAIT_TAG] == RELEASE or row[FROM + y] != board[y, sent + x]:
            return None
        rows.append((x, state, y, row[POSTED], row[FROM + y]))
        x = y
    return rows


def least_pending(board: np.ndarray) -> tuple[float, int, int] | None:
    """(arrival, dst, src) of the pending message that arrives first, by (arrival, dst,
    src), if every unfinished rank waits in a receive of program messages and nothing is
    in flight; (inf, -1, -1) if then nothing is pending (a deadlock); None otherwise.

    Why the least, at a, is safe to take. Every rank waits, so the next receive to complete
    takes a message pending now that matches a wait now (a rank waiting for one source has
    none, or it would not wait): a candidate, arriving at >= a. By induction every later
    receive arrives at >= a too: a message pending now is taken after its rank's current
    receive, so at >= that arrival (the ingress only moves forward), and a message sent from
    now on leaves after its sender's receive, so it arrives at >= a + lookahead
    (``Topology.lookahead_s``: a link's latency and per-message overhead). So nothing can
    reach dst before a. With lookahead > 0 the choice also commutes with a choice another
    rank makes meanwhile by ``silent`` (whatever that sends arrives after a), so every
    backend makes the same choices whatever the real timing: values and traces are equal.

    The rows are read twice, in the order their ranks write them (EPOCH first and last);
    both reads must agree. Counters and EPOCH only grow, so every rank held its values over
    an interval that spans the end of the first read and the start of the second: at that
    moment the whole board was as read."""
    if not stalled(board):  # the cheap test first: it runs at every poll of a recv_any
        return None
    first = _stuck(board)
    if first is None or _stuck(board) != first:
        return None
    pending = [
        (row[5], row[0], int(row[6])) for row in first if row[1] == BLOCKED and row[2] == ANY_SOURCE and row[6] >= 0
    ]
    return min(pending) if pending else (float("inf"), ANY_SOURCE, ANY_SOURCE)


def _stuck(board: np.ndarray) -> list | None:
    """Each rank's row, if every unfinished rank waits in a receive of program messages
    (with its candidate up to date if it waits on ANY_SOURCE) and nothing is in flight:
    (rank, DONE, posted, pulled), or (rank, BLOCKED, waits for, tag, seen, earliest,
    earliest's source, posted, pulled, epoch), each read in that order, EPOCH first and last."""
    rows, posted, pulled = [], 0.0, 0.0
    for r in range(len(board)):
        row = board[r]
        epoch, state = row[EPOCH], row[STATE]
        if state == DONE:
            rows.append((r, state, row[POSTED], row[PULLED]))
            posted, pulled = posted + rows[-1][2], pulled + rows[-1][3]
            continue
        if state != BLOCKED:
            return None
        entry = (
            r,
            state,
            row[WAIT_SRC],
            row[WAIT_TAG],
            row[SEEN],
            row[EARLIEST],
            row[EARLIEST_SRC],
            row[POSTED],
            row[PULLED],
            epoch,
        )
        if row[EPOCH] != epoch or entry[3] < ANY_TAG or (entry[2] == ANY_SOURCE and entry[4] != entry[8]):
            return None  # it left its wait, waits for a lent array or a match, or is choosing anew
        rows.append(entry)
        posted, pulled = posted + entry[7], pulled + entry[8]
    return rows if posted == pulled else None


def stalled(board: np.ndarray) -> bool:
    """Every live rank waits and no message is in flight: a deadlock, if it lasts."""
    states = board[:, STATE]
    if (states == RUNNING).any() or (states == DONE).all():
        return False
    return board[:, POSTED].sum() == board[:, PULLED].sum()


def deadlock_report(board: np.ndarray) -> str:
    """Who waits for whom (for a stalled board)."""
    states = board[:, STATE]
    waits = [_waiting(r, board[r]) for r in range(len(board)) if states[r] == BLOCKED]
    done = [str(r) for r in range(len(board)) if states[r] == DONE]
    return "; ".join(waits) + (f"; finished: ranks {', '.join(done)}" if done else "")


MAX_REPORTED_RANKS = 16  # a 512-rank run's report names the first ones and counts the rest


def status_report(board: np.ndarray) -> str:
    """What each unfinished rank is doing: 'rank 0 computing; rank 1 waits for rank 0 (tag 3)'."""
    states = board[:, STATE]
    busy = [r for r in range(len(board)) if states[r] != DONE]
    parts = [
        f"rank {r} computing" if states[r] == RUNNING else _waiting(r, board[r]) for r in busy[:MAX_REPORTED_RANKS]
    ]
    if len(busy) > MAX_REPORTED_RANKS:
        parts.append(f"and {len(busy) - MAX_REPORTED_RANKS} more ranks")
    done = len(board) - len(busy)
    return "; ".join(parts) + (f"; {done} of {len(board)} ranks finished" if done else "")


def _waiting(rank: int, row: np.ndarray) -> str:
    return waits_text(rank, int(row[WAIT_SRC]), int(row[WAIT_TAG]))


def waits_text(rank: int, src: int, tag: int) -> str:
    """'rank 1 waits for rank 0 (tag 3)', or what a RELEASE or SYNC_ACK wait means."""
    if tag == RELEASE:
        return (
            f"rank {rank} waits for rank {src} to drop the array rank {rank} lent it "
            f"(isend of comm.alloc memory completes only then)"
        )
    if tag == SYNC_ACK:
        return f"rank {rank} waits for rank {src} to receive its synchronous send"
    return (
        f"rank {rank} waits for "
        + (f"rank {src}" if src >= 0 else "any rank")
        + (" (any tag)" if tag == ANY_TAG else f" (tag {tag})")
    )
