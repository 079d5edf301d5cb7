"""The Communicator's per-message fast path, beside its reading path (minitorch's
``fast_ops`` beside ``tensor_ops``).

``shift(comm, right, left, TAG)`` returns ``step``, and ``step(buf, phase, s, block)`` is
``comm.sendrecv(buf, right, TAG, source=left, recvtag=TAG, phase=phase, step=s, block=block)``: the same checks,
clock rules, board counters and trace. A 1024-rank ring makes 2.1 M of them, and every
Python call costs about 0.1 us, so here

* dest, source and tag are checked once, not per message;
* ``as_payload``, ``payload_nbytes``, ``message_label``, ``VirtualClock.send``,
  ``VirtualClock.receive`` and the Header are inlined for the usual payloads (an ndarray, a
  LogicalArray), with the same float operations in the same order, so the times are
  bit-identical (sendrecv makes ten Python calls, a step one);
* the two links' costs (o_s(n), n / B, o_r(n)) are looked up once per message size: a ring
  sends one or two sizes over and over.

tests/comm/test_comm_clock.py holds it to the clock's rules, tests/comm/test_comm.py to
``sendrecv``'s trace on a flat network and a two-level tree, tests/collectives/test_collectives.py the
lean ring (collectives/ring_fast.py) to the reading ring's.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..machine.net import LinkModel
from .board import POSTED
from .communicator import Communicator
from .mailbox import Header
from .payload import MAX_LABEL, as_payload
from .trace import Message, Span

_new_tuple = tuple.__new__  # builds a NamedTuple from a tuple in C (Header(...) is a Python call)
Costs = dict[int, tuple[float, float, float]]  # n -> (o_s(n), n / B, o_r(n)) of one link


def _link_costs(link: LinkModel, costs: Costs, nbytes: int) -> tuple[float, float, float]:
    cost = costs[nbytes] = (link.send_overhead_s(nbytes), link.wire_s(nbytes), link.recv_overhead_s(nbytes))
    return cost


def shift(comm: Communicator, dest: int, source: int, tag: int = 0, handover: bool = False) -> Callable:
    """``sendrecv`` to and from fixed ranks, step after step (MPI_Cart_shift's pattern: a
    ring's right and left neighbours), for the collectives' fast paths.

    ``handover``: the caller never writes an array after sending it, nor one it received
    (``Transport.hand_over``: ranks that share memory pass it without a copy).
    """
    dest, source, tag = comm._check_peer(dest, "dest"), comm._check_peer(source, "source"), comm._check_tag(tag)
    if comm.eager_limit_bytes is not None:  # sends may be synchronous: the reading path's sendrecv
        return lambda buf, phase="", step=-1, block=-1, label="": comm.sendrecv(
            buf, dest, tag, source=source, recvtag=tag, label=label, phase=phase, step=step, block=block
        )
    return _lean(comm, dest, source, tag, handover)


def _lean(comm: Communicator, dest: int, source: int, tag: int, handover: bool) -> Callable:
    """``shift``'s step for checked peers and tag, every send buffered."""
    rank, clock, books, transport, deadline = comm.rank, comm._clock, comm._books, comm._transport, comm._deadline
    record, row, sent_column, ops = books.record, books.row, books.sent_from + dest, books.ops
    post, take = transport.hand_over if handover else transport.post, transport.take
    link_out, link_in = clock.link_to(dest), clock.link_to(source)
    costs_out: Costs = {}
    costs_in = costs_out if link_in is link_out else {}
    latency_s, spans, messages = link_in.latency_s, clock.spans, books.messages
    log_labels = ops is not None and ops.labels
    labelled = record or log_labels  # the trace, or the replay that makes it, reads labels
    if ops is not None:  # OpLog: this pair's receive is one table row, each size's unlabelled send another
        log_code, recv_code = ops.codes.append, ops.intern(("recv", source, tag, None))
        send_codes: dict[int, int] = {}
    ndarray = np.ndarray

    def sendrecv(buf, phase: str = "", step: int = -1, block: int = -1, label: str = "") -> np.ndarray:
        arr = buf
        if not (type(arr) is ndarray or hasattr(type(arr), "logical_nbytes")) or arr.dtype.kind not in "biufc":
            arr = as_payload(buf)
        n = arr.nbytes * getattr(arr, "scale", 1)  # payload_nbytes
        meta = None
        if phase and labelled:  # only a recording receiver (or a replay) reads them
            meta = (phase, step, block)
            if not label:
                label = f"{phase} step {step}" + (f" block {block}" if block >= 0 else "")
        if label != "" and (type(label) is not str or len(label) > MAX_LABEL):
            label = str(label)[:MAX_LABEL]
        send_s, wire_s, _ = costs_out.get(n) or _link_costs(link_out, costs_out, n)  # VirtualClock.send
        start = clock.t
        clock.t = t = start + send_s
        if record and t > start:
            spans.append(Span(rank, start, t, "send", label))
        egress = clock.egress_free
        depart = t if t > egress else egress
        clock.egress_free = depart + wire_s
        comm.bytes_sent += n
        row[POSTED] += 1  # Bookkeeping.count_sent
        row[sent_column] += 1
        post(
            dest, _new_tuple(Header, (rank, tag, depart, n, label, arr.dtype, arr.shape, None, meta, False)), arr, False
        )
        if ops is not None:
            if log_labels:
                log_code(ops.intern(("send", dest, tag, n, label, meta)))
            else:
                code = send_codes.get(n)
                if code is None:
                    code = send_codes[n] = ops.intern(("send", dest, tag, n, "", None))
                log_code(code)

        header, arr = take(source, tag, deadline)
        depart, n = header[2], header[3]
        _, wire_s, recv_s = costs_in.get(n) or _link_costs(link_in, costs_in, n)  # VirtualClock.receive
        arrive = depart + latency_s + wire_s
        ingress = clock.ingress_free + wire_s
        if ingress > arrive:
            arrive = ingress
        clock.ingress_free = arrive
        t = clock.t
        if arrive > t:  # VirtualClock.advance's float arithmetic, exactly: t + (arrive - t)
            wait_end = t + (arrive - t)
            if record and wait_end > t:
                spans.append(Span(rank, t, wait_end, "wait", header[4]))
            t = wait_end
        clock.t = end = t + recv_s
        if record:
            if end > t:
                spans.append(Span(rank, t, end, "recv", header[4]))
            messages.append(Message(source, rank, n, depart, arrive, tag, header[4], *(header[8] or ("", -1, -1))))
        if ops is not None:
            log_code(recv_code)
        return arr

    return sendrecv
