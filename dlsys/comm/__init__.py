"""Communication: the Communicator, virtual clocks, backends and the trace.

Files, one concern each: ``clock.py`` the virtual-time rules, ``communicator.py`` the rank
API (the reading path), with ``bookkeeping.py`` (the board's counters, the op log, the
trace's messages), ``request.py``, ``anysource.py`` (ANY_SOURCE's rule) and
``node_threads.py`` (signals and credit waits) beside it; ``payload.py`` what a message
carries; ``fast.py`` the per-message fast path (``shift``); ``mailbox.py`` and ``board.py``
waiting, the status board and deadlock detection; ``supervise.py`` run supervision;
``launch.py`` the entry point; ``backends/`` the transports (interface and registry in
``backends/__init__.py`` and ``backends/transport.py``); ``replay/`` the replay with links
that messages share and the op log it reads; ``trace.py`` the trace; ``logical.py``
logical sizes; ``group.py`` a group of ranks as a world and DP x TP grids of groups.

The names below are imported on first use (dlsys.lazy): a collective that imports
``dlsys.comm.payload`` does not start the launcher and every backend.
"""

from ..lazy import lazy

__getattr__, __all__ = lazy(
    __name__,
    backends=["BACKENDS", "LEND_MIN_NBYTES", "MAX_PROCESS_RANKS", "MAX_THREAD_RANKS"],
    board=["ANY_SOURCE", "ANY_TAG"],
    communicator=["Communicator"],
    group=["Grid", "Group"],
    launch=["LaunchResult", "launch"],
    node_threads=["SIGNAL"],
    payload=["as_payload", "payload_nbytes"],
    request=["Request", "Status"],
    supervise=["DeadlockError", "RankFailed"],
    trace=["Message", "Span", "Trace"],
)
