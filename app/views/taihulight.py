"""Case study: Caffe on the Sunway TaihuLight. The machine, the paper's two designs on
emulated SW26010 nodes, its figures regenerated, one iteration animated and on a timeline."""

import cached
import streamlit as st
from charts import chart
from layout import caption, markdown
from urlstate import url_key

from dlsys.experiments.taihulight import (
    BATCH,
    DEFAULT_LARGEST_NODES,
    LIBRARY,
    MODELS,
    PAPER_MESSAGE_BYTES,
    SWEEP_NODES,
    boundary_links,
)
from dlsys.experiments.taihulight_bounds import published_figures, verdicts
from dlsys.machine.fabric import TAIHULIGHT_NODES, TAIHULIGHT_BISECTION_Bps, TAIHULIGHT_UPLINK_Bps
from dlsys.machine.net import NODE_PRESETS
from dlsys.machine.netstack import LIBRARIES, MPI_LIBRARIES
from dlsys.machine.topology import TOPOLOGY_PRESETS, get_network
from dlsys.units import format_bytes, format_rate, format_seconds
from dlsys.viz import taihulight as viz
from dlsys.viz.animation import message_animation
from dlsys.viz.links import link_load_figure
from dlsys.viz.style import rank_name

PS_DESIGNS = ("ps", "ps-gather", "ps-reduce")
LAYOUTS = ["contiguous", "scattered"]
TITLES = {"ps": "parameter server: pushes per layer", "ring": "ring: one all-reduce"}

st.title("Case study: Caffe on the Sunway TaihuLight")
markdown(
    "The paper *Caffe distributed extension on Sunway TaihuLight* compared two synchronous designs on up to 512 "
    "SW26010 nodes. **Parameter server**: rank 0 sends the weights to every worker, and during backward every "
    "worker sends each layer's gradient to rank 0 as soon as it is computed; rank 0 averages and updates. "
    "**Decentralized**: "
    "every rank computes everything, then one ring all-reduce of the gradient buffer. Caffe kept each layer's "
    "gradient in its own blob, so one all-reduce needs a **packing copy** before and an unpacking copy after; the "
    "paper made the buffer contiguous. Compute follows each layer's FLOPs on an SW26010 (30 % of its peak)."
)

cols = st.columns(7)
model = cols[0].selectbox("model", MODELS, key=url_key("thl_model", MODELS))
ps_design = cols[5].selectbox(
    "PS built on",
    PS_DESIGNS,
    key=url_key("thl_ps", PS_DESIGNS),
    format_func=viz.DESIGN_NAMES.get,
    help="Direct sends (as the paper describes), or the MPI library's MPI_Bcast and a "
    "per-layer MPI_Gather or MPI_Reduce (the PS vs ring tab).",
)
library = cols[4].selectbox(
    "MPI library",
    MPI_LIBRARIES,
    index=MPI_LIBRARIES.index(LIBRARY),
    key=url_key("thl_library", MPI_LIBRARIES),
    help="Whose MPI_Allreduce the ring is compared with.",
)
largest = cols[1].select_slider(
    "nodes up to",
    SWEEP_NODES,
    DEFAULT_LARGEST_NODES,
    key=url_key("thl_nodes", SWEEP_NODES),
    help="The sweeps run 2, 4, ... up to this; a point not precomputed runs the first "
    "time, under a progress bar with the time left.",
)
layout = cols[2].radio("gradients", LAYOUTS, horizontal=True, key=url_key("thl_layout", LAYOUTS))
topology = cols[3].selectbox(
    "network",
    TOPOLOGY_PRESETS,
    index=TOPOLOGY_PRESETS.index("taihulight"),
    key=url_key("thl_topology", TOPOLOGY_PRESETS),
)
sharing = not cols[6].toggle(
    "static shares (the old rule)",
    value=False,
    key=url_key("thl_static", [False, True]),
    help="Off (the model): messages that cross a link at once share it max-min fairly (a replay of "
    "the run, docs/flows.md), so a lone message across supernodes gets the whole link. On, for "
    "contrast: every pair has a link of its own and a crossing message always gets the static "
    "quarter share.",
)
nodes = tuple(n for n in SWEEP_NODES if n <= largest)
contiguous = layout == "contiguous"
LINK_NODES = SWEEP_NODES[-1]  # two supernodes: the link-load tab's all-reduces cross the upper level

iteration = cached.taihulight_iteration(model, 8, contiguous, topology, BATCH, sharing)
m = st.columns(4)
for col, design in zip(m, ("ps", "ring")):
    r = iteration[design]
    col.metric(
        f"{viz.DESIGN_NAMES[design]}: iteration, 8 nodes",
        format_seconds(r["iteration_s"]),
        delta=f"communication {format_seconds(r['communication_s'])}",
        delta_color="off",
        delta_arrow="off",
    )
m[2].metric(
    "packing copies",
    format_seconds(iteration["ring"]["pack_s"]),
    help="Pack and unpack the gradient (read and write every byte at the node's memory bandwidth); "
    "0 with contiguous gradients.",
)
m[3].metric("gradient", format_bytes(iteration["ring"]["gradient_nbytes"]))

views = ["The machine", "PS vs ring", "Ring vs MPI_Allreduce", "Link load", "One iteration", "Timeline"]
machine, designs, versus, loads, animation, timeline = st.tabs(views, key=url_key("thl_view", views), on_change="rerun")
if machine.open:
    with machine:
        top, node = get_network("taihulight"), NODE_PRESETS["sw26010"]
        chart(viz.machine(top), "thl_machine")
        supernodes = TAIHULIGHT_NODES // top.supernode_size
        caption(
            f"{TAIHULIGHT_NODES:,} SW26010 nodes ({node.peak_flops / 1e12:.3g} TFLOP/s, "
            f"{format_rate(node.memory_bandwidth_Bps)} memory each) in {supernodes} supernodes of "
            f"{top.supernode_size}; {format_rate(top.link.bandwidth_Bps)} per node; "
            f"{format_rate(TAIHULIGHT_BISECTION_Bps)} bisection for the whole machine, so the level above the "
            f"supernodes carries 1/{TAIHULIGHT_NODES / 2 * top.link.bandwidth_Bps / TAIHULIGHT_BISECTION_Bps:.3g} "
            "of what the nodes could send (Fu et al. 2016; Dongarra 2016). With links shared, a message "
            f"across supernodes gets what its supernode's {format_rate(TAIHULIGHT_UPLINK_Bps)} uplink has "
            "left; without, every crossing message gets that share, the worst case, when every node sends "
            "across."
        )
traces = {TITLES[d]: iteration[d]["result"].trace for d in ("ps", "ring")}


def versus_rows() -> list:
    return cached.taihulight_versus_mpi(model, nodes, topology, library, sharing)


def versus_caption(rows: list) -> str:
    """The paper's figs 7-8 in words, with this run's ratio at the largest node count."""
    ring, mpi = rows[-2], rows[-1]  # the model's gradient at the most nodes
    ratio = mpi["virtual_time_s"] / ring["virtual_time_s"]
    first = {r["nodes"]: r["virtual_time_s"] for r in rows if r["library"] == "ring" and r["nbytes"] == ring["nbytes"]}
    flat = (
        f" The ring from {min(first)} to {max(first)} nodes: {format_seconds(first[min(first)])} to "
        f"{format_seconds(first[max(first)])}."
        if len(first) > 1
        else ""
    )
    return (
        f"The paper's figs 7-8: the ring against MPI_Allreduce as {library} runs it, for the paper's 60.97 MB "
        f"and {model}'s gradient (hover a point for the algorithm). {LIBRARIES[library].source}. At {mpi['nodes']} "
        f"nodes and {format_bytes(mpi['nbytes'])}, MPI_Allreduce ({mpi['algorithm']}) takes {ratio:.2f}x the "
        f"ring's time (the paper: 2.3-4.1x at 512 nodes).{flat} Recursive doubling sends the whole message lg p "
        "times, the ring 2(p-1)/p of it; Rabenseifner (MPICH's and Open MPI's for long messages) sends the "
        "ring's bytes in 2 lg p steps, and in the alpha-beta model the ring never beats it."
        + (
            ""
            if topology != "taihulight" or mpi["nodes"] <= 256
            else " Beyond 256 nodes "
            + (
                "only two of the ring's messages a step cross supernodes, and with links shared each has the "
                "uplink to itself: the ring stays flat, while recursive doubling's last step sends every node "
                "across at once."
                if sharing
                else "the static quarter share slows the ring's two crossing messages, and every step waits for them "
                "(turn links shared on)."
            )
        )
    )


def load_caption(rows: list) -> str:
    """What the link-load figure shows, with the busiest share of each link kind."""
    peak = {}
    for r in rows:
        kind = (r["series"].split(",")[0], r["link"].rstrip("0123456789"))
        peak[kind] = max(peak.get(kind, 0.0), r["nbytes"] / (r["end_s"] - r["start_s"]) / r["capacity_Bps"])
    return (
        f"Each cell: a link's mean use of its capacity in a time bin, for the ring and recursive doubling (the "
        f"paper's MPI_Allreduce) on {LINK_NODES} nodes, two supernodes: the first and last node of each and the "
        "uplinks and downlinks between them (dlsys.comm.replay.link_load). Busiest bin: ring node egress "
        f"{peak[('ring', 'egress')]:.0%}, uplink {peak[('ring', 'up')]:.1%}; recursive doubling node egress "
        f"{peak[('recursive_doubling', 'egress')]:.0%}, uplink {peak[('recursive_doubling', 'up')]:.0%}. "
        + (
            "With links shared the ring's node links stay busy: its one crossing message per supernode has the "
            "uplink nearly to itself."
            if sharing
            else "With a link per pair the ring's crossing messages get a quarter of their link, and every other "
            "node waits for them: its links idle three quarters of each step."
        )
        + " Recursive doubling's last step sends every node across at once and fills the uplinks either way."
    )


names = {title: [rank_name(r) for r in range(8)] for title in traces}
# tab, its figure (built only if the tab is open), chart key, caption
for tab, figure, key, tab_caption in (
    (
        designs,
        lambda: viz.design_scaling(cached.taihulight_sweep(nodes, contiguous, topology, ps_design, sharing)),
        "thl_designs",
        lambda: (
            f"Communication per iteration (what the compute does not hide) against nodes, batch {BATCH} per node. The "
            "server's link carries every layer from every node, so the PS grows with the nodes (on MPI_Reduce the tree "
            "adds on the way: lg p messages per layer reach rank 0, not p - 1); the ring's time tends to 2n/B. Beyond "
            "256 nodes the ring crosses the upper level, and every hop waits for the slowest link. The paper's ratios "
            "against the arithmetic bounds of each PS design (compute free, docs/taihulight.md): "
            + "; ".join(f"{v['figure']}: {v['verdict']}" for v in verdicts(published_figures()))
            + "."
            + (
                " With links shared, a rank's sends all leave at once and share its egress (the replay's sends are eager), "
                "where MPI's blocking sends take turns: that slows the PS's broadcasts of W, most the trees'."
                if sharing
                else ""
            )
        ),
    ),
    (versus, lambda: viz.ring_vs_mpi(versus_rows()), "thl_versus_mpi", lambda: versus_caption(versus_rows())),
    (
        loads,
        lambda: link_load_figure(
            cached.taihulight_link_load(LINK_NODES, sharing),
            f"All-reduce of {format_bytes(PAPER_MESSAGE_BYTES)} (the paper's message) on "
            f"{LINK_NODES} TaihuLight nodes, "
            f"{'links shared' if sharing else 'a link per pair'}",
            links=boundary_links(LINK_NODES),
        ),
        "thl_link_load",
        lambda: load_caption(cached.taihulight_link_load(LINK_NODES, sharing)),
    ),
    (
        animation,
        lambda: message_animation(traces, {TITLES["ps"]: "star"}, names),
        "thl_animation",
        lambda: (
            "One clock for both: press ▶ Play. Left: every layer's gradient converges on rank 0 (centre) while backward "
            "goes on; right: one ring all-reduce after backward."
        ),
    ),
    (
        timeline,
        lambda: viz.iteration_timeline(traces),
        "thl_timeline",
        lambda: (
            "Ranks 0-3 of 8. Red: packing copies (pick scattered gradients above to see them); grey: communication the "
            "compute does not hide."
        ),
    ),
):
    if tab.open:  # only the open tab is built and drawn
        with tab:
            chart(figure(), key)
            caption(tab_caption())
