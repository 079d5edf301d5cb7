"""Home: what dlsys is, the map of its concepts, and where to see each one."""

from pathlib import Path

import streamlit as st
from charts import chart
from demos import DEMOS, presenting
from layout import PRESENTER
from pages import BY_NAME, PAGES
from urlstate import unknown_page

from dlsys.viz.catalogue import concept_map

# (section, concept, where to see it: the page (its name in pages.PAGES), "lesson" or
# "planned"), after the concept catalogue; the map colours a page's concepts "app".
CONCEPTS = [
    ("Why distribute", "data parallelism", "training"),
    ("Why distribute", "model parallelism", "training"),
    ("Why distribute", "speedup and scaling efficiency", "lesson"),
    ("Primitives and cost", "send / recv", "collectives"),
    ("Primitives and cost", "your own rank program", "playground"),
    ("Primitives and cost", "broadcast, scatter, gather", "collectives"),
    ("Primitives and cost", "reduce, all-gather, reduce-scatter", "collectives"),
    ("Primitives and cost", "all-reduce algorithms", "cost_model"),
    ("Primitives and cost", "alpha-beta model", "cost_model"),
    ("Primitives and cost", "algbw / busbw", "collectives"),
    ("Architectures", "parameter server", "ps_vs_ring"),
    ("Architectures", "ring all-reduce", "ps_vs_ring"),
    ("Coordination", "BSP", "training"),
    ("Coordination", "ASP", "training"),
    ("Coordination", "SSP / bounded delay", "training"),
    ("Communicate less often", "large batches", "large_batches"),
    ("Communicate less often", "local SGD", "training"),
    ("Compression", "1-bit SGD, TernGrad, QSGD", "compression"),
    ("Compression", "Top-k, gradient dropping, DGC", "compression"),
    ("Overlap", "WFBP", "schedule"),
    ("Overlap", "P3, ByteScheduler", "schedule"),
    ("Overlap", "gradient fusion", "schedule"),
    ("Models that do not fit", "memory per rank, 2 + 2 + K bytes", "memory"),
    ("Models that do not fit", "ZeRO-1/2/3, FSDP", "memory"),
    ("Models that do not fit", "tensor and sequence parallelism", "memory"),
    ("Models that do not fit", "DP x TP groups on a topology", "lesson"),
    ("Pipelines and experts", "1F1B, interleaving, zero bubble", "pipelines"),
    ("Pipelines and experts", "all-to-all, mixture of experts", "pipelines"),
    ("Pipelines and experts", "choosing a DP x TP x PP layout", "pipelines"),
    ("Network stack", "TCP vs RDMA", "network_stack"),
    ("Network stack", "NCCL, Gloo, MPI, gRPC", "network_stack"),
    ("IO", "zero copy, memory bandwidth", "performance"),
    ("IO", "prefetching", "network_stack"),
    ("Large batch", "linear scaling, warm-up", "large_batches"),
    ("Large batch", "LARS, LAMB", "large_batches"),
    ("Large batch", "sharp vs flat minima", "large_batches"),
    ("TaihuLight case study", "PS vs ring on Caffe", "taihulight"),
    ("TaihuLight case study", "topology: supernodes, oversubscription", "taihulight"),
    ("TaihuLight case study", "contiguous gradients, packing copies", "taihulight"),
    ("TaihuLight case study", "ring vs MPI_Allreduce", "taihulight"),
    ("Reproductions", "every published claim: paper vs dlsys", "papers"),
    ("Beyond speed", "fault tolerance, consistency", "lesson"),
]


def lesson_title(path: Path) -> str:
    """A lesson's first markdown heading ("# # Lesson 01: ..."), else its file name."""
    for line in path.read_text().splitlines():
        if line.startswith("# # "):
            return line[4:].strip()
    return path.stem


if asked := unknown_page(["", *(page.name for page in PAGES[1:])]):  # Streamlit ran Home instead
    st.warning(f"There is no page {asked} in this app: this is Home. Every page is listed under Pages below.")
st.title("dlsys: watch distributed deep learning")
st.markdown(
    "dlsys is a teaching toolkit for distributed deep learning. **Real data, virtual time**: every algorithm "
    "really runs (ranks exchange real numpy arrays and compute real results), while time is *computed* from "
    "link and node models, so what you see is deterministic, independent of this machine, and exactly "
    "comparable with the textbook alpha-beta costs."
)

st.subheader("Pages")
PAGES_PER_ROW = 4  # one row of every page squeezed each title into a tenth of the width
for first in range(1, len(PAGES), PAGES_PER_ROW):
    for col, page in zip(st.columns(PAGES_PER_ROW), PAGES[first : first + PAGES_PER_ROW]):
        col.page_link(page.path, label=page.title, icon=page.icon)
        col.caption(page.blurb)

st.subheader("Prepared demos")
st.markdown(
    "\n".join(
        f"- week {demo.week}: [{demo.what}]({presenting(demo.link) if st.session_state.get(PRESENTER) else demo.link})"
        for demo in DEMOS
    )
)
st.caption("The course's links for the slides (docs/course.md): each opens its page set up for one point of a lecture.")

st.subheader("The map of concepts")
chart(
    concept_map([(section, concept, "app" if where in BY_NAME else where) for section, concept, where in CONCEPTS]),
    "home_concepts",
)

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
    "hostfile:"
)
st.code('DLSYS_BACKEND=mpi DLSYS_MPIRUN_ARGS="--hostfile hosts" python lessons/03_ring_allreduce.py', language="bash")
st.markdown(
    "Your own script, one MPI process per rank (it calls `dlsys.launch(program, world_size=8, "
    'backend="mpi")`), and the real network measured against the MPI library\'s own all-reduce:'
)
st.code(
    "dlsys mpirun -n 8 --hostfile hosts -- python my_ring.py\n"
    'DLSYS_MPIRUN_ARGS="--hostfile hosts" dlsys bench allreduce --backend mpi --ranks 8 --size 64MiB',
    language="bash",
)
st.caption(
    "docs/mpi.md walks through a two-host run: the same path on every host, passwordless SSH, and the "
    "firewall ports Open MPI uses."
)
