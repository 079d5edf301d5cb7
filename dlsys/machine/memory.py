"""Memory per rank in closed form: the bytes a rank holds, by kind, for a parallel layout.

Kinds (``KINDS``): parameters, gradients, optimizer state, activations, communication
buffers. A parameter costs, per element (Rajbhandari et al. 2020, "ZeRO", section 3.1):

    mixed precision:  2 (fp16 weights) + 2 (fp16 gradients) + K (fp32 master copy and state)
    fp32:             4 (weights)      + 4 (gradients)      + K' (state only)

with K = 12 for Adam (master weights, momentum, variance: 4 + 4 + 4), 8 for SGD with
momentum, 4 for plain SGD, and K' = K - 4 (no master copy). With tensor parallelism of
degree t each rank holds 1/t of every weight matrix (Megatron-LM, Shoeybi et al. 2019,
section 3); we divide the whole of Psi by t (layer norms and biases, replicated in
Megatron, are a fraction 1/h of a layer and are ignored). ZeRO then shards over the
N_d = ranks / t data-parallel copies (ZeRO Figure 1, section 5):

    stage 0 (DDP):  (2 + 2 + K) Psi              stage 2:  2 Psi + (2 + K) Psi / N_d
    stage 1:        (2 + 2) Psi + K Psi / N_d     stage 3:  (2 + 2 + K) Psi / N_d

Figure 1 (Psi = 7.5e9, N_d = 64, K = 12) reads 120, 31.4, 16.6 and 1.9 GB: ``zero_figure1``.
FSDP is stage 3 whose parameters are gathered one unit at a time: the communication
buffers then hold that unit's full weights (twice with prefetch: the next unit arrives
while this one computes) and its full gradients before the reduce-scatter.
DeepSpeed's estimator (deepspeed/runtime/zero/stage3.py,
``estimate_zero3_model_states_mem_needs``) adds the same term, 4 bytes per parameter of the
largest layer; its ZeRO-2 estimate (stage_1_and_2.py) keeps 4 Psi + 16 Psi / N_d on the GPU
(fp16 gradients unsharded, an fp32 gradient shard), more than the paper's idealised 2 Psi.

Activations of a transformer layer (Korthikanti et al. 2022, "Reducing Activation
Recomputation in Large Transformer Models", section 4, Table 2), s = sequence, b = batch,
h = hidden, a = heads, t = tensor-parallel degree, in bytes with 2-byte activations and
1-byte dropout masks:

    no parallelism           s b h (34 + 5 a s / h)
    tensor parallel          s b h (10 + 24 / t + 5 a s / (h t))
    tensor + sequence par.   s b h (34 / t + 5 a s / (h t))
    selective recomputation  the a s^2 b term (softmax, its dropout) is recomputed: drop it
    full recomputation       2 s b h (only each layer's input; / t with sequence parallel)

``activation_bytes`` derives these from the tensors counted in section 4.1, so other
element sizes and models without dropout follow from the same list.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

KINDS = ("parameters", "gradients", "optimizer", "activations", "buffers")
OPTIMIZERS = ("adam", "sgd", "sgd-plain")  # sgd = with momentum
PRECISIONS = ("mixed", "fp32")
RECOMPUTE = ("none", "selective", "full")
# fp32 optimizer state per parameter beyond the weights: Adam's m and v; SGD's momentum
_STATE_B = {"adam": 8, "sgd": 4, "sgd-plain": 0}


def bytes_per_param(optimizer: str = "adam", precision: str = "mixed") -> tuple[int, int, int]:
    """(weights, gradients, optimizer state) bytes per parameter: (2, 2, K) mixed, (4, 4, K') fp32."""
    if optimizer not in OPTIMIZERS:
        raise ValueError(f"optimizer must be one of {', '.join(OPTIMIZERS)}, got {optimizer!r}")
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
    if precision == "mixed":
        return 2, 2, 4 + _STATE_B[optimizer]  # the fp32 master copy is optimizer state
    return 4, 4, _STATE_B[optimizer]


class Transformer(NamedTuple):
    """The shapes Korthikanti's activation formula takes: per rank micro-batch."""

    layers: int
    hidden: int
    heads: int
    seq_len: int
    batch: int


def activation_bytes(
    shape: Transformer,
    tp: int = 1,
    sequence_parallel: bool = False,
    recompute: str = "none",
    element_nbytes: int = 2,
    dropout: bool = True,
) -> int:
    """Bytes of activations a rank keeps for backward over the transformer's layers.

    Korthikanti et al. section 4.1 counts, per layer, in elements of s b h (or a s^2 b):
    attention: QKV input 1, Q and K 2, softmax output a s^2 b, V 1, projection input 1;
    MLP: fc1 input 1, GELU input 4, GELU output 4; two layer-norm inputs 2: 16 s b h and
    a s^2 b elements. Dropout adds a 1-byte mask of s b h after attention and after the
    MLP and, on the attention probabilities, a mask and a second copy (a s^2 b (1 + e)).
    With e = 2 this is s b h (34 + 5 a s / h), Table 2's first row. Tensor parallelism
    splits Q, K, V, the projection input, GELU's input and output (24 s b h) and the
    a s^2 b terms t ways (section 4.2.1); sequence parallelism splits the other 10 s b h. Embeddings, the final layer norm and
    the output layer (section 4.3's extra terms) are not counted."""
    if recompute not in RECOMPUTE:
        raise ValueError(f"recompute must be one of {', '.join(RECOMPUTE)}, got {recompute!r}")
    if tp < 1 or shape.heads % tp or shape.hidden % shape.heads:
        raise ValueError(
            f"tp must be >= 1 and divide heads={shape.heads}, and heads must divide hidden={shape.hidden}; got tp={tp}"
        )
    s, b, h, a, e = shape.seq_len, shape.batch, shape.hidden, shape.heads, element_nbytes
    sbh = s * b * h
    if recompute == "full":
        return shape.layers * e * sbh // (tp if sequence_parallel else 1)
    mask = 1 if dropout else 0
    # split by tensor parallelism: Q, K, V, the projection's input, GELU's input and output
    inside = 12 * e * sbh
    # replicated: two layer-norm inputs, the QKV and fc1 inputs (column-parallel), two masks
    outside = 4 * e * sbh + 2 * mask * sbh
    scores = a * s * s * b * (e + mask * (1 + e)) if recompute == "none" else 0
    per_layer = inside // tp + scores // tp + (outside // tp if sequence_parallel else outside)
    return shape.layers * per_layer


@dataclass(frozen=True)
class Layout:
    """A parallel layout of a model of ``params`` parameters over ``ranks`` ranks.

    ranks = N_d x tp (data-parallel copies times tensor-parallel degree). ``zero`` is the
    ZeRO stage 0..3 (0 = DDP); ``unit_params`` is the largest unit gathered whole under
    stage 3 (FSDP's wrapped module, DeepSpeed's largest layer; 0 = not counted, as in ZeRO's
    Figure 1) and ``prefetch`` gathers the next unit while one computes. ``bucket_params``
    is the gradient bucket a stage 0..2 all-reduce or reduce-scatter packs (0 = in place on
    the flat gradient buffer, as dlsys's ``Sequential.grads``). ``model`` gives the
    transformer's shapes for the activations (``activation_bytes``: elements of the
    weights' precision, 2 or 4 bytes, 1-byte dropout masks unless ``dropout`` is False);
    None counts none."""

    params: int
    ranks: int = 1
    zero: int = 0
    tp: int = 1
    optimizer: str = "adam"
    precision: str = "mixed"
    unit_params: int = 0
    prefetch: bool = False
    bucket_params: int = 0
    model: Transformer | None = None
    sequence_parallel: bool = False
    recompute: str = "none"
    dropout: bool = True

    def __post_init__(self):
        for name in ("params", "ranks", "tp"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be a positive integer, got {getattr(self, name)}")
        if self.zero not in (0, 1, 2, 3):
            raise ValueError(f"zero must be a ZeRO stage 0, 1, 2 or 3, got {self.zero}")
        if self.ranks % self.tp:
            raise ValueError(
                f"ranks must be data-parallel copies x tp: tp={self.tp} does not divide ranks={self.ranks}"
            )
        if self.unit_params < 0 or self.bucket_params < 0:
            raise ValueError("unit_params and bucket_params must be >= 0")
        if self.model is not None and (self.model.heads % self.tp or self.model.hidden % self.model.heads):
            raise ValueError(
                f"tp must divide the heads ({self.model.heads}) and the heads the hidden size "
                f"({self.model.hidden}); got tp={self.tp}"
            )
        if self.unit_params and self.zero != 3:
            raise ValueError(f"unit_params is a ZeRO-3/FSDP gather unit: it needs zero=3, got zero={self.zero}")
        bytes_per_param(self.optimizer, self.precision)

    @property
    def dp(self) -> int:
        """N_d: the data-parallel degree ZeRO shards over."""
        return self.ranks // self.tp

    def bytes(self) -> dict[str, float]:
        """One rank's bytes by kind (``KINDS``); fractional when N_d does not divide Psi."""
        w_b, g_b, k_b = bytes_per_param(self.optimizer, self.precision)
        psi, n = self.params / self.tp, self.dp
        unit = self.unit_params / self.tp
        buffers = (
            unit * (w_b * (2 if self.prefetch else 1) + g_b) if self.zero == 3 else self.bucket_params / self.tp * g_b
        )
        activations = (
            0
            if self.model is None
            else activation_bytes(
                self.model, self.tp, self.sequence_parallel, self.recompute, element_nbytes=w_b, dropout=self.dropout
            )
        )
        return {
            "parameters": w_b * psi / (n if self.zero >= 3 else 1),
            "gradients": g_b * psi / (n if self.zero >= 2 else 1),
            "optimizer": k_b * psi / (n if self.zero >= 1 else 1),
            "activations": activations,
            "buffers": buffers,
        }

    def total(self) -> float:
        return sum(self.bytes().values())


def fsdp(params: int, ranks: int, unit_params: int, prefetch: bool = True, **options) -> Layout:
    """PyTorch FSDP (Zhao et al. 2023): ZeRO-3 gathering one wrapped unit at a time."""
    return Layout(params, ranks, zero=3, unit_params=unit_params, prefetch=prefetch, **options)


def zero_figure1(params: int = 7_500_000_000, dp: int = 64) -> dict[str, float]:
    """ZeRO Figure 1: model-state bytes per device of Psi = 7.5B over N_d = 64 (Adam, mixed)."""
    return {f"stage {z}": Layout(params, dp, zero=z).total() for z in range(4)}
