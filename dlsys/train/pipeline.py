"""Pipeline schedules as data, and one rank program that runs any of them over a transformer.

A *schedule* says, for stage s of p stages, m micro-batches and v chunks per stage, the
ordered list of actions that stage runs in one step: ``F i`` (forward of micro-batch i),
``B i`` (its backward) and, for zero bubble, ``B i`` split in two, ``B`` the input gradient
(sent on at once: the previous stage waits for it) and ``W`` the weight gradient (nobody
waits for it, so it can fill a bubble). ``SCHEDULES`` maps a name to its action function,
its bubble's closed form, the activations a stage holds at its peak and its citation.

``pipeline_program`` executes any schedule's list: the transformer (``learn.transformer``) is
cut into p v contiguous chunks, virtual stage k = c p + s being chunk c of rank s
(Megatron's interleaved layout); forward sends activations to the rank of stage k + 1,
backward sends their gradients to stage k - 1, each tagged by micro-batch and chunk.

Costs, the zero-bubble paper's (Qi et al. 2024, section 2: T_F = T_B = T_W): with f a
chunk's forward FLOPs, F charges f, the input gradient B f, the weight gradient W f, and an
unsplit backward 2 f. The FLOPs are the chunk's transformer layers'; the embedding (a table
lookup) and the output layer run but are not charged, so every stage costs the same, as
the bubble formulas assume (Narayanan et al. 2021, section 2.2: t_f, t_b per stage).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, NamedTuple

import numpy as np

from ..comm.launch import launch
from ..learn import nn
from .transformer_config import TransformerConfig, loss_and_grad


class Action(NamedTuple):
    """One step of a stage: kind "F", "B" (the whole backward, or only the input gradient
    when the schedule splits it) or "W" (the weight gradient), of a micro-batch and a chunk."""

    kind: str
    micro_batch: int
    chunk: int = 0


def gpipe(stage: int, stages: int, micro_batches: int, chunks: int = 1) -> list[Action]:
    """GPipe (Huang et al. 2019, Figure 2c): every forward, then every backward, last
    micro-batch first (``model_parallel.pipeline_program`` runs it on an MLP too). Holds all
    m micro-batches."""
    return [Action("F", i) for i in range(micro_batches)] + [Action("B", i) for i in reversed(range(micro_batches))]


def one_f_one_b(stage: int, stages: int, micro_batches: int, chunks: int = 1) -> list[Action]:
    """1F1B, PipeDream-Flush (Narayanan et al. 2021, section 2.2, Figure 4 top; Megatron's
    ``forward_backward_pipelining_without_interleaving``): p - s - 1 warm-up forwards, then
    one forward and one backward in turn, then the cooldown's remaining backwards. Stage s
    holds at most p - s micro-batches' activations, GPipe's m."""
    # BEGIN SOLUTION pipeline_1f1b_order
    warmup = stages - stage - 1
    actions = [Action("F", i) for i in range(warmup)]
    for i in range(micro_batches - warmup):
        actions += [Action("F", warmup + i), Action("B", i)]
    actions += [Action("B", i) for i in range(micro_batches - warmup, micro_batches)]
    return actions
    # END SOLUTION


def interleaved_1f1b(stage: int, stages: int, micro_batches: int, chunks: int = 2) -> list[Action]:
    """Interleaved 1F1B (Narayanan et al. 2021, section 2.2, Figure 4 bottom), as Megatron's
    ``forward_backward_pipelining_with_interleaving`` (megatron/core/pipeline_parallel/
    schedules.py; the same order as zero-bubble's scheduler/vpp.py). The stage runs m v
    chunk-steps: step k is micro-batch (k // pv) p + k % p of chunk (k % pv) // p (backward:
    the chunks in reverse). Warm-up 2 (p - s - 1) + (v - 1) p forwards (all of them when
    m = p), then 1F1B, then the remaining backwards. Needs m divisible by p."""
    p, v, total = stages, chunks, micro_batches * chunks

    def step(k: int, forward: bool) -> tuple[int, int]:
        chunk = (k % (p * v)) // p
        return (k // (p * v)) * p + k % p, chunk if forward else v - 1 - chunk

    warmup = total if micro_batches == p else min(total, 2 * (p - stage - 1) + (v - 1) * p)
    actions = [Action("F", *step(k, True)) for k in range(warmup)]
    for k in range(total - warmup):
        actions += [Action("F", *step(warmup + k, True)), Action("B", *step(k, False))]
    return actions + [Action("B", *step(k, False)) for k in range(total - warmup, total)]


def zb_h1(stage: int, stages: int, micro_batches: int, chunks: int = 1) -> list[Action]:
    """ZB-H1, the handcrafted zero-bubble schedule (Qi et al. 2024, section 3.1, Figure 3
    top): 1F1B's order of F and B (B the input gradient only), stage s delaying its first
    s weight gradients W, which then follow each B one behind, the last s filling the
    cooldown's idle time. Holds p micro-batches (F to W) on every stage, 1F1B's peak."""
    warmup, done = stages - stage - 1, 0
    actions = [Action("F", i) for i in range(warmup)]
    for i in range(micro_batches - warmup):
        actions += [Action("F", warmup + i), Action("B", i)]
        if i >= stage:
            actions.append(Action("W", done))
            done += 1
    for i in range(micro_batches - warmup, micro_batches):
        actions += [Action("B", i), Action("W", done)]
        done += 1
    return actions + [Action("W", i) for i in range(done, micro_batches)]


@dataclass(frozen=True)
class Schedule:
    """A registry entry. ``bubble(p, m, v)``: idle time over the step time on every stage,
    with free communication and F : B : W = 1 : 1 : 1; ``in_flight(s, p, m, v)``: the most
    (micro-batch, chunk) activations stage s holds at once (a chunk's are 1/v of a stage's)."""

    name: str
    actions: Callable[[int, int, int, int], list[Action]]
    bubble: Callable[[int, int, int], float]
    bubble_latex: str
    in_flight: Callable[[int, int, int, int], int]
    split_backward: bool
    citation: str
    chunked: bool = False  # takes v >= 1 chunks per stage; the others run v = 1
    needs_stages: bool = False  # m >= p (1F1B's warm-up fits)
    needs_multiple: bool = False  # m divisible by p (Megatron's interleaving)


def fill_drain_bubble(p: int, m: int, v: int = 1) -> float:
    """The idle share of a step whose pipe fills and drains once (GPipe, Huang et al. 2019,
    section 2.3; 1F1B the same, Narayanan et al. 2021, section 2.2): (p - 1) / (m + p - 1)."""
    return (p - 1) / (m + p - 1)


def _interleaved_in_flight(s: int, p: int, m: int, v: int) -> int:
    return m * v if m == p else min(m * v, 2 * (p - s - 1) + (v - 1) * p + 1)


NARAYANAN = "Narayanan et al. 2021, Efficient Large-Scale Language Model Training on GPU Clusters Using Megatron-LM"
SCHEDULES: dict[str, Schedule] = {
    s.name: s
    for s in (
        Schedule(
            "gpipe",
            gpipe,
            fill_drain_bubble,
            r"\frac{p-1}{m+p-1}",
            lambda s, p, m, v: m,
            False,
            "Huang et al. 2019, GPipe, section 2.3 and Figure 2c",
        ),
        Schedule(
            "1f1b",
            one_f_one_b,
            fill_drain_bubble,
            r"\frac{p-1}{m+p-1}",
            lambda s, p, m, v: p - s,
            False,
            f"{NARAYANAN}, section 2.2, Figure 4 top",
            needs_stages=True,
        ),
        # Narayanan's bubble time fraction is idle over ideal time, (p-1)/(v m); over the step: (p-1)/(v m + p - 1)
        Schedule(
            "interleaved",
            interleaved_1f1b,
            lambda p, m, v: (p - 1) / (v * m + p - 1),
            r"\frac{p-1}{vm+p-1}",
            _interleaved_in_flight,
            False,
            f"{NARAYANAN}, section 2.2.1, Figure 4 bottom; Megatron-LM "
            "megatron/core/pipeline_parallel/schedules.py forward_backward_pipelining_with_interleaving",
            chunked=True,
            needs_multiple=True,
        ),
        # idle (p - 1)(T_F + T_B - T_W) = p - 1 units per stage over a step of 3 m + p - 1
        Schedule(
            "zb-h1",
            zb_h1,
            lambda p, m, v: (p - 1) / (3 * m + p - 1),
            r"\frac{p-1}{3m+p-1}",
            lambda s, p, m, v: p,
            True,
            "Qi et al. 2024, Zero Bubble Pipeline Parallelism (ICLR), section 3.1, Figure 3 top (ZB-H1)",
            needs_stages=True,
        ),
    )
}


def check_schedule(schedule: str, stages: int, micro_batches: int, chunks: int, layers: int) -> Schedule:
    """The schedule's entry, or a ValueError naming the argument and its accepted range."""
    if schedule not in SCHEDULES:
        raise ValueError(f"schedule must be one of {', '.join(SCHEDULES)}, got {schedule!r}")
    entry = SCHEDULES[schedule]
    if chunks < 1:
        raise ValueError(f"chunks (v) must be >= 1, got {chunks}")
    if chunks != 1 and not entry.chunked:
        raise ValueError(
            f"chunks (v) must be 1 for {schedule}: only interleaved runs several chunks a stage, got {chunks}"
        )
    if not 2 <= stages * chunks <= layers:
        raise ValueError(
            f"stages (pipeline degree) x chunks must be in 2..{layers} (the transformer's layers), "
            f"got {stages} x {chunks}"
        )
    if stages < 2:
        raise ValueError(f"stages must be >= 2 for a pipeline, got {stages}")
    if micro_batches < 1 or (entry.needs_stages and micro_batches < stages):
        low = stages if entry.needs_stages else 1
        raise ValueError(f"micro_batches must be >= {low} for {schedule} on {stages} stages, got {micro_batches}")
    if entry.needs_multiple and micro_batches % stages:
        raise ValueError(
            f"micro_batches must be a multiple of stages ({stages}) for {schedule} "
            f"(Megatron's interleaving), got {micro_batches}"
        )
    return entry


@dataclass(frozen=True)
class PipelineConfig(TransformerConfig):
    """The transformer (``TransformerConfig``) trained ``steps`` SGD steps, each on
    ``micro_batches`` x ``micro_batch_size`` random sequences, its layers pipelined over
    ``stages`` ranks by ``schedule``."""

    schedule: str = "1f1b"
    stages: int = 2
    micro_batches: int = 4
    chunks: int = 1
    micro_batch_size: int = 2

    def check(self) -> Schedule:
        """The schedule's entry, or a ValueError naming the argument and its accepted range."""
        self.check_model(("micro_batch_size",))
        return check_schedule(self.schedule, self.stages, self.micro_batches, self.chunks, self.layers)

    def batch(self, step: int, micro_batch: int) -> tuple[np.ndarray, np.ndarray]:
        """(tokens, next tokens) of one micro-batch, (micro_batch_size, seq_len) each."""
        rng = np.random.default_rng([self.seed, step, micro_batch])
        tokens = rng.integers(0, self.vocab, (self.micro_batch_size, self.seq_len + 1))
        return tokens[:, :-1].astype(self.dtype), tokens[:, 1:]


def chunk_layers(model: nn.Sequential, chunks: int) -> list[tuple[int, int]]:
    """The layers [start, stop) of each of ``chunks`` contiguous chunks: the transformer
    layers (attention and MLP block, two entries of ``model.layers``) as evenly as
    ``np.array_split`` cuts them; the embedding joins the first chunk, the final norm and
    the output layer the last."""
    blocks = (len(model.layers) - 3) // 2
    counts = [len(part) for part in np.array_split(np.arange(blocks), chunks)]
    stops = list(1 + 2 * np.cumsum(counts))
    stops[-1] = len(model.layers)
    return list(zip([0] + stops[:-1], stops))


def stage_chunks(model: nn.Sequential, stages: int, stage: int, chunks: int, micro_batch_size: int) -> dict:
    """Stage ``stage``'s chunks: chunk c -> (its virtual stage c p + s, the flat slice of its
    parameters, the forward FLOPs of one micro-batch through its transformer layers)."""
    ranges = chunk_layers(model, stages * chunks)
    offsets = {sl.layer: (sl.offset, sl.offset + sl.size) for sl in model.layer_slices()}
    flops = model.flops(micro_batch_size)
    mine = {}
    for c in range(chunks):
        start, stop = ranges[c * stages + stage]
        held = [offsets[i] for i in range(start, stop) if i in offsets]
        blocks = range(max(start, 1), min(stop, len(model.layers) - 2))  # the transformer layers
        mine[c] = (c * stages + stage, slice(held[0][0], held[-1][1]), sum(flops[i] for i in blocks))
    return mine


def tag(micro_batch: int, sender: int, virtual_stages: int, backward: bool) -> int:
    """Keeps every message of a step apart: one tag per micro-batch, sending virtual stage
    (which names the chunk) and direction."""
    return 2 * (micro_batch * virtual_stages + sender) + backward


def keep_activations(ledger, layers: list[nn.Layer], micro_batch: int, chunk: int) -> None:
    """Enter in the ledger what a forward of ``layers`` kept for backward (``Layer.saved``)."""
    nbytes = sum(a.nbytes for layer in layers for a in layer.saved().values())
    ledger.alloc("activations", nbytes, f"micro-batch {micro_batch} chunk {chunk}")


def label(action: Action, chunks: int) -> str:
    """'F3', or 'F3 chunk 1' when a stage runs several chunks."""
    kind, micro_batch, chunk = action
    return f"{kind}{micro_batch}" + (f" chunk {chunk}" if chunks > 1 else "")


def span(stage: int, action: Action, start_s: float, end_s: float) -> dict:
    """The record of one action: its stage, kind, micro-batch and chunk, and when it ran."""
    kind, micro_batch, chunk = action
    return {
        "stage": stage,
        "action": kind,
        "micro_batch": micro_batch,
        "chunk": chunk,
        "start_s": start_s,
        "end_s": end_s,
    }


def pipeline_program(comm, config: PipelineConfig) -> dict:
    """One stage of the pipeline: run the schedule's actions for this rank, ``steps`` times,
    then SGD on its chunks with the gradients summed over micro-batches in order 0..m-1.

    Returns its actions with their virtual start and end, its chunks' weights (by virtual
    stage), the loss of each step (last stage) and its activation bytes (ledger)."""
    entry = config.check()
    p, s, v, m = comm.size, comm.rank, config.chunks, config.micro_batches
    model, last = config.model(), p * v - 1
    ranges, mine = chunk_layers(model, p * v), stage_chunks(model, p, s, v, config.micro_batch_size)
    # each (chunk, micro-batch) keeps its own activations: a copy of the chunk's layers that
    # shares the parameter and gradient views but not what forward caches
    replicas = {
        (c, i): [layer.replica() for layer in model.layers[slice(*ranges[k])]]
        for c, (k, _, _) in mine.items()
        for i in range(m)
    }
    ledger, actions, losses, records = comm.memory, entry.actions(s, p, m, v), [], []
    for step in range(config.steps):
        grads, dlogits, loss = {}, {}, 0.0
        for action in actions:
            (kind, i, c), (k, flat, flops) = action, mine[action.chunk]
            layers, name = replicas[c, i], label(action, v)
            if kind == "F":
                tokens, targets = config.batch(step, i)
                x = tokens if k == 0 else comm.recv(source=(k - 1) % p, tag=tag(i, k - 1, p * v, False))
                begin = comm.clock
                for layer in layers:
                    x = layer.forward(x)
                comm.compute(flops=flops, label=name)
                keep_activations(ledger, layers, i, c)
                if k == last:
                    part, dlogits[i] = loss_and_grad(x, targets, m)
                    loss += part
                else:
                    comm.send(x, (k + 1) % p, tag(i, k, p * v, False), label=f"activations {name}")
            elif kind == "B":
                dy = dlogits.pop(i) if k == last else comm.recv(source=(k + 1) % p, tag=tag(i, k + 1, p * v, True))
                begin = comm.clock
                for layer in reversed(layers):
                    dy = layer.backward_input(dy) if entry.split_backward else layer.backward(dy)
                comm.compute(flops=flops if entry.split_backward else 2 * flops, label=name)
                if not entry.split_backward:
                    grads[c, i] = model.grads[flat].copy()
                    ledger.free(f"micro-batch {i} chunk {c}")
                if k > 0:
                    comm.send(dy, (k - 1) % p, tag(i, k, p * v, True), label=f"activation gradients {name}")
            else:  # W: nobody waits for it
                begin = comm.clock
                for layer in layers:
                    layer.backward_weights()
                comm.compute(flops=flops, label=name)
                grads[c, i] = model.grads[flat].copy()
                ledger.free(f"micro-batch {i} chunk {c}")
            records.append({"step": step, **span(s, action, begin, comm.clock)})
        for c, (_, flat, _) in mine.items():
            total = grads[c, 0]
            for i in range(1, m):  # micro-batch order, whatever the schedule's: the sum is the single rank's
                total += grads[c, i]
            model.params[flat] -= config.lr * total
        if s == p - 1:
            losses.append(loss)
    return {
        "actions": records,
        "losses": losses,
        "activation_peak_nbytes": ledger.peak_by_kind["activations"],
        "params": {k: model.params[flat].copy() for k, flat, _ in mine.values()},
    }


def single_rank_run(config: PipelineConfig) -> dict:
    """The reference: the whole transformer on one rank, the micro-batches one after the
    other, their gradients summed in order 0..m-1. Returns the weights after ``steps``
    (flat) and each step's loss."""
    config.check()
    model, m, losses = config.model(), config.micro_batches, []
    for step in range(config.steps):
        total, loss = np.zeros_like(model.grads), 0.0
        for i in range(m):
            tokens, targets = config.batch(step, i)
            part, dlogits = loss_and_grad(model.forward(tokens), targets, m)
            model.backward(dlogits)
            total = model.grads.copy() if i == 0 else total + model.grads
            loss += part
        model.params -= config.lr * total
        losses.append(loss)
    return {"params": model.params.copy(), "losses": losses}


def run(config: PipelineConfig, backend: str = "threads", **launch_options):
    """Check the configuration (before any rank starts), then run ``pipeline_program`` on
    ``config.stages`` ranks."""
    config.check()
    return launch(pipeline_program, config.stages, backend, args=(config,), **launch_options)


def gather_params(values: list[dict], config: PipelineConfig) -> np.ndarray:
    """The flat weights of the whole transformer from every stage's chunks."""
    p = config.stages
    return np.concatenate([values[k % p]["params"][k] for k in range(p * config.chunks)])
