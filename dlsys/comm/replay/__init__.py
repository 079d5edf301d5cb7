"""Replay a run with links that messages share (issue 24): the run decides, the replay times.

A run charges every message as if it had its pair's link to itself (clock.py). Messages
that cross one link at the same time share it (dlsys.machine.flows, max-min fair sharing),
and *when* a message finishes then depends on every other message in the network, which
no rank knows while it runs. So a run with ``sharing`` logs each rank's operations in
program order (``Communicator.ops``, a compact ``oplog.OpLog`` that reads as a
sequence of these tuples), and this module replays them, a deterministic discrete-event
simulation, single-threaded, after the ranks have finished:

    ("compute", seconds, flops, label, nbytes)   VirtualClock.compute
    ("reduce", nbytes, label)                    VirtualClock.reduction
    ("send", dst, tag, nbytes, label, meta)      t += o_s(n); the message is a flow ready at t
    ("recv", src, tag, label)                    the next message from src with this tag (MPI's
                                                 non-overtaking order): wait until its flow has
                                                 arrived, t = max(t, arrive) + o_r(n)
    ("signal", dst, tag, label)                  a same-node hand-off at t (no link)
    ("wait_signal", src, tag, label)             t = max(t, the signal's t)
    ("wait", time_s, label)                      t = max(t, time_s)
    ("wait_sent", k, time_s, label)              t = max(t, when this rank's posts 0..k have left
                                                 its egress): time_s, the run's, without sharing;
                                                 with sharing, on the replay's flows (below)
    ("wait_left", k, time_s, label)              the same for post k alone (and so its
                                                 connection's earlier posts): one socket's pacing

With ``sharing=False`` a send and a receive are clock.py's own rules, the same
``VirtualClock`` methods on the same numbers, so the replay gives the run's trace bit for
bit (tests/comm/test_replay.py: every collective algorithm, every golden trace). That is the
oracle that the replay replays the run. With ``sharing=True`` the messages are flows on
``network.fabric(size)``: o_s and o_r stay DESIGN.md's, a flow pays its route's latency
and then its max-min fair share, re-solved whenever a flow starts or ends. A rank's
messages to one peer are one connection, first in first out (FlowNetwork's
``connections``: one TCP stream per peer, as ps-lite's one ZMQ socket per node, and as
clock.py's egress order): they do not share with each other, they queue.

A credit wait (``Communicator.wait_sent``: a scheduler posts its next item once its
earlier ones have left the egress) is resolved on the replay's own flows: a post has left
when its flow's last byte is on the wire, the flow's completion minus its route's latency.
In the flow model a flow pays its latency first and then moves its bytes, so a lone
flow's last byte leaves at ``ready + L + n / B - L = ready + n / B``: clock.py's
``egress_free``, and a sender that posts the next item then has it on the wire right
after the last one, as the run's egress does (the completion would add a gap of L per
item, 25 us on 10 GbE, a fifth of a P3 slice). Its flow is known to be done only at
its completion, so such a sender runs up to L behind the network; its next flow to
another machine pays a latency L again and starts no earlier than now, and a loopback
message (no link, no latency) starts now (FlowNetwork.inject).

What the replay keeps from the run (documented departures): every other choice that
depended on time. ``recv_any`` receives from the source the run chose (the earliest
arrival under the run's times); a scheduler's ``wait_until(time_s)`` keeps that time, and
which item a credit wait is followed by is the run's choice. The program's messages, sizes
and order are the run's.

Event order: ranks run until they block on a message; then the flow network advances to
its next event (a flow starts or finishes), and the ranks whose flows finished run on.
A running rank's clock is never behind the network's (it woke at an event, or has not
blocked yet; a credit wait's sender by at most its flow's latency, above), so flows only
start in the future; the order in which ranks run
between events changes nothing (max-min ties are exact, dlsys/machine/flows.py).

The room, one file each: ``oplog.py`` the compact log, ``plain.py`` the replay (the reading
path), ``fast.py`` its fast path (``replay(..., fast=True)`` without a trace: decoded once
per distinct operation, clocks as floats, held to the same clocks bit for bit by
tests/comm/test_replay.py), ``load.py`` the bytes per link over time (``link_load``).
"""

from .load import link_load
from .oplog import OpLog
from .plain import Replayed, replay

__all__ = ["OpLog", "Replayed", "link_load", "replay"]
