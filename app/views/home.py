"""Home: what dlsys is, the map of its concepts, and where to see each one."""

from pathlib import Path

import streamlit as st

import shared
from dlsys.viz.catalogue import concept_map

# (section, concept, where to see it: "app", "lesson" or "planned"), after the concept catalogue.
CONCEPTS = [
    ("Why distribute", "data parallelism", "app"), ("Why distribute", "model parallelism", "app"),
    ("Why distribute", "speedup and scaling efficiency", "lesson"),
    ("Primitives and cost", "send / recv", "app"), ("Primitives and cost", "broadcast, scatter, gather", "app"),
    ("Primitives and cost", "reduce, all-gather, reduce-scatter", "app"), ("Primitives and cost", "all-reduce algorithms", "app"),
    ("Primitives and cost", "alpha-beta model", "app"), ("Primitives and cost", "algbw / busbw", "app"),
    ("Architectures", "parameter server", "app"), ("Architectures", "ring all-reduce", "app"),
    ("Coordination", "BSP", "app"), ("Coordination", "ASP", "app"), ("Coordination", "SSP / bounded delay", "app"),
    ("Communicate less often", "large batches", "app"), ("Communicate less often", "local SGD", "app"),
    ("Compression", "1-bit SGD, TernGrad, QSGD", "app"), ("Compression", "Top-k, gradient dropping, DGC", "app"),
    ("Overlap", "WFBP", "app"), ("Overlap", "P3, ByteScheduler", "app"), ("Overlap", "gradient fusion", "app"),
    ("Network stack", "TCP vs RDMA", "app"), ("Network stack", "NCCL, Gloo, MPI, gRPC", "app"),
    ("IO", "zero copy, memory bandwidth", "app"), ("IO", "prefetching", "app"),
    ("Large batch", "linear scaling, warm-up", "app"), ("Large batch", "LARS, LAMB", "app"),
    ("Large batch", "sharp vs flat minima", "app"),
    ("TaihuLight case study", "PS vs ring on Caffe", "app"),
    ("TaihuLight case study", "topology: supernodes, oversubscription", "app"),
    ("TaihuLight case study", "contiguous gradients, packing copies", "app"),
    ("TaihuLight case study", "ring vs MPI_Allreduce", "app"),
    ("Beyond speed", "fault tolerance, consistency", "lesson"),
]

def lesson_title(path: Path) -> str:
    """A lesson's first markdown heading ("# # Lesson 01: ..."), else its file name."""
    for line in path.read_text().splitlines():
        if line.startswith("# # "):
            return line[4:].strip()
    return path.stem


# (page, label, icon, what it shows): one line per page of streamlit_app.PAGES
PAGE_LINKS = [
    ("views/collectives.py", "Collectives", shared.ICONS["collectives"],
     "Every MPI collective and algorithm: messages animated on a ring of ranks, the ring all-reduce step by step, "
     "the timeline, bytes per link, measured against the closed form."),
    ("views/cost_model.py", "Cost model explorer", shared.ICONS["cost_model"],
     "All-reduce algorithms against message size and ranks, where they cross, TCP against RDMA, alpha and beta apart."),
    ("views/ps_vs_ring.py", "PS vs ring", shared.ICONS["ps_vs_ring"],
     "A parameter server and a ring all-reduce averaging the same gradients, side by side: the server's link is "
     "the bottleneck."),
    ("views/training.py", "Distributed training", shared.ICONS["training"],
     "Real models under BSP, SSP and ASP with a straggler, parameter-server pushes and pulls, data against model "
     "parallelism."),
    ("views/compression.py", "Gradient compression", shared.ICONS["compression"],
     "Ten compressors on a real gradient: what they keep, the residual error feedback carries, honest bytes on the "
     "wire, accuracy against bytes, and when compressing costs more time than it saves."),
    ("views/large_batches.py", "Large batches", shared.ICONS["large_batches"],
     "Batch 32 to 8,192 under fixed, square-root and linear learning rates with warm-up; LARS and LAMB; per-layer "
     "trust ratios; sharp against flat minima; time to accuracy against workers."),
    ("views/schedule.py", "Overlap and scheduling", shared.ICONS["schedule"],
     "FIFO, WFBP, P3, ByteScheduler, fusion and OD-SGD on one clock: worker 0's compute, pushes and pulls coloured "
     "by layer with a time slider, iteration time against bandwidth, and what slice, credit and bucket sizes trade."),
    ("views/performance.py", "Real bytes and scale", shared.ICONS["performance"],
     "The wall clock: the memory traffic of a real all-reduce, measured here with copied and zero-copy sends "
     "against memcpy, and how far the emulator scales."),
    ("views/network_stack.py", "Network stack and IO", shared.ICONS["network_stack"],
     "One message through the stages of TCP and of RDMA, library presets against this machine's measured times, "
     "and a trainer starved by its data loader until loader workers and prefetching catch up."),
    ("views/taihulight.py", "Case study: TaihuLight", shared.ICONS["taihulight"],
     "Caffe on the Sunway TaihuLight re-run: the machine, the paper's parameter server against its ring on up to 512 "
     "SW26010 nodes, ring against MPI_Allreduce, per-layer gathers animated, packing copies on the timeline."),
]

st.title("dlsys: watch distributed deep learning")
st.markdown(
    "dlsys is a teaching toolkit for distributed deep learning. **Real data, virtual time**: every algorithm "
    "really runs (ranks exchange real numpy arrays and compute real results), while time is *computed* from "
    "link and node models, so what you see is deterministic, independent of this machine, and exactly "
    "comparable with the textbook alpha-beta costs.")

st.subheader("Pages")
for col, (path, label, icon, text) in zip(st.columns(len(PAGE_LINKS)), PAGE_LINKS):
    col.page_link(path, label=label, icon=icon)
    col.caption(text)

st.subheader("The map of concepts")
shared.chart(concept_map(CONCEPTS), "home_concepts")

st.subheader("Lessons")
lessons = sorted((Path(__file__).resolve().parents[2] / "lessons").glob("*.py"))
if lessons:
    st.markdown("\n".join(f"- {lesson_title(p)} (`lessons/{p.name}`)" for p in lessons))
    st.caption("Percent-format scripts: run them with python, or open their executed notebooks in notebooks/.")
else:
    st.info("No lessons in lessons/ yet.")

st.subheader("On a cluster")
st.markdown(
    "The same rank programs run on MPI ranks across a lab's workstations or a cluster, with the same values and "
    "virtual times (the `mpi` backend, docs/mpi.md). A lesson, unchanged, with every launch on the hosts of a "
    "hostfile:")
st.code('DLSYS_BACKEND=mpi DLSYS_MPIRUN_ARGS="--hostfile hosts" python lessons/03_ring_allreduce.py', language="bash")
st.markdown("Your own script, one MPI process per rank (it calls `dlsys.launch(program, world_size=8, "
            "backend=\"mpi\")`), and the real network measured against the MPI library's own all-reduce:")
st.code("dlsys mpirun -n 8 --hostfile hosts -- python my_ring.py\n"
        'DLSYS_MPIRUN_ARGS="--hostfile hosts" dlsys bench allreduce --backend mpi --ranks 8 --size 64MiB',
        language="bash")
st.caption("docs/mpi.md walks through a two-host run: the same path on every host, passwordless SSH, and the "
           "firewall ports Open MPI uses.")
