"""A mixture-of-experts layer, on one rank and with its experts spread over ranks.

Router and gates (Fedus et al. 2021, "Switch Transformers", sections 2.1-2.2; Lepikhin et
al. 2020, "GShard", Algorithm 1): a token x gets router logits x W_r, probabilities
p = softmax(x W_r) over E experts, and goes to its top-k experts. k = 1 (Switch) weights
the expert's output by p_e; k = 2 (GShard) by p_e / (p_e1 + p_e2). Each expert (a small
MLP, relu(x W1 + b1) W2 + b2) takes at most

    capacity = ceil(capacity_factor * tokens * k / E)

tokens of a group (GShard's group: here the tokens of one rank). First choices are served
before second choices, tokens in order; a (token, choice) over capacity is dropped: it
contributes zero, so in a residual block x + MoE(x) the token passes through unchanged, as
Switch does ("passed directly to the next layer through the residual connection").

Expert parallelism (GShard section 2.2): E experts over ep ranks, E / ep each, expert e on
rank e // (E / ep); every rank routes its own tokens, then

    dispatch   all-to-all of the kept tokens' rows, grouped by destination rank and expert
    experts    each expert runs on the rows from every rank, source by source
    combine    all-to-all of the outputs back; y[t] += gate * output

(plus one small all-to-all of the per-expert counts first, so every receive knows its
size). Backward runs the same two all-to-alls in reverse; the router's gradient flows
through the gate values. The router is replicated: its gradient is summed over the ranks.
Expert rows enter each expert in the same order as in the single-rank layer run on the same
groups, so the two agree to rounding (tests/train/test_moe.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from math import ceil

import numpy as np

from ..collectives.dispatch import allreduce, alltoall, alltoallv
from ..comm.launch import launch


@dataclass(frozen=True)
class MoEConfig:
    """The layer's sizes and gating: d_model, the experts' hidden width d_ff, E experts,
    top-k, capacity factor; ``tokens`` per rank (a group) for the experiments."""

    d_model: int = 8
    d_ff: int = 16
    experts: int = 4
    top_k: int = 1
    capacity_factor: float = 1.25
    tokens: int = 16
    seed: int = 0


def check_moe(config: MoEConfig, ep: int = 1) -> None:
    """ValueError naming the argument, before any rank starts."""
    if not (isinstance(config.experts, int) and config.experts >= 1):
        raise ValueError(f"experts must be an int >= 1, got {config.experts!r}")
    if not (isinstance(config.top_k, int) and 1 <= config.top_k <= config.experts):
        raise ValueError(f"top_k must be in 1..experts = {config.experts}, got {config.top_k!r}")
    if not config.capacity_factor > 0:
        raise ValueError(f"capacity_factor must be > 0, got {config.capacity_factor!r}")
    if not (isinstance(ep, int) and ep >= 1 and config.experts % ep == 0):
        divisors = [k for k in range(1, config.experts + 1) if config.experts % k == 0]
        raise ValueError(f"ep must divide experts = {config.experts}: one of {divisors}, got {ep!r}")


def init_params(config: MoEConfig) -> dict:
    """Router (d, E) and the E experts' weights stacked along a first axis (float64)."""
    rng, d, f, e = np.random.default_rng(config.seed), config.d_model, config.d_ff, config.experts
    return {
        "router": rng.standard_normal((d, e)) / np.sqrt(d),
        "W1": rng.standard_normal((e, d, f)) * np.sqrt(2 / d),
        "b1": np.zeros((e, f)),
        "W2": rng.standard_normal((e, f, d)) / np.sqrt(f),
        "b2": np.zeros((e, d)),
    }


@dataclass
class Routing:
    """One group's routing: probabilities (T, E), chosen experts and gates (T, k), which
    choices were kept (T, k), the capacity, tokens wanting each expert and kept per expert."""

    probs: np.ndarray
    choice: np.ndarray
    gates: np.ndarray
    keep: np.ndarray
    capacity: int
    wanted: np.ndarray
    load: np.ndarray


def route(x: np.ndarray, router: np.ndarray, top_k: int, capacity_factor: float) -> Routing:
    """Softmax router, top-k, gates, and the capacity rule (module docstring)."""
    logits = x @ router
    probs = np.exp(logits - logits.max(axis=1, keepdims=True))
    probs /= probs.sum(axis=1, keepdims=True)
    tokens, experts = probs.shape
    choice = np.argsort(-probs, axis=1, kind="stable")[:, :top_k]
    top = np.take_along_axis(probs, choice, axis=1)
    gates = top / top.sum(axis=1, keepdims=True) if top_k > 1 else top
    capacity = ceil(capacity_factor * tokens * top_k / experts)
    keep, load = np.zeros(choice.shape, bool), np.zeros(experts, int)
    for c in range(top_k):  # first choices first; within a choice, tokens in order
        onehot = np.eye(experts, dtype=int)[choice[:, c]]
        before = load + np.cumsum(onehot, axis=0) - onehot  # this expert's tokens ahead of each
        keep[:, c] = before[np.arange(tokens), choice[:, c]] < capacity
        load = np.minimum(load + onehot.sum(axis=0), capacity)
    wanted = np.bincount(choice.ravel(), minlength=experts)
    return Routing(probs, choice, gates, keep, capacity, wanted, load)


def assignments(routing: Routing, experts: int) -> list:
    """Per expert, its kept (tokens, choices): first choices first, tokens in order."""
    c, t = np.nonzero(routing.keep.T)
    e = routing.choice[t, c]
    return [(t[e == i], c[e == i]) for i in range(experts)]


def router_backward(x, router, routing: Routing, dgates) -> tuple[np.ndarray, np.ndarray]:
    """(d router, dx) from the gates' gradient: through the top-k renormalisation (k > 1:
    g_i = p_i / S, dp_j = (dg_j - sum_i dg_i g_i) / S) and the softmax."""
    top = np.take_along_axis(routing.probs, routing.choice, axis=1)
    if routing.choice.shape[1] > 1:
        dtop = (dgates - (dgates * routing.gates).sum(axis=1, keepdims=True)) / top.sum(axis=1, keepdims=True)
    else:
        dtop = dgates
    dprobs = np.zeros_like(routing.probs)
    np.put_along_axis(dprobs, routing.choice, dtop, axis=1)
    dlogits = routing.probs * (dprobs - (dprobs * routing.probs).sum(axis=1, keepdims=True))
    return x.T @ dlogits, dlogits @ router.T


def expert_forward(params: dict, e: int, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Expert e (index into the stacked weights): relu(x W1 + b1) W2 + b2, and its hidden h."""
    h = np.maximum(x @ params["W1"][e] + params["b1"][e], 0.0)
    return h @ params["W2"][e] + params["b2"][e], h


def expert_backward(params: dict, grads: dict, e: int, x, h, dy) -> np.ndarray:
    """Writes expert e's weight gradients into ``grads``; returns dx."""
    grads["W2"][e], grads["b2"][e] = h.T @ dy, dy.sum(axis=0)
    dh = (dy @ params["W2"][e].T) * (h > 0)
    grads["W1"][e], grads["b1"][e] = x.T @ dh, dh.sum(axis=0)
    return dh @ params["W1"][e].T


def combine(tokens: int, d_model: int, pairs: list, outputs: list, gates) -> np.ndarray:
    """y[t] = sum over t's kept choices of gate * expert output (experts in order)."""
    y = np.zeros((tokens, d_model))
    for (t, c), out in zip(pairs, outputs):
        np.add.at(y, t, gates[t, c][:, None] * out)
    return y


def gate_grads(dy, pairs: list, outputs: list, gates) -> tuple[list, np.ndarray]:
    """Per expert, the gradient of its outputs (gate * dy[t]); and d gates (T, k)."""
    dgates = np.zeros(gates.shape)
    douts = []
    for (t, c), out in zip(pairs, outputs):
        dgates[t, c] = (dy[t] * out).sum(axis=1)
        douts.append(gates[t, c][:, None] * dy[t])
    return douts, dgates


class MoE:
    """The layer on one rank, all E experts here. ``forward(x, groups)`` routes each of
    ``groups`` consecutive chunks of the tokens with its own capacity (GShard's groups: the
    ranks of an expert-parallel run); backward(dy) fills ``grads`` and returns dx."""

    def __init__(self, params: dict, config: MoEConfig):
        check_moe(config)
        self.params, self.config = params, config
        self.grads = {name: np.zeros_like(w) for name, w in params.items()}

    def forward(self, x: np.ndarray, groups: int = 1) -> np.ndarray:
        cfg, e = self.config, self.config.experts
        self.x, self.chunks = x, np.array_split(np.arange(len(x)), groups)
        self.routings = [route(x[i], self.params["router"], cfg.top_k, cfg.capacity_factor) for i in self.chunks]
        self.pairs = [assignments(r, e) for r in self.routings]
        # expert j's rows: group by group, as the ranks' rows reach it in expert parallelism
        self.inputs = [
            np.concatenate([x[i][pairs[j][0]] for i, pairs in zip(self.chunks, self.pairs)]) for j in range(e)
        ]
        self.outs, self.hidden = zip(*(expert_forward(self.params, j, self.inputs[j]) for j in range(e)))
        y = np.zeros_like(x)
        for g, (i, r, pairs) in enumerate(zip(self.chunks, self.routings, self.pairs)):
            y[i] = combine(len(i), x.shape[1], pairs, [self.rows(j, g) for j in range(e)], r.gates)
        return y

    def rows(self, j: int, g: int, of=None) -> np.ndarray:
        """Group g's rows of expert j's outputs (or of ``of[j]``)."""
        counts = np.cumsum([0] + [len(p[j][0]) for p in self.pairs])
        return (self.outs if of is None else of)[j][counts[g] : counts[g + 1]]

    def backward(self, dy: np.ndarray) -> np.ndarray:
        e, dx = self.config.experts, np.zeros_like(self.x)
        self.grads["router"][...] = 0.0
        douts: list = [[] for _ in range(e)]
        for g, (i, r, pairs) in enumerate(zip(self.chunks, self.routings, self.pairs)):
            d, dgates = gate_grads(dy[i], pairs, [self.rows(j, g) for j in range(e)], r.gates)
            for j in range(e):
                douts[j].append(d[j])
            drouter, dx[i] = router_backward(self.x[i], self.params["router"], r, dgates)
            self.grads["router"] += drouter
        dins = [
            expert_backward(self.params, self.grads, j, self.inputs[j], self.hidden[j], np.concatenate(douts[j]))
            for j in range(e)
        ]
        for g, (i, pairs) in enumerate(zip(self.chunks, self.pairs)):
            for j in range(e):
                np.add.at(dx, i[pairs[j][0]], self.rows(j, g, dins))  # dx[i] would be a copy
        return dx


class ExpertParallelMoE:
    """The layer with E / ep experts on each of the ep ranks of ``comm`` (module docstring).
    ``params`` are this rank's: the router and its experts' stacked weights."""

    def __init__(self, comm, params: dict, config: MoEConfig):
        self.comm, self.params, self.config = comm, params, config
        self.local = config.experts // comm.size
        self.grads = {name: np.zeros_like(w) for name, w in params.items()}

    def exchange(self, rows_per_expert: list, send: np.ndarray, recv: np.ndarray) -> list:
        """All-to-all of rows (d_model wide): ``rows_per_expert[e]`` (all E experts, or my
        local ones per source) go out; ``send``/``recv`` are row counts (ranks, local experts)."""
        d = self.config.d_model
        flat = np.concatenate([r.ravel() for r in rows_per_expert])
        got = alltoallv(self.comm, flat, send.sum(axis=1) * d, recv.sum(axis=1) * d)
        return [piece.reshape(-1, d) for piece in got]

    def forward(self, x: np.ndarray) -> np.ndarray:
        cfg, p, k = self.config, self.comm.size, self.local
        self.x, self.routing = x, route(x, self.params["router"], cfg.top_k, cfg.capacity_factor)
        self.pairs = assignments(self.routing, cfg.experts)
        self.sent = np.array([len(t) for t, _ in self.pairs]).reshape(p, k)  # rows to each rank's experts
        self.got = alltoall(self.comm, self.sent).reshape(p, k)  # rows from each rank for my experts
        pieces = self.exchange([x[t] for t, _ in self.pairs], self.sent, self.got)  # dispatch
        self.inputs = [np.concatenate(self.split(pieces)[j]) for j in range(k)]
        self.outs, self.hidden = zip(*(expert_forward(self.params, j, self.inputs[j]) for j in range(k)))
        back = self.exchange(self.by_source(self.outs), self.got, self.sent)  # combine
        self.returned = [rows for piece, n in zip(back, self.sent) for rows in np.split(piece, np.cumsum(n)[:-1])]
        return combine(len(x), cfg.d_model, self.pairs, self.returned, self.routing.gates)

    def split(self, pieces: list) -> list:
        """Rows from each source cut per local expert: result[j][s]."""
        cut = [np.split(piece, np.cumsum(n)[:-1]) for piece, n in zip(pieces, self.got)]
        return [[cut[s][j] for s in range(self.comm.size)] for j in range(self.local)]

    def by_source(self, per_expert: list) -> list:
        """Local experts' rows (sources concatenated) regrouped source-major for the way back."""
        cut = [np.split(rows, np.cumsum(self.got[:, j])[:-1]) for j, rows in enumerate(per_expert)]
        return [cut[j][s] for s in range(self.comm.size) for j in range(self.local)]

    def backward(self, dy: np.ndarray) -> np.ndarray:
        douts, dgates = gate_grads(dy, self.pairs, self.returned, self.routing.gates)
        pieces = self.exchange(douts, self.sent, self.got)
        dins = [
            expert_backward(
                self.params, self.grads, j, self.inputs[j], self.hidden[j], np.concatenate(self.split(pieces)[j])
            )
            for j in range(self.local)
        ]
        back = self.exchange(self.by_source(dins), self.got, self.sent)
        dx_rows = [rows for piece, n in zip(back, self.sent) for rows in np.split(piece, np.cumsum(n)[:-1])]
        self.grads["router"][...], dx = router_backward(self.x, self.params["router"], self.routing, dgates)
        for (t, _), rows in zip(self.pairs, dx_rows):
            np.add.at(dx, t, rows)
        return dx


# --- training a few steps: expert parallel vs one rank ------------------------------------


def batch(config: MoEConfig, ranks: int) -> tuple[np.ndarray, np.ndarray]:
    """Seeded tokens and regression targets: ``tokens`` per rank, ``ranks`` groups."""
    rng = np.random.default_rng(config.seed + 1)
    shape = (ranks * config.tokens, config.d_model)
    return rng.standard_normal(shape), rng.standard_normal(shape)


def shard(params: dict, rank: int, ep: int) -> dict:
    """Rank ``rank``'s parameters: the router and experts rank E/ep .. (rank + 1) E/ep - 1."""
    k = params["W1"].shape[0] // ep
    return {n: w.copy() if n == "router" else w[rank * k : (rank + 1) * k].copy() for n, w in params.items()}


def ep_program(comm, config: MoEConfig, steps: int, lr: float) -> dict:
    """Rank program: ``steps`` of SGD on loss = mean over all tokens of |y - target|^2 / 2;
    returns the rank's parameters, first outputs, and per step its tokens per expert
    (wanted and kept) and dropped choices."""
    p = comm.size
    x, target = batch(config, p)
    mine = slice(comm.rank * config.tokens, (comm.rank + 1) * config.tokens)
    layer = ExpertParallelMoE(comm, shard(init_params(config), comm.rank, p), config)
    stats, first = [], None
    for _ in range(steps):
        y = layer.forward(x[mine])
        first = y if first is None else first
        dx = layer.backward((y - target[mine]) / len(x))
        layer.grads["router"] = allreduce(comm, layer.grads["router"])  # replicated: sum over the ranks
        for name, w in layer.params.items():
            w -= lr * layer.grads[name]
        r = layer.routing
        stats.append({"wanted": r.wanted, "kept": r.load, "dropped": int((~r.keep).sum()), "capacity": r.capacity})
    return {"params": layer.params, "y": first, "dx": dx, "stats": stats}


def train_expert_parallel(
    config: MoEConfig, ep: int, steps: int = 3, lr: float = 0.1, backend: str = "threads", link="rdma-edr"
):
    """``ep_program`` on ep ranks (checked before any rank starts); the LaunchResult."""
    check_moe(config, ep)
    return launch(ep_program, ep, backend, link=link, args=(config, steps, lr))


def train_single(config: MoEConfig, groups: int, steps: int = 3, lr: float = 0.1) -> dict:
    """The same steps on one rank with every expert (groups = the EP run's ranks)."""
    x, target = batch(config, groups)
    layer, first = MoE(init_params(config), config), None
    for _ in range(steps):
        y = layer.forward(x, groups)
        first = y if first is None else first
        dx = layer.backward((y - target) / len(x))
        for name, w in layer.params.items():
            w -= lr * layer.grads[name]
    return {"params": layer.params, "y": first, "dx": dx}
