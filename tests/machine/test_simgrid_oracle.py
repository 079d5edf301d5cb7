"""SimGrid, the field's validated flow-level simulator, as an independent oracle of
dlsys/machine/flows.py: each pattern runs in both, on the same fabric, and every flow's
completion time agrees within 1% (measured: see docs/flows.md). SimGrid runs in a
subprocess (tests/machine/simgrid_runner.py: how it is loaded, the platform, the CM02 settings
that match our model). Skips, with the reason, where SimGrid cannot be loaded:
`make simgrid` installs Debian's python3-simgrid."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from dlsys.machine.fabric import fat_tree, flat, gpu_cluster, two_level
from dlsys.machine.flows import Flow, simulate_flows

RUNNER = Path(__file__).with_name("simgrid_runner.py")
TOLERANCE = 0.01
MiB = 2**20


def _probe() -> str | None:
    """None if SimGrid loads, else why not."""
    try:
        done = subprocess.run([sys.executable, str(RUNNER), "--probe"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"cannot run {RUNNER.name}: {error}"
    return None if done.returncode == 0 else done.stdout.strip() or done.stderr.strip()


REASON = _probe()
pytestmark = pytest.mark.skipif(
    REASON is not None, reason=f"SimGrid unavailable ({REASON}); `make simgrid` installs it"
)


def simgrid_finish(fabric, flows) -> list[float]:
    pairs = sorted({(f.src, f.dst) for f in flows})
    case = {
        "nodes": fabric.nodes,
        "links": [[link.name, link.capacity_Bps, link.latency_s] for link in fabric.links],
        "routes": [[s, d, list(fabric.route(s, d))] for s, d in pairs],
        "flows": [[f.src, f.dst, int(f.nbytes), f.ready_s] for f in flows],
    }
    done = subprocess.run(
        [sys.executable, str(RUNNER)], input=json.dumps(case), capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)["finish_s"]


def incast():
    """Seven ranks send to rank 0 of a flat EDR network: sizes 1-3 x 8 MiB, ready 0.5 ms apart."""
    fabric = flat("rdma-edr", 8)
    return fabric, [Flow(r, 0, (1 + r % 3) * 8 * MiB, (r - 1) * 0.5e-3) for r in range(1, 8)]


def ring():
    """Two steps of a ring over two supernodes of 4 whose uplinks carry half a node link
    (oversubscription 8): the second step ready while the first is a third done."""
    fabric = two_level("rdma-edr", 4, oversubscription=8.0, nodes=8)
    n = 16 * MiB
    wire = n / 12.5e9
    return fabric, [Flow(r, (r + 1) % 8, n, step * wire / 3) for step in range(2) for r in range(8)]


def recursive_doubling():
    """Recursive doubling over two supernodes of 4 (uplinks 2 B: oversubscription 2): steps
    at distance 1, 2, 4, ranks skewed by 0.1 ms, steps 1 ms apart, so they overlap; the
    last step crosses: 4 flows each way share an uplink."""
    fabric = two_level("rdma-edr", 4, oversubscription=2.0, nodes=8)
    return fabric, [Flow(r, r ^ (1 << step), 8 * MiB, step * 1e-3 + r * 1e-4) for step in range(3) for r in range(8)]


def all_to_all():
    """All-to-all on a k = 4 fat tree (16 hosts) oversubscribed 2:1, sizes 1-3 x 1 MiB,
    sources ready 50 us apart."""
    fabric = fat_tree(4, 2.0, "rdma-edr")
    return fabric, [Flow(s, d, (1 + (s + d) % 3) * MiB, s * 50e-6) for s in range(16) for d in range(16) if s != d]


def gpu_all_to_all():
    """All-to-all on two DGX H100 islands: 7 messages per GPU on NVLink, 8 on its NIC
    (routes of two latencies, on disjoint links)."""
    fabric = gpu_cluster(16)
    return fabric, [Flow(s, d, 4 * MiB, 0.0) for s in range(16) for d in range(16) if s != d]


PATTERNS = {
    "incast": incast,
    "ring": ring,
    "recursive-doubling": recursive_doubling,
    "all-to-all": all_to_all,
    "gpu-all-to-all": gpu_all_to_all,
}


@pytest.mark.parametrize("pattern", PATTERNS)
def test_flows_agree_with_simgrid(pattern):
    fabric, flows = PATTERNS[pattern]()
    ours = simulate_flows(fabric, flows).finish_s
    theirs = simgrid_finish(fabric, flows)
    worst = max(abs(a - b) / b for a, b in zip(ours, theirs))
    print(f"{pattern}: {len(flows)} flows, max relative difference {worst:.3g}")
    assert worst <= TOLERANCE


def test_simgrid_cm02_shares_by_inverse_route_latency():
    """Why our fabrics give every route one latency: CM02's sharing penalty is the route's
    latency, so flows of unequal latency on one link share it in proportion to 1 / latency
    (TCP's RTT unfairness). flows.py reproduces that with weights = 1 / latency."""
    from dlsys.machine.fabric import FabricLink, explicit

    links = [FabricLink("shared", 1e9), FabricLink("short", 1e12, 1e-4), FabricLink("long", 1e12, 3e-4)]
    fabric = explicit(
        "rtt", 3, links, {(0, 2): (1, 0), (1, 2): (2, 0), (2, 0): (0,), (2, 1): (0,), (0, 1): (1,), (1, 0): (2,)}
    )
    flows = [Flow(0, 2, 10**8, 0.0), Flow(1, 2, 10**8, 0.0)]
    theirs = simgrid_finish(fabric, flows)
    weighted = simulate_flows(fabric, flows, weights=[1 / 1e-4, 1 / 3e-4]).finish_s
    assert max(abs(a - b) / b for a, b in zip(weighted, theirs)) <= 1e-9
    fair = simulate_flows(fabric, flows).finish_s
    assert abs(fair[0] - theirs[0]) / theirs[0] > 0.4  # plain max-min: 0.1999 s, not 0.1334 s
