"""The Communicator's fast path (dlsys.comm.fast.shift) gives the reading path's values and
trace (sendrecv: send, then recv), bit for bit, on a flat network and on a two-level tree."""

import numpy as np
import pytest

import dlsys
from dlsys.comm import fast
from dlsys.comm.logical import LogicalArray
from dlsys.machine.net import LinkModel
from dlsys.machine.topology import flat, two_level

LINK = LinkModel("test", latency_s=2e-6, bandwidth_Bps=1e9, overhead_s=1e-6, kernel_copies=1, copy_bandwidth_Bps=4e9)
NETWORKS = {"flat": flat(LINK), "two-level": two_level(LINK, supernode_size=2, oversubscription=3.0)}


def steps(comm, use_fast: bool):
    """Shift steps around the ring: sizes that repeat and change, compute between them, a
    phase with and without a block, a label given, a label too long, a LogicalArray and a list."""
    rng = np.random.default_rng(comm.rank)
    right, left = (comm.rank + 1) % comm.size, (comm.rank - 1) % comm.size
    step = fast.shift(comm, right, left, 7) if use_fast else None
    payloads = [
        np.full(1000, comm.rank, np.float32),
        np.full(1000, comm.rank, np.float32),
        np.arange(int(rng.integers(1, 5000)), dtype=np.int64),
        LogicalArray(np.ones(10), 1000),
        [1.0, 2.0, float(comm.rank)],
    ]
    fields = [
        ("reduce-scatter", 0, 3, ""),
        ("allgather", 1, -1, ""),
        ("", -1, -1, "my label"),
        ("phase", 2, 0, "x" * 300),
        ("", -1, -1, ""),
    ]
    got = []
    for buf, (phase, s, block, label) in zip(payloads, fields):
        comm.compute(seconds=float(rng.uniform(0, 1e-5)))
        if use_fast:
            got.append(step(buf, phase, s, block, label))
        else:
            got.append(
                comm.sendrecv(buf, right, 7, source=left, recvtag=7, label=label, phase=phase, step=s, block=block)
            )
    return [np.asarray(g).tolist() for g in got]


@pytest.mark.parametrize("network", NETWORKS)
@pytest.mark.parametrize("backend", ["threads", "processes"])
def test_shift_gives_the_trace_of_sendrecv(network, backend):
    runs = [dlsys.launch(steps, 4, backend, topology=NETWORKS[network], args=(use_fast,)) for use_fast in (False, True)]
    reading, lean = runs
    assert lean.values == reading.values
    assert lean.trace.messages == reading.trace.messages and lean.trace.spans == reading.trace.spans
    assert lean.clocks_s == reading.clocks_s
    if network == "two-level":  # the ring crosses supernodes: the uplink's times differ from the link's
        assert len({m.arrive_s - m.depart_s for m in reading.trace.messages if m.nbytes == 4000}) > 1


def test_shift_checks_its_ranks_and_tag_once():
    def bad(comm):
        fast.shift(comm, comm.rank, 0, 0)

    with pytest.raises(dlsys.RankFailed, match="dest must be another rank"):
        dlsys.launch(bad, 2, "threads")
