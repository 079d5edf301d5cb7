"""Communication: the Communicator, virtual clocks, backends and the trace.

Files, one concern each: ``clock.py`` the virtual-time rules, ``communicator.py`` the rank
API (the reading path), ``fast.py`` its per-message fast path (``shift``), ``mailbox.py``
and ``board.py`` waiting, the status board and deadlock detection, ``supervise.py`` run supervision, ``launch.py`` the entry point, ``backends/`` the
transports (interface and registry in ``backends/__init__.py`` and ``backends/base.py``),
``trace.py`` the trace, ``logical.py`` logical sizes, ``group.py`` a group of ranks as a world and DP x TP grids of groups.
"""

from .backends import BACKENDS, LEND_MIN_NBYTES, MAX_PROCESS_RANKS, MAX_THREAD_RANKS
from .board import ANY_SOURCE, ANY_TAG
from .communicator import SIGNAL, Communicator, Request, Status, as_payload, payload_nbytes
from .group import Grid, Group
from .launch import LaunchResult, launch
from .supervise import DeadlockError, RankFailed
from .trace import Message, Span, Trace

__all__ = [
    "ANY_SOURCE",
    "ANY_TAG",
    "BACKENDS",
    "LEND_MIN_NBYTES",
    "MAX_PROCESS_RANKS",
    "MAX_THREAD_RANKS",
    "Communicator",
    "DeadlockError",
    "Grid",
    "Group",
    "LaunchResult",
    "Message",
    "RankFailed",
    "Request",
    "SIGNAL",
    "Span",
    "Status",
    "Trace",
    "as_payload",
    "launch",
    "payload_nbytes",
]
