"""Model presets for the planner, with their sources (devices: ``devices.py``).

A decoder-only transformer in Llama's shape (Touvron et al. 2023, "Llama 2", section 2.2
and Table 1; Hugging Face ``LlamaForCausalLM``): pre-norm RMSNorm, attention with
``kv_heads`` key/value heads (grouped-query attention, GQA: kv_heads < heads), a SwiGLU MLP
of width ``ffn`` (three matrices), an input embedding and an output layer of ``vocab`` rows
(tied or not). Its parameters, with d = hidden / heads the head dimension:

    per layer   P_layer = 2 h^2 + 2 h (kv_heads d)     Q and O; K and V (GQA)
                        + 3 h ffn                       SwiGLU: gate, up, down
                        + 2 h                           two RMSNorm weights
    whole       P = L P_layer + V h (embedding) + V h (output, unless tied) + h (final norm)

With kv_heads = heads, ffn = 4 h, two matrices in the MLP and no vocabulary this is the
GPT count 12 L h^2 (Narayanan et al. 2021, section 5.1). GPT's own shape (``gated=False``:
h -> 4h -> h with GeLU; ``biases``: 13 h a layer with the norms; learned ``positions``; a
``tied`` output layer) gives Narayanan's equation 2 exactly, plus the final norm's 2 h:
P = 12 L h^2 (1 + 13/(12 h) + (V + s)/(12 L h)).

A mixture of experts (Mixtral's shape: Jiang et al. 2024, "Mixtral of Experts", section 2)
replaces each layer's MLP by ``experts`` SwiGLU experts and a router (h x E); a token runs
through ``top_k`` of them, so a step's FLOPs count the active parameters, N minus the
(E - k) experts a token skips in every layer.
``tests/planner/test_plan.py`` holds each preset within 2% of its published count (exactly equal
for the Hugging Face checkpoints' tensors, in fact).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Model:
    """A transformer's shape (the fields of a Hugging Face Llama config.json) and where it comes from."""

    name: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    ffn: int
    vocab: int
    seq_len: int
    tied: bool = False
    published_params: int = 0
    source: str = ""
    experts: int = 0  # 0: a dense MLP; E: E SwiGLU experts a layer and a router
    top_k: int = 0  # experts a token runs through (1..E when experts > 0)
    gated: bool = True  # SwiGLU's three matrices; False: GPT's two (h -> ffn -> h, GeLU)
    biases: bool = False  # GPT: every linear layer and layer norm has a bias
    positions: bool = False  # GPT: learned position embeddings (s x h)

    def __post_init__(self):
        for name in ("layers", "hidden", "heads", "kv_heads", "ffn", "vocab", "seq_len"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
        if self.hidden % self.heads or self.heads % self.kv_heads:
            raise ValueError(
                f"heads must divide hidden ({self.hidden}) and kv_heads must divide heads "
                f"({self.heads}); got heads={self.heads}, kv_heads={self.kv_heads}"
            )
        if isinstance(self.experts, bool) or not isinstance(self.experts, int) or self.experts < 0:
            raise ValueError(f"experts must be an integer >= 0 (0: a dense MLP), got {self.experts!r}")
        if self.experts and not (isinstance(self.top_k, int) and 1 <= self.top_k <= self.experts):
            raise ValueError(f"top_k must be in 1..experts = {self.experts}, got {self.top_k!r}")
        if not self.experts and self.top_k:
            raise ValueError(f"top_k needs experts > 0 (a mixture of experts), got top_k={self.top_k}")
        for name in ("tied", "gated", "biases", "positions"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be True or False, got {getattr(self, name)!r}")

    @property
    def mlp_matrices(self) -> int:
        """Matrices of h x ffn in an MLP (or an expert): 3 gated (SwiGLU), 2 (GPT)."""
        return 3 if self.gated else 2

    def layer_params(self) -> int:
        """P_layer: attention (Q, O; K, V of the kv heads), the MLP (or E experts and
        their router), two norms (and GPT's biases: 9 h in the linear layers, 2 h in the norms)."""
        h, kv = self.hidden, self.kv_heads * (self.hidden // self.heads)
        mlp = self.expert_layer_params() + h * self.experts if self.experts else self.mlp_matrices * h * self.ffn
        biases = (5 * h + 2 * kv + self.ffn) if self.biases else 0  # q, k, v, o; fc1, fc2; 2 norms
        return 2 * h * h + 2 * h * kv + mlp + 2 * h + biases

    def expert_layer_params(self) -> int:
        """The experts' parameters in one layer, E 3 h ffn (0 for a dense model): what
        expert parallelism spreads over its ranks."""
        return self.experts * self.mlp_matrices * self.hidden * self.ffn

    def active_params(self) -> int:
        """Parameters a token's forward touches: N less the E - k experts it skips a layer."""
        skipped = (self.experts - self.top_k) * self.mlp_matrices * self.hidden * self.ffn if self.experts else 0
        return self.params() - self.layers * skipped

    def matmul_params(self) -> int:
        """A layer's weights a token multiplies by (2 FLOPs each forward): attention's four
        matrices and its MLP's (top_k experts' and the router under a mixture)."""
        h, kv = self.hidden, self.kv_heads * (self.hidden // self.heads)
        experts = self.top_k if self.experts else 1
        return 2 * h * h + 2 * h * kv + experts * self.mlp_matrices * h * self.ffn + h * self.experts

    def outside_params(self) -> int:
        """The embedding, the output layer (unless tied), the final norm (its bias), the positions."""
        norm = 2 * self.hidden if self.biases else self.hidden
        positions = self.seq_len * self.hidden if self.positions else 0
        return self.vocab * self.hidden * (1 if self.tied else 2) + norm + positions

    def params(self) -> int:
        """P = L P_layer + V h (x 2 untied) + h."""
        return self.layers * self.layer_params() + self.outside_params()


_HF = "Hugging Face config.json of {}; parameter count: the checkpoint's tensors ({} parameters)"

MODELS = {
    "1b": Model(
        "TinyLlama-1.1B",
        layers=22,
        hidden=2048,
        heads=32,
        kv_heads=4,
        ffn=5632,
        vocab=32000,
        seq_len=2048,
        published_params=1_100_048_384,
        source="Zhang et al. 2024, 'TinyLlama: An Open-Source Small Language Model', section 2.2 "
        "(Llama 2's architecture: 22 layers, 2048 hidden, 32 heads, 4 query groups, "
        "5632 intermediate, 2048 context); "
        + _HF.format("TinyLlama/TinyLlama-1.1B-intermediate-step-1431k-3T", "1,100,048,384"),
    ),
    "7b": Model(
        "Llama-2-7B",
        layers=32,
        hidden=4096,
        heads=32,
        kv_heads=32,
        ffn=11008,
        vocab=32000,
        seq_len=4096,
        published_params=6_738_415_616,
        source="Touvron et al. 2023, 'Llama 2', Table 1 (7B, 4k context, no GQA); "
        + _HF.format("meta-llama/Llama-2-7b-hf", "6,738,415,616"),
    ),
    "70b": Model(
        "Llama-2-70B",
        layers=80,
        hidden=8192,
        heads=64,
        kv_heads=8,
        ffn=28672,
        vocab=32000,
        seq_len=4096,
        published_params=68_976_648_192,
        source="Touvron et al. 2023, 'Llama 2', Table 1 (70B, 4k context, GQA with 8 key-value "
        "heads); " + _HF.format("meta-llama/Llama-2-70b-hf", "68,976,648,192"),
    ),
    "8x7b": Model(
        "Mixtral-8x7B",
        layers=32,
        hidden=4096,
        heads=32,
        kv_heads=8,
        ffn=14336,
        vocab=32000,
        seq_len=32768,
        experts=8,
        top_k=2,
        published_params=46_700_000_000,
        source="Jiang et al. 2024, 'Mixtral of Experts', Table 1 (dim 4096, 32 layers, 32 heads, 8 "
        "key-value heads, hidden_dim 14336, context 32768, vocab 32000, 8 experts, top 2) and "
        "section 2 (46.7 B parameters, 12.9 B active a token)",
    ),
}


def model_of(preset: str | None = None, **shape) -> Model:
    """A preset ("1b", "7b", "70b", "8x7b"; any case) with any field replaced, or a free model from every field."""
    if preset is None:
        missing = [f for f in ("layers", "hidden", "heads", "ffn", "vocab", "seq_len") if shape.get(f) is None]
        if missing:
            raise ValueError(
                f"model: give a preset ({', '.join(MODELS)}) or every shape field; missing {', '.join(missing)}"
            )
        given = {k: v for k, v in shape.items() if v is not None}
        given.setdefault("kv_heads", given["heads"])
        return Model("custom", **given)
    key = preset.lower() if isinstance(preset, str) else preset
    if key not in MODELS:
        raise ValueError(f"model must be one of {', '.join(MODELS)} (any case), got {preset!r}")
    base = MODELS[key]
    changed = {k: v for k, v in shape.items() if v is not None}
    if not changed:
        return base
    fields = {
        f: getattr(base, f)
        for f in (
            "layers",
            "hidden",
            "heads",
            "kv_heads",
            "ffn",
            "vocab",
            "seq_len",
            "tied",
            "experts",
            "top_k",
            "gated",
            "biases",
            "positions",
        )
    }
    return Model(f"{base.name} (modified)", **{**fields, **changed})
