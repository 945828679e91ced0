"""The flag-recall Transformer: a causal residual Transformer in Euler form (docs/theory.md §3).

    X_0     = token embedding + learned absolute position embedding        (batch, L, d)
    X_{k+1} = X_k + h_k F_k(X_k)      with h_k = epsilon (zeta == 1)      residual: true
    X_{k+1} = F_k(X_k)                                                    residual: false

The model is a flat list of residual *steps* F_k, not of blocks, because the adjoint analysis
works step by step: in the ``sequential`` (pre-LN GPT) layout a block contributes two steps,
Attn(LN X) and MLP(LN X); in the ``parallel`` layout one step, Attn(LN X) + MLP(LN X).

Attention is causal softmax attention with an optional fixed additive logit bias B (L x L,
read on and below the diagonal). Two implementations give the same numbers: PyTorch's fused
``scaled_dot_product_attention`` for training and evaluation, and explicit matrices for the
analysis, because the fused CPU kernel has neither forward-mode AD nor a double backward.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import asdict, dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from lostmid.core.task import N_ANSWERS, VOCAB

BLOCKS = ("sequential", "parallel")
READOUTS = ("last", "all")
ATTENTIONS = ("softmax", "uniform")
POSITIONS = ("learned", "none")


@dataclass(frozen=True)
class ModelConfig:
    seq_len: int
    depth: int = 4
    d_model: int = 64
    heads: int = 4
    mlp_ratio: int = 4
    block: str = "sequential"  # sequential (pre-LN GPT) | parallel (paper's F = Attn + FNN)
    residual: bool = True  # False drops the identity path: X_{k+1} = F_k(X_k)
    epsilon: float = 1.0  # Euler step h_k = epsilon
    readout: str = "last"  # last: answer at position L only; all: every position, weight 1/L
    attention: str = "softmax"  # uniform: all logits zero, i.e. Cesaro averaging (structural baseline)
    layernorm: bool = True
    mlp: bool = True
    positions: str = "learned"  # none: no position embedding; the causal mask alone carries position

    def __post_init__(self):
        if self.block not in BLOCKS:
            raise ValueError(f"model.block must be one of {BLOCKS}, got {self.block!r}")
        if self.readout not in READOUTS:
            raise ValueError(f"model.readout must be one of {READOUTS}, got {self.readout!r}")
        if self.positions not in POSITIONS:
            raise ValueError(f"model.positions must be one of {POSITIONS}, got {self.positions!r}")
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


def _norm(config: ModelConfig) -> nn.Module:
    return nn.LayerNorm(config.d_model) if config.layernorm else nn.Identity()


class CausalSelfAttention(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.heads = config.heads
        self.uniform = config.attention == "uniform"
        self.qkv = nn.Linear(config.d_model, 3 * config.d_model)
        self.proj = nn.Linear(config.d_model, config.d_model)

    def _split(self, x):
        b, L, d = x.shape
        q, k, v = self.qkv(x).split(d, dim=2)
        return [t.view(b, L, self.heads, d // self.heads).transpose(1, 2) for t in (q, k, v)]

    def _merge(self, y):
        b, h, L, dh = y.shape
        return self.proj(y.transpose(1, 2).reshape(b, L, h * dh))

    @staticmethod
    def _causal_mask(x):
        L = x.shape[1]
        return torch.full((L, L), float("-inf"), dtype=x.dtype, device=x.device).triu(1)

    def _weights(self, q, k, bias):
        """softmax(Q K^T / sqrt(d_head) + bias), (batch, heads, L, L); all logits zero for uniform attention."""
        logits = q @ k.transpose(-2, -1) * (1.0 / math.sqrt(q.shape[-1]))
        if self.uniform:
            logits = torch.zeros_like(logits)
        return torch.softmax(logits + bias, dim=-1)

    def attention_weights(self, x, bias=None):
        """The attention matrices of the input ``x`` (batch, L, d) as ``forward`` uses them,
        (batch, heads, L, L); ``bias`` None: the causal mask only."""
        q, k, _ = self._split(x)
        return self._weights(q, k, self._causal_mask(x) if bias is None else bias)

    def forward(self, x, bias, explicit: bool, x_other=None):
        """Attention over ``x``; ``bias`` is the additive logit matrix, -inf above the diagonal
        (None: plain causal attention).

        With ``x_other``, keys and values at strictly earlier positions j < i come from
        ``x_other`` while the query and the j = i key/value come from ``x`` (the two-copy trick
        that splits the adjoint into its causal-cone and local channels, docs/theory.md §5.1).
        """
        q, k, v = self._split(x)
        if x_other is None and not explicit:
            if self.uniform:
                q = torch.zeros_like(q)
            # bias None: plain causal attention, for which the fused kernel has a faster path.
            return self._merge(F.scaled_dot_product_attention(q, k, v, attn_mask=bias, is_causal=bias is None))
        if bias is None:
            bias = self._causal_mask(x)
        scale = 1.0 / math.sqrt(q.shape[-1])
        if x_other is None:
            return self._merge(self._weights(q, k, bias) @ v)
        _, k_other, v_other = self._split(x_other)
        eye = torch.eye(x.shape[1], dtype=torch.bool, device=x.device)
        logits_other = q @ k_other.transpose(-2, -1) * scale
        logits_self = (q * k).sum(-1) * scale  # the diagonal, from x alone
        logits = torch.where(eye, torch.diag_embed(logits_self), logits_other)
        if self.uniform:
            logits = torch.zeros_like(logits)
        weights = torch.softmax(logits + bias, dim=-1)
        diagonal = torch.diagonal(weights, dim1=-2, dim2=-1).unsqueeze(-1)
        mixed = weights.masked_fill(eye, 0.0) @ v_other + diagonal * v
        return self._merge(mixed)


class MLP(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.fc = nn.Linear(config.d_model, config.mlp_ratio * config.d_model)
        self.proj = nn.Linear(config.mlp_ratio * config.d_model, config.d_model)

    def forward(self, x):
        return self.proj(F.gelu(self.fc(x)))


class AttentionStep(nn.Module):
    """F(X) = Attn(LN X): one residual step of the sequential layout."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.norm = _norm(config)
        self.attn = CausalSelfAttention(config)

    def forward(self, x, bias, explicit=False, x_other=None):
        other = None if x_other is None else self.norm(x_other)
        return self.attn(self.norm(x), bias, explicit, other)


class MLPStep(nn.Module):
    """F(X) = MLP(LN X): purely positionwise, so its adjoint is entirely local."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.norm = _norm(config)
        self.mlp = MLP(config)

    def forward(self, x, bias, explicit=False, x_other=None):
        return self.mlp(self.norm(x))


class ParallelStep(nn.Module):
    """F(X) = Attn(LN X) + MLP(LN X): the paper's one-step block."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.norm = _norm(config)
        self.attn = CausalSelfAttention(config)
        self.mlp = MLP(config) if config.mlp else None

    def forward(self, x, bias, explicit=False, x_other=None):
        h = self.norm(x)
        other = None if x_other is None else self.norm(x_other)
        out = self.attn(h, bias, explicit, other)
        return out if self.mlp is None else out + self.mlp(h)


def build_steps(config: ModelConfig) -> list[nn.Module]:
    if config.block == "parallel":
        return [ParallelStep(config) for _ in range(config.depth)]
    steps = []
    for _ in range(config.depth):
        steps.append(AttentionStep(config))
        if config.mlp:
            steps.append(MLPStep(config))
    return steps


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
        # The data-independent logit bias B; zeros unless a fitted correction is loaded. Change it
        # through set_attention_bias or load_state_dict, which keep `has_bias` current: the fused
        # path reads the flag instead of the tensor, so a forward pass never waits on the GPU.
        self.register_buffer("attn_bias", torch.zeros(L, L))
        self.has_bias = False
        self.register_load_state_dict_post_hook(lambda module, _: module._refresh_bias_flag())
        self.register_buffer("causal_mask", torch.full((L, L), float("-inf")).triu(1), persistent=False)
        self.explicit_attention = False
        self.apply(self._init_weights)

    @staticmethod
    def _init_weights(module):
        # nanoGPT's init: small normal weights keep LayerNorm'd activations O(1) at every depth.
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    def step_size(self, k: int) -> float:
        """h_k = epsilon * zeta(k epsilon) with zeta == 1."""
        return self.config.epsilon

    def set_attention_bias(self, bias: torch.Tensor) -> None:
        L = self.config.seq_len
        if tuple(bias.shape) != (L, L):
            raise ValueError(f"attention bias must be {L}x{L} for seq_len={L}, got {tuple(bias.shape)}")
        self.attn_bias.copy_(bias)
        self._refresh_bias_flag()

    def _refresh_bias_flag(self) -> None:
        self.has_bias = bool(self.attn_bias.any())

    def logit_bias(self) -> torch.Tensor:
        """The additive attention logits: the fixed bias B plus -inf above the diagonal."""
        return self.attn_bias + self.causal_mask

    def _attention_mask(self):
        """The mask the steps use: None (the fused causal fast path) when B = 0 and the fused
        kernel is in use, else ``logit_bias()``."""
        if not self.explicit_attention and not self.has_bias:
            return None
        return self.logit_bias()

    def embed(self, tokens: torch.Tensor) -> torch.Tensor:
        if self.position_embedding is None:
            return self.token_embedding(tokens)
        positions = torch.arange(tokens.shape[1], device=tokens.device)
        return self.token_embedding(tokens) + self.position_embedding(positions)

    def advance(self, k: int, x: torch.Tensor, bias=None, x_other=None) -> torch.Tensor:
        """One residual step X_{k+1} from X_k (``bias`` None: the model's own mask)."""
        bias = self._attention_mask() if bias is None else bias
        update = self.steps[k](x, bias, self.explicit_attention, x_other)
        return x + self.step_size(k) * update if self.config.residual else update

    def read_out(self, x: torch.Tensor) -> torch.Tensor:
        logits = self.head(self.final_norm(x))
        return logits[:, -1] if self.config.readout == "last" else logits

    def forward(self, tokens: torch.Tensor, taps=None) -> torch.Tensor:
        """Logits (batch, 2) for readout 'last', (batch, L, 2) for 'all'.

        ``taps``: optional list of n_steps + 1 tensors (or None) added to X_0 .. X_M. They are zeros in
        value, so the output is unchanged, and the gradient of the loss with respect to tap k
        is the adjoint P_k = dloss/dX_k: one backward pass yields every step and position.
        """
        taps = [None] * (len(self.steps) + 1) if taps is None else taps
        x = self.embed(tokens)
        bias = self._attention_mask()
        if taps[0] is not None:
            x = x + taps[0]
        for k in range(len(self.steps)):
            x = self.advance(k, x, bias)
            if taps[k + 1] is not None:
                x = x + taps[k + 1]
        return self.read_out(x)

    def loss(self, logits: torch.Tensor, targets: torch.Tensor, weights=None) -> torch.Tensor:
        """Mean cross-entropy; ``weights`` (batch,) reweights sequences (Algorithm 2).

        With readout 'all' every position is supervised with the sequence's target, weight 1/L.
        """
        if logits.dim() == 3:
            per_sequence = F.cross_entropy(logits.transpose(1, 2), targets[:, None].expand(-1, logits.shape[1]), reduction="none").mean(1)
        else:
            per_sequence = F.cross_entropy(logits, targets, reduction="none")
        if weights is not None:
            per_sequence = per_sequence * weights
        return per_sequence.mean()

    @staticmethod
    def predictions(logits: torch.Tensor) -> torch.Tensor:
        """The answer read at the last position, whatever the readout."""
        return (logits[:, -1] if logits.dim() == 3 else logits).argmax(-1)


@contextlib.contextmanager
def explicit_attention(model: FlagTransformer):
    """Use explicit attention matrices (forward-mode AD and double backward work through them)."""
    previous = model.explicit_attention
    model.explicit_attention = True
    try:
        yield model
    finally:
        model.explicit_attention = previous
