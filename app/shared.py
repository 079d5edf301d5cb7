"""What the pages share: the size and link widgets, cached experiments, downloads.

Caching: every experiment is cached per argument tuple (``max_entries`` bounds memory);
records are cached without the ranks' real arrays (``experiments.without_values``).
"""

import json

import plotly.graph_objects as go
import streamlit as st

from dlsys import bench, experiments
from dlsys.experiments import compression as ex_compression
from dlsys.experiments import schedule as ex_schedule
from dlsys.net import LINK_PRESETS
from dlsys.train import TrainConfig
from dlsys.viz import style
from dlsys.viz.units import format_bytes

# real buffers of all ranks together (experiments.plan_buffers): pages stay quick; larger
# sizes run on real elements that each stand for several, charged at the logical size
MAX_MEMORY_BYTES = 16 * 2**20
SIZES = [4, 64, 2**10, 16 * 2**10, 256 * 2**10, 2**20, 4 * 2**20, 16 * 2**20, 64 * 2**20, 256 * 2**20, 2**30, 4 * 2**30]
CACHE = dict(max_entries=64, show_spinner="running the ranks...")
TRAIN_WORKERS = 4
REAL_DATA_PATH_BYTES = 2 * 2**30  # real bytes, not scalable: the Measure tab's 4 processes x 64 MiB need 1.7 GiB
# Page icons are emoji, not ":material/..." names: for those Streamlit's page (its favicon)
# fetches an SVG from fonts.gstatic.com, which fails in a classroom without internet
# (tests/test_browser.py checks that no request leaves the machine).
ICONS = {"home": "🏠", "collectives": "🔁", "cost_model": "📈", "ps_vs_ring": "🕸️", "training": "🧠",
         "compression": "🗜️", "large_batches": "📦", "performance": "⏱️", "schedule": "🚦"}
RULES = experiments.RULES


def chart(fig: go.Figure, key: str) -> None:
    """Draw a dlsys.viz figure in the "dlsys" template (dlsys/viz/style.py), whatever plotly's
    default was when it was built (Streamlit sets its own default when it is imported), and
    with theme=None, because Streamlit's theme would replace the template's projector-sized
    fonts with its own."""
    st.plotly_chart(fig.update_layout(template=style.TEMPLATE), key=key, theme=None)


def size_slider(label: str, key: str, default: int = 64 * 2**20) -> int:
    """A size in bytes, 4 B to 4 GiB (costs are virtual, so huge sizes are cheap)."""
    return st.select_slider(label, SIZES, value=default, format_func=format_bytes, key=key,
                            help=f"Bytes per rank. Real arrays stay small (at most {format_bytes(MAX_MEMORY_BYTES)} "
                                 "for all ranks); the virtual time is computed for the size chosen here.")


def link_select(key: str, default: str = "tcp-10gbe") -> str:
    """A link preset name; the help text cites the preset's source."""
    names = list(LINK_PRESETS)
    return st.selectbox("link", names, index=names.index(default), key=key,
                        help="; ".join(f"{n}: {l.source}" for n, l in LINK_PRESETS.items()))


def real_data_note(record: dict) -> str:
    """An honest caption: what really ran, and how the virtual time was charged."""
    real = format_bytes(record["real_nbytes"])
    low, high = record["scale_min"], record["scale_max"]
    if high == 1:
        return f"Real run: {real} per rank of real float32 data moved between {record['ranks']} ranks (threads)."
    stands = f"{low:,}" if low == high else f"{low:,} to {high:,} (one element per ring block)"
    return (f"Real run on {real} per rank of real float32 data ({record['ranks']} ranks, threads); every real "
            f"element stands for {stands} elements, and every message is charged at its logical size, so the "
            f"virtual times and byte counts are those of {format_bytes(record['nbytes'])} (exact).")


def collective(name: str, algorithm: str, ranks: int, nbytes: int, link: str) -> dict:
    """experiments.simulate_collective within MAX_MEMORY_BYTES, without the returned arrays;
    a size that cannot be scaled exactly for this algorithm stops the page with the reason."""
    try:
        return _collective(name, algorithm, ranks, nbytes, link)
    except ValueError as exc:
        st.error(f"{exc}. Pick another size or rank count.")
        st.stop()


@st.cache_data(**CACHE)
def _collective(name: str, algorithm: str, ranks: int, nbytes: int, link: str) -> dict:
    return experiments.without_values(experiments.simulate_collective(
        name, algorithm, ranks, nbytes, link, max_memory_bytes=MAX_MEMORY_BYTES))


@st.cache_data(**CACHE)
def ring_steps(ranks: int, link: str) -> list:
    """experiments.ring_allreduce_steps: every rank's chunks after every ring step."""
    return experiments.ring_allreduce_steps(ranks, link)


@st.cache_data(**CACHE)
def ps_vs_ring(workers: int, nbytes: int, link: str) -> dict:
    """experiments.ps_vs_ring within MAX_MEMORY_BYTES, without the returned arrays."""
    records = experiments.ps_vs_ring(workers, nbytes, link, max_memory_bytes=MAX_MEMORY_BYTES)
    return {name: experiments.without_values(r) for name, r in records.items()}


@st.cache_data(**CACHE)
def ps_vs_ring_scaling(nbytes: int, link: str) -> list:
    """experiments.ps_vs_ring_scaling for 2 to 32 workers."""
    return experiments.ps_vs_ring_scaling((2, 4, 8, 16, 32), nbytes, link, MAX_MEMORY_BYTES)


@st.cache_data(**CACHE)
def emulated_allreduce_costs(link: str, ranks: int) -> list:
    """experiments.emulated_allreduce_costs: every all-reduce algorithm really run."""
    return experiments.emulated_allreduce_costs(link, ranks, max_memory_bytes=MAX_MEMORY_BYTES)


@st.cache_data(max_entries=48, show_spinner="training on real ranks...")
def training(strategy: str, epochs: int, link: str, straggler_factor: float = 1.0, batch_size: int = 32,
             lr: float = 0.1, **options) -> dict:
    """experiments.train of the digits MLP on TRAIN_WORKERS workers (threads), the last one
    ``straggler_factor`` times slower; cached without the weights and the ranks' values."""
    straggler = (TRAIN_WORKERS - 1, straggler_factor) if straggler_factor > 1 else None
    record = experiments.train(strategy, TrainConfig(epochs=epochs, batch_size=batch_size, lr=lr), TRAIN_WORKERS,
                               link=link, straggler=straggler, **options)
    return {k: v for k, v in experiments.without_values(record).items() if k != "params"}


@st.cache_data(max_entries=1, show_spinner="reading the large-batch study...")
def large_batch_study() -> dict | None:
    """The default large-batch study from its cache (results/large_batch.json), None if
    missing or stale: real training takes minutes, so the page never starts it."""
    return experiments.load_study()


@st.cache_data(max_entries=16)
def lr_schedules(batch: int) -> list:
    """experiments.lr_schedules of the default study at global ``batch``."""
    return experiments.lr_schedules(experiments.Study(), batch)


@st.cache_data(max_entries=32, show_spinner="running real rank processes...")
def real_allreduce(ranks: int, nbytes: int, buffers: str) -> dict:
    """bench.allreduce_bench: a real all-reduce between processes, vs memcpy (wall clock)."""
    return bench.allreduce_bench(ranks, nbytes, "ring", repeats=5, warmup=1, buffers=buffers,
                                 max_memory_bytes=REAL_DATA_PATH_BYTES)


@st.cache_data(max_entries=16, show_spinner="emulating...")
def emulation(ranks: int) -> dict:
    """bench.emulate: a ring all-reduce of AlexNet's gradient on ``ranks`` threads."""
    return bench.emulate("ring", ranks)


def summary_row(record: dict) -> dict:
    """The record's scalar fields (no trace, no per-rank lists): one CSV row."""
    return {k: v for k, v in record.items() if isinstance(v, (int, float, str))}


def downloads(trace, records: list[dict], name: str) -> None:
    """Download buttons: the trace as Chrome trace JSON (Perfetto), its messages and spans
    as CSV, and the experiment's records as CSV. Files are built only when clicked."""
    spans, messages = trace.records()
    cols = st.columns(4)
    cols[0].download_button("Chrome trace JSON (Perfetto)", lambda: json.dumps(trace.to_chrome()),
                            f"{name}.trace.json", "application/json", on_click="ignore",
                            key=f"{name}-chrome", help="Open in https://ui.perfetto.dev or chrome://tracing (pid = rank, times in µs).")
    cols[1].download_button("messages CSV", lambda: experiments.to_csv(messages), f"{name}.messages.csv",
                            "text/csv", on_click="ignore", key=f"{name}-messages")
    cols[2].download_button("spans CSV", lambda: experiments.to_csv(spans), f"{name}.spans.csv",
                            "text/csv", on_click="ignore", key=f"{name}-spans")
    cols[3].download_button("records CSV", lambda: experiments.to_csv(records), f"{name}.records.csv",
                            "text/csv", on_click="ignore", key=f"{name}-records")


@st.cache_data(max_entries=32, show_spinner="compressing...")
def compression(method: str, options: tuple) -> dict:
    """The compression page's quick experiments for one method: one gradient before and
    after, the residual over steps, one compressed all-reduce (its trace), bytes per layer."""
    opts = dict(options)
    exchange = ex_compression.one_exchange(method, opts, TRAIN_WORKERS)
    return {"once": ex_compression.compress_once(method, opts),
            "residual": ex_compression.residual_history(method, opts),
            "trace": exchange.trace}


@st.cache_data(max_entries=32, show_spinner="training with and without compression on both links...")
def compression_split(method: str, options: tuple) -> list:
    return ex_compression.iteration_split(method, dict(options), workers=TRAIN_WORKERS)


@st.cache_data(max_entries=64)
def compression_model(model: str, method: str, options: tuple) -> dict:
    return ex_compression.model_bytes(model, method, dict(options))


@st.cache_data(max_entries=4, show_spinner="training the digits MLP with every method (about 20 s)...")
def compression_pareto(fresh: bool) -> list:
    """The Pareto rows: the cached file, or (``fresh``) a new run of every method."""
    return ex_compression.pareto(workers=TRAIN_WORKERS) if fresh else ex_compression.cached_pareto()


# Scheduling: ``options`` is a tuple of (policy, ((option, value), ...)) pairs, hashable for the cache.
SCHEDULE_BANDWIDTHS = ("1Gbps", "3Gbps", "10Gbps", "25Gbps", "100Gbps")


@st.cache_data(max_entries=32, show_spinner="scheduling every policy...")
def schedule_policies(policies: tuple, model: str, workers: int, link: str, options: tuple) -> list:
    """experiments.schedule.compare_policies: worker 0's lanes under each policy."""
    return ex_schedule.compare_policies(policies, model, workers, link, options={p: dict(o) for p, o in options})


@st.cache_data(max_entries=16, show_spinner="every policy at every bandwidth...")
def schedule_bandwidths(policies: tuple, model: str, workers: int, options: tuple) -> list:
    """experiments.schedule.bandwidth_sweep over SCHEDULE_BANDWIDTHS."""
    return ex_schedule.bandwidth_sweep(model, SCHEDULE_BANDWIDTHS, list(policies), workers,
                                       options={p: dict(o) for p, o in options})


@st.cache_data(max_entries=32, show_spinner="sweeping the option...")
def schedule_option(option: str, values: tuple, model: str, workers: int, link: str, options: tuple) -> list:
    """experiments.schedule.option_sweep of one option, the policy's other options as chosen."""
    others = {k: v for k, v in dict(options).get(ex_schedule.KNOBS[option], ()) if k != option}
    return ex_schedule.option_sweep(option, values, model, workers, link, options=others)
