"""A trace's messages as the animation shows them: each message's life (sender's copy, wire,
receiver's copy), its colour (a phase's steps light to dark, else one colour per label) and
its step in words ("reduce-scatter step 3 of 7")."""

from __future__ import annotations

import numpy as np
from plotly.colors import sample_colorscale

# a phase's steps shade one sequential scale light -> dark; messages outside a collective
# (a parameter server's push and pull) take one solid colour per label. Neither uses the
# blue, orange or green that outline a computing, sending or receiving node (style.CONCEPT_COLOURS).
PHASE_SCALES = [
    "Purp",
    "RdPu",
    "Burg",
    "Magenta",
    "Reds",
]  # saturated even at their light ends: a projector washes pale ones out
LABEL_COLORS = ["#7570b3", "#e7298a", "#a6761d", "#e6ab02", "#666666", "#1b9e77", "#d95f02", "#66a61e"]


def message_lives(trace) -> np.ndarray:
    """(messages, 6) virtual times of each message's life: its sender's send span (start,
    end), departure, arrival, its receiver's recv span (start, end).

    A trace does not link spans to messages, but the clock's rules do: a rank's sends
    depart in program order, each after its own send span, and a rank's receives are
    listed in program order, each recv span starting at or after its arrival. A message
    whose span was not recorded (zero overhead, or cut off by ``first_seconds``) gets a
    zero-length phase there."""
    lives = np.array(
        [[m.depart_s, m.depart_s, m.depart_s, m.arrive_s, m.arrive_s, m.arrive_s] for m in trace.messages], dtype=float
    ).reshape(-1, 6)
    spans = {
        (r, kind): sorted((s for s in trace.spans if s.rank == r and s.kind == kind), key=lambda s: s.start_s)
        for r in range(trace.world_size)
        for kind in ("send", "recv")
    }
    sent = sorted(range(len(trace.messages)), key=lambda i: trace.messages[i].depart_s)
    for side, order, fits, cols in (
        ("send", sent, lambda s, m: s.end_s <= m.depart_s, (0, 1)),
        ("recv", range(len(trace.messages)), lambda s, m: s.start_s >= m.arrive_s, (4, 5)),
    ):
        nxt = {}
        for i in order:
            m = trace.messages[i]
            rank = m.src if side == "send" else m.dst
            queue, k = spans[rank, side], nxt.get(rank, 0)
            if k < len(queue) and fits(queue[k], m):
                lives[i, cols[0]], lives[i, cols[1]] = queue[k].start_s, queue[k].end_s
                nxt[rank] = k + 1
    return lives


def step_groups(messages) -> tuple[list, dict]:
    """Each message's colour group and, per group, its steps in the order they start: a
    collective's phase (its steps in ``Message.step``), else the message's label; groups in
    order of first departure. Steps are counted in time, not by their number: a binomial
    broadcast numbers its steps by the subtree's bit, largest (first) down, yet its first
    step is step 1 to the class."""
    keys = [m.phase or m.label or "message" for m in messages]
    steps: dict = {}
    for key, m in sorted(zip(keys, messages), key=lambda km: km[1].depart_s):
        order = steps.setdefault(key, [])
        step = m.step if m.phase else -1
        if step not in order:
            order.append(step)
    return keys, steps


def message_colours(messages) -> tuple[list[str], dict]:
    """A colour per message (phase and step: a phase's scale, light to dark by step; else
    one colour per label) and a legend: group -> (colour, description)."""
    keys, steps = step_groups(messages)
    phased = [k for k in steps if steps[k] != [-1]]
    shade = {}
    for g, key in enumerate(phased):
        n = len(steps[key])
        shades = sample_colorscale(
            PHASE_SCALES[g % len(PHASE_SCALES)], [0.45 + 0.55 * i / max(n - 1, 1) for i in range(n)]
        )
        shade.update({(key, s): c for s, c in zip(steps[key], shades)})
    solid = {k: LABEL_COLORS[i % len(LABEL_COLORS)] for i, k in enumerate(k for k in steps if k not in phased)}
    colours = [shade[key, m.step] if (key, m.step) in shade else solid[key] for key, m in zip(keys, messages)]
    legend = {
        k: (shade[k, steps[k][len(steps[k]) // 2]], f"{k}: steps 1 → {len(steps[k])}, light → dark") for k in phased
    }
    legend.update({k: (c, k) for k, c in solid.items()})
    return colours, legend


def step_key(m):
    """The step a message belongs to: a collective's (phase, step), else its label."""
    return (m.phase, m.step) if m.phase else m.label


def describe(m, steps: dict) -> str:
    """A message's step in words, from its structured fields: 'reduce-scatter step 3 of 7'
    (counted 1, 2, ... in the order the phase's steps start, as said in class; ``steps``
    from ``step_groups``), else its label."""
    if not m.phase:
        return m.label or "message"
    block = f", block {m.block}" if m.block >= 0 else ""
    return f"{m.phase} step {steps[m.phase].index(m.step) + 1} of {len(steps[m.phase])}{block}"
