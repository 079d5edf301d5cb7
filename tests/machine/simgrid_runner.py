"""Run flows in SimGrid, the independent oracle of dlsys/machine/flows.py (docs/flows.md).

    python tests/machine/simgrid_runner.py --probe       prints SimGrid's version, or why it cannot load
    python tests/machine/simgrid_runner.py < case.json   prints {"finish_s": [...]} as JSON

case.json: {"links": [[name, capacity_Bps, latency_s], ...],
            "routes": [[src, dst, [link ids]], ...],
            "nodes": n, "flows": [[src, dst, nbytes, ready_s], ...]}

One SimGrid engine per process (SimGrid allows one), hence a script run once per case.

**Loading SimGrid.** Debian's python3-simgrid installs one extension module,
/usr/lib/python3/dist-packages/simgrid.cpython-311-x86_64-linux-gnu.so, for the system
Python 3.11; the project's venv is another 3.11 build with the same ABI. Putting the
whole dist-packages directory on sys.path would also expose every other Debian package,
so ``load_simgrid`` imports that one file by path (importlib), after trying a plain
``import simgrid`` (a pip or conda install wins).

**The platform** mirrors the fabric link for link: one SimGrid link per FabricLink (same
bandwidth and latency, SHARED: its bandwidth is shared by all flows crossing it), one
host per node, in a Full zone with the fabric's route for each (src, dst) pair used,
one-way (symmetrical=False; the fabric's reverse route is its own). Each flow is an actor
that sleeps until ``ready_s`` and does ``Comm.sendto(src, dst, nbytes)`` (a host-to-host
communication, no mailbox); its completion time is the clock when that returns.

**The model settings** (flags below) make SimGrid's CM02 model the plain max-min model of
flows.py: no TCP window bound (TCP-gamma 0), no reverse-path traffic (crosstraffic 0),
latency and bandwidth factors 1, weight-S 0 (so a flow's sharing penalty is its route
latency, equal for every route of our fabrics, hence plain max-min), and solver
precisions of 1e-9 instead of 1e-5.
"""

import glob
import importlib.util
import json
import sys

SIMGRID_CONFIG = [
    "--cfg=network/model:CM02",  # Casanova & Marchal's max-min model, no slow-start corrections (LV08 has them)
    "--cfg=network/TCP-gamma:0",  # no window bound gamma / (2 latency) on a flow's rate
    "--cfg=network/crosstraffic:0",  # no 5% of each flow charged to its reverse route (ACKs)
    "--cfg=network/latency-factor:1",
    "--cfg=network/bandwidth-factor:1",
    "--cfg=network/weight-S:0",  # sharing penalty = route latency only (LV08: + 20537 / bandwidth)
    "--cfg=maxmin/precision:1e-9",  # the LMM solver's relative precision (default 1e-5)
    "--cfg=surf/precision:1e-9",  # remaining-work precision (default 1e-5)
    "--log=root.thres:critical",
]

DEBIAN_DIRS = ("/usr/lib/python3/dist-packages",)


def load_simgrid():
    """The simgrid module: ``import simgrid``, else Debian's extension module loaded by path."""
    try:
        import simgrid

        return simgrid
    except ImportError:
        pass
    tag = f"cpython-{sys.version_info.major}{sys.version_info.minor}"
    candidates = [p for d in DEBIAN_DIRS for p in sorted(glob.glob(f"{d}/simgrid.{tag}-*.so"))]
    if not candidates:
        raise ImportError(
            f"no simgrid module for Python {sys.version_info.major}.{sys.version_info.minor}: "
            f"`apt-get install python3-simgrid` (Debian) or `pip install simgrid`"
        )
    spec = importlib.util.spec_from_file_location("simgrid", candidates[0])
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    sys.modules["simgrid"] = module
    return module


def run(case: dict) -> list:
    simgrid = load_simgrid()
    engine = simgrid.Engine(["simgrid_runner", *SIMGRID_CONFIG])
    zone = simgrid.NetZone.create_full_zone("fabric")
    hosts = [zone.create_host(f"node{i}", 1e9) for i in range(case["nodes"])]
    links = []
    for name, capacity_Bps, latency_s in case["links"]:
        link = zone.create_link(name, capacity_Bps)
        link.set_latency(latency_s)
        link.set_sharing_policy(simgrid.Link.SharingPolicy.SHARED, None)
        links.append(link.seal())
    for src, dst, route in case["routes"]:
        zone.add_route(
            hosts[src].netpoint, hosts[dst].netpoint, None, None, [simgrid.LinkInRoute(links[i]) for i in route], False
        )
    zone.seal()
    finish = [None] * len(case["flows"])

    def flow(index, src, dst, nbytes, ready_s):
        simgrid.this_actor.sleep_until(ready_s)
        simgrid.Comm.sendto(hosts[src], hosts[dst], nbytes)
        finish[index] = simgrid.Engine.clock

    for index, (src, dst, nbytes, ready_s) in enumerate(case["flows"]):
        simgrid.Actor.create(f"flow{index}", hosts[src], flow, index, src, dst, int(nbytes), float(ready_s))
    engine.run()
    return finish


if __name__ == "__main__":
    if sys.argv[1:] == ["--probe"]:
        try:
            print(load_simgrid().simgrid_version)
        except Exception as error:  # report why, for the skip message
            print(f"cannot load simgrid: {error}")
            sys.exit(1)
    else:
        print(json.dumps({"finish_s": run(json.load(sys.stdin))}))
