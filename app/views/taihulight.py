"""Case study: Caffe on the Sunway TaihuLight. The machine, the paper's two designs on
emulated SW26010 nodes, its figures regenerated, one iteration animated and on a timeline."""

import streamlit as st

import cached
from charts import chart
from urlstate import url_key
from dlsys.experiments.taihulight import BATCH, LIBRARY, MODELS, SWEEP_NODES, published_figures, verdicts
from dlsys.machine.netstack import LIBRARIES, MPI_LIBRARIES
from dlsys.machine.topology import TOPOLOGY_PRESETS, get_topology
from dlsys.viz import comm as comm_viz
from dlsys.viz import taihulight as viz
from dlsys.viz.style import rank_name
from dlsys.viz.units import format_bytes, format_seconds

TITLES = {"ps": "parameter server: pushes per layer", "ring": "ring: one all-reduce"}

st.title("Case study: Caffe on the Sunway TaihuLight")
st.markdown(
    "The paper *Caffe distributed extension on Sunway TaihuLight* compared two synchronous designs on up to 512 "
    "SW26010 nodes. **Parameter server**: rank 0 sends the weights to every worker, and during backward every "
    "worker sends each layer's gradient to rank 0 as soon as it is computed; rank 0 averages and updates. "
    "**Decentralized**: "
    "every rank computes everything, then one ring all-reduce of the gradient buffer. Caffe kept each layer's "
    "gradient in its own blob, so one all-reduce needs a **packing copy** before and an unpacking copy after; the "
    "paper made the buffer contiguous. Compute follows each layer's FLOPs on an SW26010 (30 % of its peak).")

cols = st.columns(6)
model = cols[0].selectbox("model", MODELS, key=url_key("thl_model"))
ps_design = cols[5].selectbox("PS built on", ("ps", "ps-gather", "ps-reduce"), key=url_key("thl_ps"),
                              format_func=viz.DESIGN_NAMES.get,
                              help="Direct sends (as the paper describes), or the MPI library's MPI_Bcast and a "
                                   "per-layer MPI_Gather or MPI_Reduce (the PS vs ring tab).")
library = cols[4].selectbox("MPI library", MPI_LIBRARIES, index=MPI_LIBRARIES.index(LIBRARY),
                            key=url_key("thl_library"), help="Whose MPI_Allreduce the ring is compared with.")
largest = cols[1].select_slider("nodes up to", SWEEP_NODES, 64, key=url_key("thl_nodes"),
                                help="The sweeps run 2, 4, ... up to this; 512 takes about a minute the first time.")
layout = cols[2].radio("gradients", ["contiguous", "scattered"], horizontal=True, key=url_key("thl_layout"))
topology = cols[3].selectbox("network", TOPOLOGY_PRESETS, index=TOPOLOGY_PRESETS.index("taihulight"),
                             key=url_key("thl_topology"))
nodes = tuple(n for n in SWEEP_NODES if n <= largest)
contiguous = layout == "contiguous"

iteration = cached.taihulight_iteration(model, 8, contiguous, topology, BATCH)
m = st.columns(4)
for col, design in zip(m, ("ps", "ring")):
    r = iteration[design]
    col.metric(f"{viz.DESIGN_NAMES[design]}: iteration, 8 nodes", format_seconds(r["iteration_s"]),
               delta=f"communication {format_seconds(r['communication_s'])}", delta_color="off", delta_arrow="off")
m[2].metric("packing copies", format_seconds(iteration["ring"]["pack_s"]),
            help="Pack and unpack the gradient (read and write every byte at the node's memory bandwidth); "
                 "0 with contiguous gradients.")
m[3].metric("gradient", format_bytes(iteration["ring"]["gradient_nbytes"]))

machine, designs, versus, animation, timeline = st.tabs(
    ["The machine", "PS vs ring", "Ring vs MPI_Allreduce", "One iteration", "Timeline"],
    key=url_key("thl_view"), on_change="rerun")
if machine.open:
    with machine:
        chart(viz.machine(get_topology("taihulight")), "thl_machine")
        st.caption("40,960 SW26010 nodes (3.06 TFLOP/s, 32 GB at 136 GB/s each) in supernodes of 256; 14 GB/s per "
                   "node; 70 TB/s bisection for the whole machine, so the level above the supernodes carries about "
                   "a quarter of what the nodes could send (Fu et al. 2016; Dongarra 2016). The emulator gives every "
                   "message across supernodes that quarter share: the worst case, when every node sends across.")
traces = {TITLES[d]: iteration[d]["result"].trace for d in ("ps", "ring")}
names = {title: [rank_name(r) for r in range(8)] for title in traces}
# tab, its figure (built only if the tab is open), chart key, caption
for tab, figure, key, caption in (
    (designs, lambda: viz.design_scaling(cached.taihulight_sweep(nodes, contiguous, topology, ps_design)),
     "thl_designs",
     f"Communication per iteration (what the compute does not hide) against nodes, batch {BATCH} per node. The "
     "server's link carries every layer from every node, so the PS grows with the nodes (on MPI_Reduce the tree "
     "adds on the way: lg p messages per layer reach rank 0, not p - 1); the ring's time tends to 2n/B. Beyond "
     "256 nodes the ring crosses the upper level, and every hop waits for the slowest link. The paper's ratios "
     "against the arithmetic bounds of each PS design (compute free, docs/taihulight.md): "
     + "; ".join(f"{v['figure']}: {v['verdict']}" for v in verdicts(published_figures())) + "."),
    (versus, lambda: viz.ring_vs_mpi(cached.taihulight_versus_mpi(model, nodes, topology, library)),
     "thl_versus_mpi",
     f"The paper's figs 7-8: the ring against MPI_Allreduce as {library} runs it, for the paper's 60.97 MB and "
     f"{model}'s gradient (hover a point for the algorithm). {LIBRARIES[library].source}. Recursive doubling "
     "(the TaihuLight MPI's choice) sends the whole message lg p times, the ring 2(p-1)/p of it, so the ring pulls "
     "ahead as p grows; Rabenseifner (MPICH's and Open MPI's for long messages) sends the ring's bytes in 2 lg p "
     "steps, and in the alpha-beta model the ring never beats it. At 512 nodes "
     "the ring crosses the upper level, where the emulator gives every crossing message a quarter of the link "
     "(static share): its two crossing hops slow every step. With shared links only those two would cross."),
    (animation, lambda: comm_viz.message_animation(traces, {TITLES["ps"]: "star"}, names), "thl_animation",
     "One clock for both: press ▶ Play. Left: every layer's gradient converges on rank 0 (centre) while backward "
     "goes on; right: one ring all-reduce after backward."),
    (timeline, lambda: viz.iteration_timeline(traces), "thl_timeline",
     "Ranks 0-3 of 8. Red: packing copies (pick scattered gradients above to see them); grey: communication the "
     "compute does not hide."),
):
    if tab.open:  # only the open tab is built and drawn
        with tab:
            chart(figure(), key)
            st.caption(caption)
