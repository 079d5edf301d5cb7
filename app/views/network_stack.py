"""Network stack and IO: one message through the stages of TCP and of RDMA on one clock,
one message's time per library preset with this machine's measurements on top, and a
trainer that waits on its data loader."""

import cached
import streamlit as st
from charts import chart
from layout import caption, markdown
from urlstate import url_key
from widgets import size_slider

from dlsys.experiments import network_stack as ex
from dlsys.machine.netstack import LIBRARIES, protocol_for
from dlsys.machine.storage import STORAGE_PRESETS
from dlsys.units import format_bytes, format_seconds
from dlsys.viz import network_stack as viz

LIBRARY_SIZES = [2**k for k in range(0, 31)]
MAX_LOADERS, MAX_PREFETCH = 16, 16

st.title("Network stack and IO")
markdown(
    "A link's alpha and beta are the sum of what happens to a message on its way. With **TCP/IP** each side makes "
    "a system call, runs the protocol stack, takes an interrupt, wakes a thread, and *copies every byte* between "
    "the user's buffer and the kernel's. With **RDMA** the NIC reads the sender's registered memory and writes the "
    "receiver's: no system call, no copy, no interrupt. The same holds for data: a batch has to be read and "
    "decoded before the accelerator can use it, and a slow loader **starves** the trainer unless enough loader "
    "workers run ahead of it, as far as the prefetch queue lets them."
)

views = ["One message", "Libraries", "Training and IO"]
tabs = st.tabs(views, key=url_key("net_view", views), on_change="rerun")
if tabs[0].open:
    with tabs[0]:
        nbytes = size_slider("message size", "net_size", default=16 * 2**10)
        rows = ex.message_path(nbytes)
        chart(viz.message_animation(rows), "net_message")
        total = {link: max(r["end_s"] for r in rows if r["link"] == link) for link in ex.MESSAGE_LINKS}
        copies = sum(r["time_s"] for r in rows if r["link"] == "tcp-10gbe" and r["stage"].startswith("copy"))
        cpu = {link: sum(r["time_s"] for r in rows if r["link"] == link and r["side"] != "wire") for link in total}
        tcp, rdma = ex.MESSAGE_LINKS
        caption(
            f"One message of {format_bytes(nbytes)}: {format_seconds(total[tcp])} on {tcp} against "
            f"{format_seconds(total[rdma])} on {rdma}, {total[tcp] / total[rdma]:.1f} times longer. The CPUs "
            f"of the two ends spend {format_seconds(cpu[tcp])} on TCP (of which {format_seconds(copies)} "
            f"copying through the kernel) and {format_seconds(cpu[rdma])} on RDMA. Hover over a stage for its "
            f"source. MPI and UCX would send this size with the {protocol_for(nbytes)} protocol "
            "(`dlsys presets --stack LINK --protocol`)."
        )
if tabs[1].open:
    with tabs[1]:
        rows = ex.library_message_times(LIBRARY_SIZES)
        measured = cached.measured_stack()
        chart(viz.library_times(rows, measured["rows"]), "net_libraries")
        at_1k = {r["library"]: r["time_s"] for r in rows if r["nbytes"] == 1024}
        fastest, slowest = min(at_1k, key=at_1k.get), max(at_1k, key=at_1k.get)
        fits = "; ".join(
            f"{t}: alpha {format_seconds(f['alpha_s'])}, "
            + (f"{f['bandwidth_Bps'] / 1e9:.2g} GB/s" if f["bandwidth_Bps"] else "no bandwidth term")
            for t, f in measured["fits"].items()
        )
        caption(
            f"Each library is an algorithm choice on a transport; the lines are one message through its "
            f"transport with the library's own per-message and per-byte costs. At 1 KiB {fastest} takes "
            f"{format_seconds(at_1k[fastest])} and {slowest} {format_seconds(at_1k[slowest])}. The markers "
            f"were measured on this machine just now (half the median round trip), with alpha and beta "
            f"fitted by least squares: {fits}. `dlsys bench stack` measures up to 64 MiB and shared memory "
            f"too. Sources: " + "; ".join(f"{lib.name}: {lib.source}" for lib in LIBRARIES.values())
        )
if tabs[2].open:
    with tabs[2]:
        cols = st.columns(3)
        storage = cols[0].selectbox(
            "storage",
            list(STORAGE_PRESETS),
            index=list(STORAGE_PRESETS).index("hdd"),
            key=url_key("net_storage", list(STORAGE_PRESETS)),
            help="; ".join(f"{s.name}: {s.source}" for s in STORAGE_PRESETS.values()),
        )
        workers = cols[1].slider(
            "loader workers K",
            0,
            MAX_LOADERS,
            1,
            key=url_key("net_loaders", between=(0, MAX_LOADERS)),
            help="0: the trainer loads each batch itself, nothing overlaps.",
        )
        prefetch = cols[2].slider(
            "prefetch depth D (batches)",
            1,
            MAX_PREFETCH,
            2,
            key=url_key("net_prefetch", between=(1, MAX_PREFETCH)),
            help="How many batches the queue may hold ahead of the trainer.",
        )
        record = cached.loader_timeline(storage, workers, prefetch)
        metrics = st.columns(3)
        metrics[0].metric("step (steady state)", format_seconds(record["steady_step_s"]))
        metrics[1].metric("compute per step", format_seconds(record["compute_s"]))
        metrics[2].metric("waiting for data", f"{record['io_wait_s'] / record['run_s']:.0%} of the run")
        chart(viz.loader_gantt(record), "net_loader")
        t_w, busy, needed = record["worker_batch_s"], min(workers, prefetch), record["workers_to_keep_up"]
        caption(
            f"Batches of {record['batch_size']} samples of {format_bytes(record['sample_nbytes'])} (an "
            f"ImageNet JPEG), {format_seconds(record['decode_s'])} to decode each, for {record['model']} on a "
            f"{record['node']}, which computes for {format_seconds(record['compute_s'])} per step. A loader "
            f"worker needs t_w = {format_seconds(t_w)} per batch and the {storage} device "
            f"{format_seconds(record['device_batch_s'])} for its bytes. "
            + (
                "With no loader workers the trainer loads and then computes: step = t_w + compute. "
                if workers == 0
                else f"{busy} worker(s) load at once (min(K, D)): step = max(compute, t_w / {busy}, device). "
            )
            + (
                f"It takes {needed} workers and a queue at least as deep to keep up. "
                if needed
                else "No number of workers keeps up: the device itself is slower than compute. "
            )
            + "Red: the trainer waits for its batch."
        )
