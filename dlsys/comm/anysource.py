"""``recv_any``'s rule: which source a receive from any of several takes its next message
from, deterministic in virtual time.

Conservative, as in parallel discrete-event simulation: it decides only once every source
has a message here, has finished, or is blocked on this rank (``Transport.silent``: the
status board's ``board.silent`` where ranks share memory); then the earliest arrival wins,
ties to the lowest rank. Otherwise this rank publishes its earliest pending candidate on
the board, and takes it once it is the least pending message of a world where every rank
waits (``Transport.least_pending``: a token ring of ``comm.recv()``).
"""

from __future__ import annotations

from .board import ANY_SOURCE, EARLIEST, EARLIEST_SRC, PULLED, SEEN

NOTHING_PENDING = (float("inf"), ANY_SOURCE)  # a recv_any's published candidate when it has none


def earliest_source(comm, sources: list[int], tag: int) -> tuple[int, float]:
    """Which of ``sources`` recv_any takes its next message with ``tag`` from, and when
    that message arrives at the rank of ``comm`` (a Communicator; waits until that is decided)."""
    board, clock, transport, row, rank = comm._board, comm._clock, comm._transport, comm._books.row, comm.rank
    chosen: dict[int, float] = {}
    decides = comm.network.lookahead_s > 0  # else a reply could arrive with the least: a tie

    def earliest(head):
        heads = {s: head(s, tag) for s in sources}
        ready = [(clock.arrival(h.depart_s, h.nbytes, s), s) for s, h in heads.items() if h is not None]
        first = min(ready) if ready else NOTHING_PENDING
        if all(h is not None or transport.silent(board, s, rank) for s, h in heads.items()):
            if ready:
                chosen[first[1]] = first[0]
                return first[1]
            if all(transport.finished(board, s) for s in sources):
                raise RuntimeError(f"recv_any: every source in {sources} has finished; nothing can arrive")
            return None
        # under the mailbox's lock: nothing is delivered while this candidate is published
        # (none without a lookahead: least_pending then finds a deadlock, as it is here)
        row[EARLIEST], row[EARLIEST_SRC], row[SEEN] = (*(first if decides else NOTHING_PENDING), row[PULLED])
        least = transport.least_pending(board)
        if least is not None and least[1:] == (rank, first[1]):
            chosen[first[1]] = first[0]
            return first[1]
        return None

    src = transport.wait_any(tag, earliest, comm._deadline)
    return src, chosen[src]
