"""Optimizers that update a flat parameter buffer in place, and learning-rate schedules.

Every optimizer holds the model's flat `params` and `grads` buffers (see dlsys.learn.nn) and
updates `params` with a few vectorized numpy operations over the whole buffer; the
layer-wise methods (LARS, LAMB) take the list of slices that cut it into layers.
`state_dict()` / `load_state_dict()` export and restore every bit of optimizer state,
so a checkpoint restores training exactly.

`lr` is a float or a schedule: a function of the step index (0 for the first step)
returning the learning rate, e.g. `goyal_schedule(...)`.
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

Schedule = Callable[[int], float]


def _check_range(name: str, value: float, low: float, high: float = float("inf")) -> None:
    """Raise ValueError unless low <= value < high."""
    if not low <= value < high:
        raise ValueError(f"{name} must be in [{low}, {high}), got {value!r}")


class Optimizer:
    """Shared bookkeeping: the flat buffers, the step counter and the state arrays.
    Layer-wise methods keep the per-layer trust ratios of their last step in
    ``trust_ratios`` (for plots; not state: the next step recomputes them)."""

    state_names: tuple[str, ...] = ()
    trust_ratios: np.ndarray | None = None

    def __init__(self, params: np.ndarray, grads: np.ndarray, lr: float | Schedule):
        if params.ndim != 1 or grads.shape != params.shape:
            raise ValueError(
                f"params and grads must be 1-D buffers of equal shape, got {params.shape} and {grads.shape}"
            )
        if not callable(lr) and not lr > 0:
            raise ValueError(f"lr must be > 0 or a schedule step -> lr, got {lr!r}")
        self.params, self.grads, self.lr = params, grads, lr
        self.steps = 0
        for name in self.state_names:
            setattr(self, name, np.zeros_like(params))

    def current_lr(self) -> float:
        """The learning rate the next step will use."""
        return float(self.lr(self.steps)) if callable(self.lr) else float(self.lr)

    def step(self) -> None:
        self._update(self.current_lr())
        self.steps += 1

    def _update(self, lr: float) -> None:
        """Apply one update with learning rate ``lr`` (each optimizer's own rule)."""
        raise NotImplementedError

    def state_dict(self) -> dict:
        """Copies of every state array and the step counter."""
        return {"steps": self.steps, **{n: getattr(self, n).copy() for n in self.state_names}}

    def load_state_dict(self, state: dict) -> None:
        """Restore a `state_dict()` exactly (bit for bit), writing into the existing arrays."""
        for name in self.state_names:
            if np.shape(state[name]) != self.params.shape:
                raise ValueError(f"state[{name!r}] must have shape {self.params.shape}, got {np.shape(state[name])}")
            getattr(self, name)[...] = state[name]
        self.steps = int(state["steps"])


class SGD(Optimizer):
    """SGD with momentum mu and weight decay wd (PyTorch's formulation):

    d = g + wd w;  v <- mu v + d;  w <- w - lr v   (Nesterov: w <- w - lr (d + mu v))."""

    state_names = ("velocity",)

    def __init__(self, params, grads, lr, momentum: float = 0.0, weight_decay: float = 0.0, nesterov: bool = False):
        super().__init__(params, grads, lr)
        _check_range("momentum", momentum, 0.0, 1.0)
        _check_range("weight_decay", weight_decay, 0.0)
        if nesterov and momentum == 0:
            raise ValueError("nesterov=True needs momentum > 0")
        self.momentum, self.weight_decay, self.nesterov = momentum, weight_decay, nesterov

    def _update(self, lr):
        d = self.grads + self.weight_decay * self.params
        self.velocity *= self.momentum
        self.velocity += d
        self.params -= lr * (d + self.momentum * self.velocity if self.nesterov else self.velocity)


class Adam(Optimizer):
    """Adam (Kingma & Ba 2015, Algorithm 1), with decoupled weight decay (AdamW, Loshchilov
    & Hutter 2019) when weight_decay > 0:

    m <- b1 m + (1-b1) g;  v <- b2 v + (1-b2) g^2;
    w <- w - lr (m / (1-b1^t) / (sqrt(v / (1-b2^t)) + eps) + wd w).
    Its state, m and v, is the 8 of ZeRO's K = 12 bytes per parameter (the other 4 are the
    fp32 master copy mixed precision keeps; dlsys.machine.memory)."""

    state_names = ("m", "v")
    m: np.ndarray  # made by Optimizer.__init__ from state_names
    v: np.ndarray

    def __init__(
        self, params, grads, lr, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8, weight_decay: float = 0.0
    ):
        super().__init__(params, grads, lr)
        _check_range("betas[0]", betas[0], 0.0, 1.0)
        _check_range("betas[1]", betas[1], 0.0, 1.0)
        _check_range("eps", eps, 0.0)
        _check_range("weight_decay", weight_decay, 0.0)
        self.betas, self.eps, self.weight_decay = betas, eps, weight_decay

    def _update(self, lr):
        self.params -= lr * self._direction()

    def _direction(self) -> np.ndarray:
        """Update the moments; return m_hat / (sqrt(v_hat) + eps) + wd w (LAMB scales it per layer)."""
        (b1, b2), t = self.betas, self.steps + 1
        self.m *= b1
        self.m += (1 - b1) * self.grads
        self.v *= b2
        self.v += (1 - b2) * self.grads**2
        step = (self.m / (1 - b1**t)) / (np.sqrt(self.v / (1 - b2**t)) + self.eps)
        return step + self.weight_decay * self.params


def _segments(slices: Sequence, size: int) -> tuple[np.ndarray, np.ndarray]:
    """Offsets and sizes of `slices` (objects with .offset and .size, e.g. from
    model.param_slices()), checked to tile the buffer [0, size) in order."""
    offsets = np.array([s.offset for s in slices], dtype=np.int64)
    sizes = np.array([s.size for s in slices], dtype=np.int64)
    if (
        len(slices) == 0
        or offsets[0] != 0
        or np.any(sizes < 1)
        or np.any(offsets[1:] != offsets[:-1] + sizes[:-1])
        or offsets[-1] + sizes[-1] != size
    ):
        raise ValueError(
            f"slices must tile the parameter buffer of {size} elements in order (pass model.param_slices())"
        )
    return offsets, sizes


def _layer_norms(x: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """||x restricted to each layer||_2, for all layers at once."""
    return np.sqrt(np.add.reduceat(x * x, offsets))


def trust_ratio(w_norm: np.ndarray, update_norm: np.ndarray, eta: float = 1.0) -> np.ndarray:
    """eta * ||w|| / ||update|| per layer, and 1 where either norm is 0 (as in TF's LARS):
    the guard that keeps a zero-initialised layer (a bias) or a layer without gradient
    from dividing by zero or freezing at a zero rate. Exercise ``lars_local_lr``."""
    # BEGIN SOLUTION lars_local_lr
    safe = (w_norm > 0) & (update_norm > 0)
    return np.where(safe, eta * w_norm / np.where(safe, update_norm, 1.0), 1.0)
    # END SOLUTION


class LARS(Optimizer):
    """Layer-wise Adaptive Rate Scaling (You, Gitman & Ginsburg 2017, Algorithm 1).

    Per layer l: local_lr = eta ||w_l|| / (||g_l|| + beta ||w_l||)  (trust coefficient eta,
    weight decay beta);  v <- m v + lr * local_lr * (g + beta w);  w <- w - v."""

    state_names = ("velocity",)

    def __init__(
        self,
        params,
        grads,
        lr,
        slices: Sequence,
        momentum: float = 0.9,
        weight_decay: float = 5e-4,
        trust_coefficient: float = 0.001,
    ):
        super().__init__(params, grads, lr)
        self.offsets, self.sizes = _segments(slices, params.size)
        _check_range("momentum", momentum, 0.0, 1.0)
        _check_range("weight_decay", weight_decay, 0.0)
        _check_range("trust_coefficient", trust_coefficient, 1e-12)
        self.momentum, self.weight_decay, self.eta = momentum, weight_decay, trust_coefficient

    def local_lr(self) -> np.ndarray:
        """The trust ratio of every layer for the current params and grads:
        eta ||w_l|| / (||g_l|| + beta ||w_l||), guarded by ``trust_ratio``. Exercise
        ``lars_local_lr`` (``_layer_norms(x, self.offsets)`` gives every layer's ||x||)."""
        # BEGIN SOLUTION lars_local_lr
        w_norm = _layer_norms(self.params, self.offsets)
        g_norm = _layer_norms(self.grads, self.offsets)
        return trust_ratio(w_norm, g_norm + self.weight_decay * w_norm, self.eta)
        # END SOLUTION

    def _update(self, lr):
        self.trust_ratios = self.local_lr()
        scale = np.repeat(lr * self.trust_ratios, self.sizes).astype(self.params.dtype)
        self.velocity *= self.momentum
        self.velocity += scale * (self.grads + self.weight_decay * self.params)
        self.params -= self.velocity


class LAMB(Adam):
    """Layer-wise Adaptive Moments for Batch training (You et al. 2019, Algorithm 2).

    m <- b1 m + (1-b1) g;  v <- b2 v + (1-b2) g^2;  r = m_hat / (sqrt(v_hat) + eps) with
    bias corrections m_hat = m / (1-b1^t), v_hat = v / (1-b2^t);  then per layer l:
    w_l <- w_l - lr * ||w_l|| / ||r_l + lambda w_l|| * (r_l + lambda w_l)   (phi = identity)."""

    def __init__(
        self,
        params,
        grads,
        lr,
        slices: Sequence,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-6,
        weight_decay: float = 0.01,
    ):
        super().__init__(params, grads, lr, betas, eps, weight_decay)
        self.offsets, self.sizes = _segments(slices, params.size)

    def _update(self, lr):
        u = self._direction()  # Adam's r + lambda w
        self.trust_ratios = trust_ratio(_layer_norms(self.params, self.offsets), _layer_norms(u, self.offsets))
        self.params -= np.repeat(lr * self.trust_ratios, self.sizes).astype(self.params.dtype) * u


def scale_lr(base_lr: float, batch_size: int, base_batch_size: int, rule: str = "linear") -> float:
    """Learning rate for a k = batch_size / base_batch_size times larger batch:
    linear scaling rule (Goyal et al. 2017) base_lr * k, or base_lr * sqrt(k)."""
    if rule not in ("linear", "sqrt"):
        raise ValueError(f"rule must be 'linear' or 'sqrt', got {rule!r}")
    k = batch_size / base_batch_size
    return base_lr * (k if rule == "linear" else np.sqrt(k))


def warmup_lr(step: int, warmup_steps: int, start_lr: float, target_lr: float) -> float:
    """Gradual warm-up (Goyal et al. 2017): linear from start_lr at step 0 to target_lr at
    step warmup_steps, then constant target_lr. Exercise ``goyal_schedule``."""
    # BEGIN SOLUTION goyal_schedule
    if step >= warmup_steps:
        return target_lr
    return start_lr + (target_lr - start_lr) * step / warmup_steps
    # END SOLUTION


def step_decay_lr(step: int, lr: float, milestones: Sequence[int], gamma: float = 0.1) -> float:
    """lr * gamma^(number of milestones <= step), e.g. divide by 10 at epochs 30, 60, 80.
    Exercise ``goyal_schedule``."""
    # BEGIN SOLUTION goyal_schedule
    return lr * gamma ** sum(step >= m for m in milestones)
    # END SOLUTION


def goyal_schedule(
    base_lr: float, k: float, warmup_steps: int, milestones: Sequence[int] = (), gamma: float = 0.1
) -> Schedule:
    """Goyal et al. 2017's recipe for k times more workers (k times the batch): warm up
    linearly from base_lr to k * base_lr over warmup_steps, then step decay. Exercise
    ``goyal_schedule``."""
    # BEGIN SOLUTION goyal_schedule
    return lambda step: step_decay_lr(step, warmup_lr(step, warmup_steps, base_lr, k * base_lr), milestones, gamma)
    # END SOLUTION
