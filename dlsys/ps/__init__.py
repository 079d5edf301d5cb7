"""A parameter server after ps-lite (Li et al., "Scaling Distributed Machine Learning with
the Parameter Server", OSDI 2014), with BSP, SSP and ASP consistency.

World layout: ranks 0..S-1 are the server group, ranks S..S+W-1 the workers; workers
never talk to each other. Keys are the model's parameter tensors (``param_slices()``);
their values live in one flat key space that is cut into S contiguous ranges, one per
server, so a large tensor is sliced across servers (as ps-lite slices big arrays).

Worker API (``KVWorker``, ps-lite's names): ``push(keys, values)`` and ``pull(keys)`` are
non-blocking and return a timestamp; ``wait(ts)`` completes it. A message carries a key
list and a value list, as in ps-lite. Servers aggregate and update (SGD with momentum).

Consistency, with a worker's clock c = the number of gradients it has pushed:
* BSP: a pull at clock c waits until every worker has pushed c gradients; the server
  applies one update with the mean of the W gradients of each round.
* SSP(s) (Ho et al., NIPS 2013, "More Effective Distributed ML via a Stale Synchronous
  Parallel Parameter Server"): the pull waits while c - (slowest clock) > s, so a worker
  never reads weights missing more than s clocks of anybody's updates; s = 0 is BSP's gate.
* ASP: pulls never wait. SSP and ASP apply every gradient as it arrives, scaled by 1/W so
  that W pushes move the weights as far as one synchronous step.
Training stops after a budget of epochs * steps_per_epoch * W gradients: the server then
answers pulls with "stop". So under ASP fast workers simply do more of the work.

The simplest round of all, one server and plain synchronous averaging, is ``ps_round``:
the experiments that put a parameter server beside ring all-reduce use it.

Determinism: server 0 takes requests in virtual-arrival order (``comm.recv_any``); with
several servers it tells the others the order (a 1-number message), so every server makes
the same decisions. Under BSP the order is fixed (round robin), no ordering messages.

Failure: ``fail=(worker, step)`` makes that worker crash at that step. ps-lite's scheduler
notices a dead node by its missing heartbeats; we model the notice as a LEAVE message the
worker sends as it dies. Under SSP/ASP the servers drop it from the clock gate and the
others finish the budget; under BSP no round can complete, so the servers fail the run
with an error naming the worker.

Where it lives: ``keys.py`` (the key layout), ``protocol.py`` (kinds, tags, STOP),
``server.py`` (``KVServer``: serve, push, aggregate, the gate), ``worker.py`` (``KVWorker``),
``hooks.py`` (compression codecs, checkpoints, progress, the read log: passed in, so the
core reads without them), ``program.py`` (``ps_program``: the digits task on the servers
and workers, failure injection in the worker loop) and ``sync_round.py`` (``ps_round``).
"""

from .keys import KeyLayout
from .program import ps_program
from .server import CONSISTENCY, KVServer, WorkerFailed
from .sync_round import ps_round
from .worker import KVWorker

__all__ = ["CONSISTENCY", "KVServer", "KVWorker", "KeyLayout", "WorkerFailed", "ps_program", "ps_round"]
