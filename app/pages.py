"""The app's pages, one entry each: its file in app/views/, title, icon, section of the
navigation, and the blurb Home shows under its link. The navigation (streamlit_app.py),
Home's links and concept map, and the tests (tests/app/test_app.py, tests/app/test_browser.py)
read PAGES, so a new page is one file in app/views/ and one entry here.

Icons are emoji, not ":material/..." names: for those Streamlit's page (its favicon)
fetches an SVG from fonts.gstatic.com, which fails in a classroom without internet
(tests/app/test_browser.py checks that no request leaves the machine).
"""

from typing import NamedTuple


class Page(NamedTuple):
    path: str  # "views/<name>.py", relative to app/
    title: str
    icon: str
    section: str  # its group in the navigation, in order of first appearance
    blurb: str  # what it shows, on Home

    @property
    def name(self) -> str:
        """The file's stem: Streamlit serves the page at /<name> (Home, the default, at /)."""
        return self.path.removeprefix("views/").removesuffix(".py")


PAGES = [  # the first is Home, the default page
    Page("views/home.py", "Home", "🏠", "dlsys", "What dlsys is, the map of its concepts, the lessons."),
    Page(
        "views/collectives.py",
        "Collectives",
        "🔁",
        "Communication",
        "Every MPI collective and algorithm: messages animated on a ring of ranks, the ring all-reduce step by "
        "step, the timeline, bytes per link, measured against the closed form.",
    ),
    Page(
        "views/cost_model.py",
        "Cost model explorer",
        "📈",
        "Communication",
        "All-reduce algorithms against message size and ranks, where they cross, TCP against RDMA, alpha and beta "
        "apart.",
    ),
    Page(
        "views/ps_vs_ring.py",
        "PS vs ring",
        "🕸️",
        "Communication",
        "A parameter server and a ring all-reduce averaging the same gradients, side by side: the server's link is "
        "the bottleneck.",
    ),
    Page(
        "views/training.py",
        "Distributed training",
        "🧠",
        "Training",
        "Real models under BSP, SSP and ASP with a straggler, parameter-server pushes and pulls, data against model "
        "parallelism.",
    ),
    Page(
        "views/compression.py",
        "Gradient compression",
        "🗜️",
        "Training",
        "Ten compressors on a real gradient: what they keep, the residual error feedback carries, honest bytes on "
        "the wire, accuracy against bytes, and when compressing costs more time than it saves.",
    ),
    Page(
        "views/large_batches.py",
        "Large batches",
        "📦",
        "Training",
        "Batch 32 to 8,192 under fixed, square-root and linear learning rates with warm-up; LARS and LAMB; "
        "per-layer trust ratios; sharp against flat minima; time to accuracy against workers.",
    ),
    Page(
        "views/schedule.py",
        "Overlap and scheduling",
        "🚦",
        "Training",
        "FIFO, WFBP, P3, ByteScheduler, fusion and OD-SGD on one clock: worker 0's compute, pushes and pulls "
        "coloured by layer with a time slider, iteration time against bandwidth, and what slice, credit and bucket "
        "sizes trade.",
    ),
    Page(
        "views/memory.py",
        "Memory and sharding",
        "🧩",
        "Training",
        "What one rank holds under DDP, ZeRO-1/2/3, FSDP and tensor parallelism against a device's memory, ZeRO's "
        "Figure 1, measured ledgers against the closed form, and the bytes each layout sends per step.",
    ),
    Page(
        "views/pipelines.py",
        "Pipelines and the planner",
        "🪜",
        "Training",
        "GPipe, 1F1B, interleaved 1F1B and zero bubble as Gantt charts with their bubble and activation memory, "
        "the all-to-all that mixture-of-experts layers live on, and which DP x TP x PP x ZeRO layout of a large "
        "model fits and is fastest.",
    ),
    Page(
        "views/performance.py",
        "Real bytes and scale",
        "⏱️",
        "Under the hood",
        "The wall clock: the memory traffic of a real all-reduce, measured here with copied and zero-copy sends "
        "against memcpy, and how far the emulator scales.",
    ),
    Page(
        "views/network_stack.py",
        "Network stack and IO",
        "🔌",
        "Under the hood",
        "One message through the stages of TCP and of RDMA, library presets against this machine's measured "
        "times, and a trainer starved by its data loader until loader workers and prefetching catch up.",
    ),
    Page(
        "views/taihulight.py",
        "Case study: TaihuLight",
        "🏯",
        "Case studies",
        "Caffe on the Sunway TaihuLight re-run: the machine, the paper's parameter server against its ring on up "
        "to 512 SW26010 nodes, ring against MPI_Allreduce, per-layer gathers animated, packing copies on the "
        "timeline.",
    ),
    Page(
        "views/papers.py",
        "Papers",
        "📜",
        "Case studies",
        "Every published claim the course teaches run again: the paper's figure beside dlsys's, a verdict (holds, "
        "shape holds, differs) and why, a plot per claim.",
    ),
    Page(
        "views/playground.py",
        "Playground",
        "🛝",
        "Playground",
        "Your own rank program (mpi4py style), run in the grader's sandbox: each rank's value, its messages "
        "animated, the timeline, the virtual time against your closed form, deadlocks and errors named.",
    ),
]
BY_NAME = {page.name: page for page in PAGES}
