"""The flag-recall Transformer: a causal residual Transformer in Euler form (docs/theory.md §3).

    X_0     = token embedding + learned absolute position embedding        (batch, L, d)
    X_{k+1} = X_k + h_k F_k(X_k)      with h_k = epsilon (zeta == 1)      residual: true
    X_{k+1} = F_k(X_k)                                                    residual: false

The model is a flat list of residual *steps* F_k, not of blocks, because the adjoint analysis
works step by step: in the ``sequential`` (pre-LN GPT) layout a block contributes two steps,
Attn(LN X) and MLP(LN X); in the ``parallel`` layout one step, Attn(LN X) + MLP(LN X).

Attention is causal softmax attention with an optional fixed additive logit bias B (read on and
below the diagonal): one (L, L) table shared by every attention step and head (the blog's form), or
one per attention step and head, (attention steps, heads, L, L) (``attention_bias_shapes``). The
model holds no mode: every pass is a function of its inputs and of two arguments that choose how
attention is computed,

    mask      the additive attention logits: B plus -inf above the diagonal, as
              ``FlagTransformer.logit_bias()`` returns them, (L, L) or (attention steps, heads,
              L, L); None is plain causal attention (B = 0). It means this in every method that
              takes it; a step reads its own part (``FlagTransformer.step_mask``).
    explicit  False: PyTorch's fused ``scaled_dot_product_attention`` (training, evaluation).
              True: explicit softmax matrices (the analysis), because the fused CPU kernel has
              neither forward-mode AD, nor a double backward, nor a vmap batching rule.
              Both give the same numbers up to rounding.

A forward pass chooses its mask once (``FlagTransformer.attention_mask``): None when B = 0 and
attention is fused, so that the fused kernel takes its causal fast path, else ``logit_bias()``.
"""

from __future__ import annotations

import functools
import math
from dataclasses import asdict, dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from lostmid.config import neutral_values
from lostmid.core.task import N_ANSWERS, VOCAB

LAYOUTS = ("sequential", "parallel")
READOUTS = ("last", "all")
ATTENTIONS = ("softmax", "uniform")
POSITIONS = ("learned", "none")
INITS = ("normal", "fan_in", "pytorch")


def _neutral(key: str):
    """The value a run spec's model leaves out (the schema's ``$defs`` model default; lostmid.config.neutral_values)."""
    return neutral_values()[("model", key)]


@dataclass(frozen=True)
class ModelConfig:
    """A run spec's ``model`` block (with ``seq_len`` = L and ``depth``). The keys every config sets have
    no default here; the optional ones default to their neutral values, which live in the config schema."""

    seq_len: int
    depth: int
    d_model: int
    heads: int
    mlp_ratio: int
    block: str  # sequential (pre-LN GPT) | parallel (paper's F = Attn + FNN)
    residual: bool  # False drops the identity path: X_{k+1} = F_k(X_k)
    epsilon: float  # Euler step h_k = epsilon
    readout: str  # last: answer at position L only; all: every position, weight 1/L
    attention: str = _neutral("attention")  # uniform: all logits zero, i.e. Cesaro averaging (structural baseline)
    layernorm: bool = _neutral("layernorm")
    mlp: bool = _neutral("mlp")
    positions: str = _neutral("positions")  # none: no position embedding; the causal mask alone carries position
    init: str = _neutral(
        "init"
    )  # normal: N(0, 0.02) (nanoGPT); fan_in: N(0, 1/fan_in), embeddings N(0, 1); pytorch: its defaults
    layernorm_eps: float = _neutral("layernorm_eps")  # eps of every LayerNorm (PyTorch's default)

    def __post_init__(self):
        if self.block not in LAYOUTS:
            raise ValueError(f"model.block must be one of {LAYOUTS}, got {self.block!r}")
        if self.readout not in READOUTS:
            raise ValueError(f"model.readout must be one of {READOUTS}, got {self.readout!r}")
        if self.positions not in POSITIONS:
            raise ValueError(f"model.positions must be one of {POSITIONS}, got {self.positions!r}")
        if self.init not in INITS:
            raise ValueError(f"model.init must be one of {INITS}, got {self.init!r}")
        if self.attention not in ATTENTIONS:
            raise ValueError(f"model.attention must be one of {ATTENTIONS}, got {self.attention!r}")
        if self.d_model % self.heads:
            raise ValueError(f"model.d_model={self.d_model} is not divisible by model.heads={self.heads}")
        if self.seq_len < 2 or self.depth < 1:
            raise ValueError(f"need seq_len >= 2 and depth >= 1, got {self.seq_len}, {self.depth}")

    @property
    def n_steps(self) -> int:
        """Number of residual steps M' of the recursion (sub-steps count in the sequential layout)."""
        return 2 * self.depth if self.block == "sequential" and self.mlp else self.depth

    def to_dict(self) -> dict:
        return asdict(self)


def causal_mask(L: int, dtype=None, device=None) -> torch.Tensor:
    """The mask of plain causal attention, (L, L): 0 on and below the diagonal, -inf above."""
    return torch.full((L, L), float("-inf"), dtype=dtype, device=device).triu(1)


def attention_bias_shapes(config: ModelConfig) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The shapes an attention bias B may have: (L, L), one table for every attention step and head, or
    (attention steps, heads, L, L), one per attention step and head (each layout has ``depth`` attention steps)."""
    L = config.seq_len
    return (L, L), (config.depth, config.heads, L, L)


def _norm(config: ModelConfig) -> nn.Module:
    return nn.LayerNorm(config.d_model, eps=config.layernorm_eps) if config.layernorm else nn.Identity()


class CausalSelfAttention(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.heads = config.heads
        self.scale = 1.0 / math.sqrt(config.d_model // config.heads)  # 1 / sqrt(d_head)
        self.uniform = config.attention == "uniform"
        self.qkv = nn.Linear(config.d_model, 3 * config.d_model)
        self.proj = nn.Linear(config.d_model, config.d_model)

    def project(self, x):
        """Queries, keys and values of x (batch, L, d): three (batch, heads, L, d_head)."""
        b, L, d = x.shape
        q, k, v = self.qkv(x).split(d, dim=2)
        return [t.view(b, L, self.heads, d // self.heads).transpose(1, 2) for t in (q, k, v)]

    def merge(self, y):
        """The heads' outputs (batch, heads, L, d_head) joined and projected: (batch, L, d)."""
        b, h, L, dh = y.shape
        return self.proj(y.transpose(1, 2).reshape(b, L, h * dh))

    def softmax(self, logits, mask):
        """Attention weights from scaled logits (batch, heads, L, L): softmax over the keys of
        logits + mask; uniform attention sets every logit to zero first."""
        if self.uniform:
            logits = torch.zeros_like(logits)
        if mask is None:
            mask = causal_mask(logits.shape[-1], logits.dtype, logits.device)
        return torch.softmax(logits + mask, dim=-1)

    def weights(self, q, k, mask):
        """softmax(Q K^T / sqrt(d_head) + mask), (batch, heads, L, L)."""
        return self.softmax(q @ k.transpose(-2, -1) * self.scale, mask)

    def attention_weights(self, x, mask):
        """The attention matrices of the input x (batch, L, d), (batch, heads, L, L)."""
        q, k, _ = self.project(x)
        return self.weights(q, k, mask)

    def forward(self, x, mask, explicit: bool = False):
        """Attn(x), (batch, L, d) -> (batch, L, d)."""
        q, k, v = self.project(x)  # (batch, heads, L, d_head) each
        if explicit:
            return self.merge(self.weights(q, k, mask) @ v)
        if self.uniform:
            q = torch.zeros_like(q)  # all logits zero
        # mask None: plain causal attention, for which the fused kernel has a faster path.
        return self.merge(F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=mask is None))


class MLP(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.fc = nn.Linear(config.d_model, config.mlp_ratio * config.d_model)
        self.proj = nn.Linear(config.mlp_ratio * config.d_model, config.d_model)

    def forward(self, x):
        return self.proj(F.gelu(self.fc(x)))


class AttentionStep(nn.Module):
    """F(X) = Attn(LN X), the attention step of the sequential layout (``mlp`` False), or
    F(X) = Attn(LN X) + MLP(LN X) with one shared LayerNorm, the paper's parallel block."""

    def __init__(self, config: ModelConfig, mlp: bool):
        super().__init__()
        self.norm = _norm(config)
        self.attn = CausalSelfAttention(config)
        self.mlp = MLP(config) if mlp else None

    def forward(self, x, mask, explicit: bool = False):
        h = self.norm(x)
        out = self.attn(h, mask, explicit)
        return out if self.mlp is None else out + self.mlp(h)


class MLPStep(nn.Module):
    """F(X) = MLP(LN X): purely positionwise, so its adjoint is entirely local."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.norm = _norm(config)
        self.mlp = MLP(config)

    def forward(self, x, mask, explicit: bool = False):
        return self.mlp(self.norm(x))


def build_steps(config: ModelConfig) -> list[nn.Module]:
    if config.block == "parallel":
        return [AttentionStep(config, mlp=config.mlp) for _ in range(config.depth)]
    steps = []
    for _ in range(config.depth):
        steps.append(AttentionStep(config, mlp=False))
        if config.mlp:
            steps.append(MLPStep(config))
    return steps


def init_weights(module: nn.Module, fan_in: bool = False) -> None:
    """nanoGPT's init (``fan_in`` False): small normal weights N(0, 0.02) keep LayerNorm'd activations
    O(1) at every depth of a residual model; each linear map then scales a vector by about
    0.02 sqrt(fan_in) (0.08 at d = 16). ``fan_in``: N(0, 1/fan_in) weights, which keep the scale
    through every map, and N(0, 1) embeddings. Biases start at zero either way."""
    if isinstance(module, nn.Linear):
        nn.init.normal_(module.weight, mean=0.0, std=module.in_features**-0.5 if fan_in else 0.02)
    elif isinstance(module, nn.Embedding):
        nn.init.normal_(module.weight, mean=0.0, std=1.0 if fan_in else 0.02)
    if isinstance(module, nn.Linear) and module.bias is not None:
        nn.init.zeros_(module.bias)


class FlagTransformer(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.config = config
        L, d = config.seq_len, config.d_model
        self.token_embedding = nn.Embedding(VOCAB, d)
        self.position_embedding = nn.Embedding(L, d) if config.positions == "learned" else None
        self.steps = nn.ModuleList(build_steps(config))
        self.final_norm = _norm(config)
        self.head = nn.Linear(d, N_ANSWERS)
        # The data-independent logit bias B; zeros (L, L) unless a fitted correction is loaded. Change it
        # through set_attention_bias or load_state_dict, which keep `has_bias` current (the fused
        # path reads the flag instead of the tensor, so a forward pass never waits on the GPU) and
        # take either shape of attention_bias_shapes.
        self.register_buffer("attn_bias", torch.zeros(L, L))
        self.has_bias = False
        self.register_load_state_dict_pre_hook(self._shape_bias_for_state)
        self.register_load_state_dict_post_hook(lambda module, _: module._refresh_bias_flag())
        self.register_buffer("causal_mask", causal_mask(L), persistent=False)
        # The attention step (0, 1, ...) of every step that has attention: the index of its part of B.
        attention_steps = [k for k, step in enumerate(self.steps) if isinstance(step, AttentionStep)]
        self.attention_step = {k: a for a, k in enumerate(attention_steps)}
        if config.init != "pytorch":  # pytorch: the modules' own reset_parameters, as constructed
            self.apply(functools.partial(init_weights, fan_in=config.init == "fan_in"))

    def step_size(self, k: int) -> float:
        """h_k = epsilon * zeta(k epsilon) with zeta == 1."""
        return self.config.epsilon

    def set_attention_bias(self, bias: torch.Tensor) -> None:
        """Hold ``bias``, of either shape of ``attention_bias_shapes``, as B."""
        self._shape_bias(tuple(bias.shape))
        self.attn_bias.copy_(bias)
        self._refresh_bias_flag()

    def _shape_bias(self, shape: tuple[int, ...]) -> None:
        """Give the buffer ``shape`` (zeros where it changes), or say which shapes B may have."""
        shapes = attention_bias_shapes(self.config)
        if shape not in shapes:
            named = " or ".join("x".join(map(str, allowed)) for allowed in shapes)
            raise ValueError(
                f"attention bias must be {named} (one table, or one per attention step and head) for "
                f"seq_len={self.config.seq_len}, depth={self.config.depth}, heads={self.config.heads}, got {shape}"
            )
        if tuple(self.attn_bias.shape) != shape:
            self.attn_bias = self.attn_bias.new_zeros(shape)

    def _shape_bias_for_state(self, module, state_dict, prefix, *args) -> None:
        """load_state_dict's pre-hook: a state's B of the other shape reshapes the buffer first."""
        bias = state_dict.get(prefix + "attn_bias")
        if bias is not None and tuple(bias.shape) in attention_bias_shapes(self.config):
            self._shape_bias(tuple(bias.shape))

    def _refresh_bias_flag(self) -> None:
        self.has_bias = bool(self.attn_bias.any())

    def logit_bias(self) -> torch.Tensor:
        """The additive attention logits, B's shape: the fixed bias B plus -inf above the diagonal."""
        return self.attn_bias + self.causal_mask

    def step_mask(self, mask, k: int):
        """The part of the pass's ``mask`` that step k reads: the mask itself when it is None or (L, L), else
        its attention step's (heads, L, L), which broadcasts over the batch as (L, L) does over the heads
        (None for a step without attention, which reads no mask)."""
        if mask is None or mask.dim() == 2:
            return mask
        return mask[self.attention_step[k]] if k in self.attention_step else None

    def attention_mask(self, explicit: bool) -> torch.Tensor | None:
        """The mask of a forward pass: None (the fused causal fast path) when B = 0 and attention
        is fused, else ``logit_bias()``. Explicit attention always reads the buffer, which
        torch.func.functional_call may have replaced (has_bias describes the module's own)."""
        return self.logit_bias() if explicit or self.has_bias else None

    def embed(self, tokens: torch.Tensor) -> torch.Tensor:
        """X_0 of tokens (batch, L): (batch, L, d)."""
        if self.position_embedding is None:
            return self.token_embedding(tokens)
        positions = torch.arange(tokens.shape[1], device=tokens.device)
        return self.token_embedding(tokens) + self.position_embedding(positions)

    def advance(self, k: int, x: torch.Tensor, mask, explicit: bool = False) -> torch.Tensor:
        """X_{k+1} from X_k, (batch, L, d); ``mask`` and ``explicit`` as in the module docstring."""
        update = self.steps[k](x, self.step_mask(mask, k), explicit)
        return x + self.step_size(k) * update if self.config.residual else update

    def read_out(self, x: torch.Tensor) -> torch.Tensor:
        logits = self.head(self.final_norm(x))  # (batch, L, 2)
        return logits[:, -1] if self.config.readout == "last" else logits

    def forward(self, tokens: torch.Tensor, taps=(), explicit: bool = False) -> torch.Tensor:
        """Logits (batch, 2) for readout 'last', (batch, L, 2) for 'all', of tokens (batch, L).

        ``taps``: tensors (batch, L, d) added to X_0, X_1, ... in turn (fewer than n_steps + 1
        leave the later states alone). Zeros in value, they leave the output unchanged, and the
        gradient of the loss with respect to tap k is the adjoint P_k = dloss/dX_k
        (lostmid.core.adjoint).
        """
        x = self.embed(tokens)  # X_0: (batch, L, d)
        mask = self.attention_mask(explicit)
        for k in range(len(self.steps) + 1):
            if k < len(taps):
                x = x + taps[k]  # the tap on X_k
            if k < len(self.steps):
                x = self.advance(k, x, mask, explicit)  # X_{k+1}
        return self.read_out(x)

    def attention_maps(self, tokens: torch.Tensor) -> list[torch.Tensor]:
        """The attention matrices of every attention step of the explicit pass over tokens (batch, L):
        one (batch, heads, L, L) tensor per step with attention, in order."""
        x = self.embed(tokens)
        mask = self.attention_mask(explicit=True)
        maps = []
        for k, step in enumerate(self.steps):
            if isinstance(step, AttentionStep):
                maps.append(step.attn.attention_weights(step.norm(x), self.step_mask(mask, k)))
            x = self.advance(k, x, mask, explicit=True)
        return maps

    def loss(self, logits: torch.Tensor, targets: torch.Tensor, weights=None) -> torch.Tensor:
        """Mean cross-entropy; ``weights`` (batch,) reweights sequences (Algorithm 2).

        With readout 'all' every position is supervised with the sequence's target, weight 1/L.
        """
        if logits.dim() == 3:
            per_sequence = F.cross_entropy(
                logits.transpose(1, 2), targets[:, None].expand(-1, logits.shape[1]), reduction="none"
            ).mean(1)
        else:
            per_sequence = F.cross_entropy(logits, targets, reduction="none")
        if weights is not None:
            per_sequence = per_sequence * weights
        return per_sequence.mean()

    @staticmethod
    def predictions(logits: torch.Tensor) -> torch.Tensor:
        """The answer read at the last position, whatever the readout."""
        return (logits[:, -1] if logits.dim() == 3 else logits).argmax(-1)


def model_at_init(config: ModelConfig, seed: int) -> FlagTransformer:
    """A frozen model (eval mode, no parameter requires grad) initialized exactly as a training
    run with this seed would be (lostmid.training.checkpoint.TrainingState.initial).

    The global RNG is forked, so building it never shifts anyone else's random numbers.
    """
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = FlagTransformer(config)
    model.requires_grad_(False)
    return model.eval()
