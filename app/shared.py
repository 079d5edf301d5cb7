"""What the pages share: widget state in the URL, presenter mode, figures, the size and link
widgets, cached experiments, downloads.

Caching: every experiment is cached per argument tuple (``max_entries`` bounds memory);
records are cached without the ranks' real arrays (``experiments.without_values``).

Shareable state: a widget created with ``key=shared.url_key("coll_ranks")`` keeps its value
in the page URL (``?coll_ranks=16``): a link restores it, and every change updates the
address bar (``streamlit_app.py`` calls ``save_url`` after each run).
"""

import json

import plotly.graph_objects as go
import streamlit as st

from dlsys import experiments
from dlsys.experiments import wallclock
from dlsys.comm import BACKENDS
from dlsys.experiments import compression as ex_compression
from dlsys.experiments import network_stack as ex_network_stack
from dlsys.experiments import schedule as ex_schedule
from dlsys.experiments import taihulight as ex_taihulight
from dlsys.experiments.budget import PROCESS_RANK_BYTES
from dlsys.machine.net import LINK_PRESETS
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
         "compression": "🗜️", "large_batches": "📦", "performance": "⏱️", "schedule": "🚦", "network_stack": "🔌",
         "taihulight": "🏯"}
RULES = experiments.RULES


_URL_KEYS = "_url_keys"  # session state: the keys bound to the URL in this run
_URL_RESTORED = "_url_restored"  # session state: keys whose value came from the URL, not yet drawn
_URL_REJECTED = "_url_rejected"  # session state: a link's values a widget refused, to say so once
PRESENTER, FIGURE_FORMAT = "presenter", "figure_format"  # the sidebar's keys
FIGURE_FORMATS = ["png", "svg"]
DEFAULT_HEIGHT_PX = 450  # plotly's, for a figure that sets none


def _to_url(value) -> str:
    """Strings as they are (readable links), unless they would read back as another type."""
    if isinstance(value, str):
        try:
            json.loads(value)
        except ValueError:
            return value
    return json.dumps(value)


def _from_url(text: str):
    try:
        return json.loads(text)
    except ValueError:
        return text


def url_key(key: str) -> str:
    """``key``, bound to the URL's query parameter of the same name: on a session's first run
    the URL's value becomes the widget's (before the widget exists, as Streamlit requires),
    and ``save_url`` writes the widget's value back after each run. Use it as the widget's
    key: ``st.slider("ranks p", 2, 16, 8, key=shared.url_key("coll_ranks"))``."""
    if key not in st.session_state and key in st.query_params:
        st.session_state[key] = _from_url(st.query_params[key])
        st.session_state.setdefault(_URL_RESTORED, {})[key] = st.query_params[key]
    st.session_state.setdefault(_URL_KEYS, set()).add(key)
    return key


def reject_url_values(exc: Exception) -> None:
    """A page failed: if a link set some widget (a hand-edited ``?coll_ranks=many``), forget
    the link's values and run the page again with its defaults, saying so; else re-raise."""
    restored = st.session_state.pop(_URL_RESTORED, {})
    if not restored:
        raise exc
    for key in restored:
        st.session_state.pop(key, None)
        st.query_params.pop(key, None)
    st.session_state[_URL_REJECTED] = restored
    st.rerun()


def start_url_run() -> None:
    """Called before a page runs: only the keys it binds go into its URL."""
    st.session_state[_URL_KEYS] = set()
    if rejected := st.session_state.pop(_URL_REJECTED, None):
        st.warning("This link's " + ", ".join(f"{k}={v}" for k, v in rejected.items()) +
                   " could not be used; the page shows its defaults instead.")


def save_url() -> None:
    """The URL's query parameters := the values of this run's bound widgets. The values a
    link set have been drawn by now: a later failure is the page's, not the link's."""
    st.session_state.pop(_URL_RESTORED, None)
    values = {k: _to_url(st.session_state[k]) for k in st.session_state.get(_URL_KEYS, ()) if k in st.session_state}
    for k in [k for k in st.query_params if k not in values]:
        del st.query_params[k]
    for k, v in values.items():
        if st.query_params.get(k) != v:
            st.query_params[k] = v


# Streamlit sizes its text in rem: a larger root font enlarges every text, widget and margin.
PRESENTER_CSS = f"<style>html {{ font-size: {round(16 * style.PRESENTER_SCALE)}px; }}</style>"


def sidebar() -> None:
    """The sidebar every page shares: presenter mode and the figures' download format, both in the URL."""
    with st.sidebar:
        presenter = st.toggle("presenter", key=url_key(PRESENTER),
                              help="For a projector: larger text everywhere, larger figures.")
        st.radio("figure downloads", FIGURE_FORMATS, horizontal=True, key=url_key(FIGURE_FORMAT),
                 help="The camera button above each figure (hover over it) downloads it as PNG or SVG.")
        st.caption("The address bar holds this page's settings: copy it to share this exact view.")
    if presenter:
        st.html(PRESENTER_CSS)


def figure_config(key: str) -> dict:
    """plotly's modebar: its camera button downloads the figure, in the sidebar's format
    (PNG at twice the screen's pixels, or SVG for slides), named after the chart. Drawn by
    plotly.js in the browser: nothing is fetched, nothing new is installed."""
    fmt = st.session_state.get(FIGURE_FORMAT, FIGURE_FORMATS[0])
    return {"displaylogo": False, "toImageButtonOptions": {"format": fmt, "filename": key, "scale": 2 if fmt == "png" else 1}}


def chart(fig: go.Figure, key: str) -> None:
    """Draw a dlsys.viz figure in the "dlsys" template (dlsys/viz/style.py), whatever plotly's
    default was when it was built (Streamlit sets its own default when it is imported), and
    with theme=None, because Streamlit's theme would replace the template's projector-sized
    fonts with its own. In presenter mode, every text and the height grow by
    style.PRESENTER_SCALE."""
    if st.session_state.get(PRESENTER):
        fig.update_layout(template=style.PRESENTER_TEMPLATE,
                          height=round((fig.layout.height or DEFAULT_HEIGHT_PX) * style.PRESENTER_SCALE))
    else:
        fig.update_layout(template=style.TEMPLATE)
    st.plotly_chart(fig, key=key, theme=None, config=figure_config(key))


def size_slider(label: str, key: str, default: int = 64 * 2**20) -> int:
    """A size in bytes, 4 B to 4 GiB (costs are virtual, so huge sizes are cheap); in the URL."""
    return st.select_slider(label, SIZES, value=default, format_func=format_bytes, key=url_key(key),
                            help=f"Bytes per rank. Real arrays stay small (at most {format_bytes(MAX_MEMORY_BYTES)} "
                                 "for all ranks); the virtual time is computed for the size chosen here.")


def link_select(key: str, default: str = "tcp-10gbe") -> str:
    """A link preset name, in the URL; the help text cites the preset's source."""
    names = list(LINK_PRESETS)
    return st.selectbox("link", names, index=names.index(default), key=url_key(key),
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


def collective(name: str, algorithm: str, ranks: int, nbytes: int, link: str, backend: str = "threads") -> dict:
    """experiments.simulate_collective within MAX_MEMORY_BYTES, without the returned arrays;
    a size that cannot be scaled exactly for this algorithm stops the page with the reason."""
    try:
        return _collective(name, algorithm, ranks, nbytes, link, backend)
    except ValueError as exc:
        st.error(f"{exc}. Pick another size or rank count.")
        st.stop()


@st.cache_data(**CACHE)
def _collective(name: str, algorithm: str, ranks: int, nbytes: int, link: str, backend: str) -> dict:
    # the budget keeps the buffers small; rank processes' interpreters come on top of it
    interpreters = 0 if backend == "threads" else ranks * PROCESS_RANK_BYTES
    return experiments.without_values(experiments.simulate_collective(
        name, algorithm, ranks, nbytes, link, backend=backend, max_memory_bytes=MAX_MEMORY_BYTES + interpreters))


def backend_select(key: str) -> str:
    """The backends that can run here (mpi where mpi4py and mpirun are installed), in the URL."""
    names = [name for name, backend in BACKENDS.items() if backend.unavailable() is None]
    return st.selectbox("backend", names, key=url_key(key),
                        help="Where the ranks run: threads of this server, OS processes (shared memory), or MPI "
                             "processes started by mpirun (docs/mpi.md). Values and virtual times are the same on "
                             "each; only the wall time differs.")


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
    """wallclock.allreduce_bench: a real all-reduce between processes, vs memcpy (wall clock)."""
    return wallclock.allreduce_bench(ranks, nbytes, "ring", repeats=5, warmup=1, buffers=buffers,
                                 max_memory_bytes=REAL_DATA_PATH_BYTES)


@st.cache_data(max_entries=16, show_spinner="emulating...")
def emulation(ranks: int) -> dict:
    """wallclock.emulate: a ring all-reduce of AlexNet's gradient on ``ranks`` threads."""
    return wallclock.emulate("ring", ranks)


@st.cache_data(**CACHE)
def taihulight_sweep(nodes: tuple, contiguous: bool, topology: str) -> list:
    """experiments.taihulight.sweep of both designs for every model of the paper."""
    return [row for model in ex_taihulight.MODELS for design in ("ps", "ring")
            for row in ex_taihulight.sweep(model, design, nodes, contiguous, topology)]


@st.cache_data(**CACHE)
def taihulight_versus_mpi(model: str, nodes: tuple, topology: str) -> list:
    """experiments.taihulight.ring_vs_mpi for the paper's 60.97 MB and ``model``'s gradient."""
    sizes = (ex_taihulight.PAPER_MESSAGE_BYTES, ex_taihulight.model_gradient_nbytes(model))
    return ex_taihulight.ring_vs_mpi(sizes, nodes, topology)


@st.cache_data(**CACHE)
def taihulight_iteration(model: str, nodes: int, contiguous: bool, topology: str, batch: int) -> dict:
    """One traced iteration of each design: {design: record}, without the ranks' arrays."""
    return {design: {k: v for k, v in experiments.without_values(ex_taihulight.run_design(
        model, design, nodes, contiguous, topology, batch, record=True)).items() if k != "weights"}
        for design in ("ps", "ring")}


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


# one-way times measured here at these sizes through these transports (a few seconds at most)
STACK_SIZES = (8, 1024, 64 * 2**10, 2**20)
STACK_TRANSPORTS = ("pipe", "tcp-nodelay", "tcp")


@st.cache_data(max_entries=1, show_spinner="measuring one message through a pipe and TCP on this machine...")
def measured_stack() -> dict:
    return wallclock.stack_bench(STACK_SIZES, STACK_TRANSPORTS)


@st.cache_data(max_entries=64)
def loader_timeline(storage: str, workers: int, prefetch: int) -> dict:
    return ex_network_stack.loader_timeline(storage, workers, prefetch)
