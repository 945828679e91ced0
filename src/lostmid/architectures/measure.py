"""The measured influence profile and the per-layer mixing statistics of a causal stack.

Measured profile. For a batch of S sequences of n tokens, x_j in R^d the input embedding at
position j and f a scalar target of the sequence, the profile at power p is

    I_p(j) = mean over sequences of ||d f / d x_j||^p,      normalized to sum 1 over j = 1..n (``theory.mass``).

Every sequence's target depends on its own embeddings only, so the gradient of the batch sum
of targets with respect to the (S, n, d) embedding tensor holds every sequence's gradient at
every position: ONE backward pass per batch, never one per position. Batches are cut into
chunks of sequences only to bound memory; the result does not depend on the chunking.

Targets (``TARGETS``):

    loss      next-token cross-entropy of the sequence (mean over positions 1..n-1 predicting 2..n)
    top1      the last position's top-1 probability, max_v softmax(logits_n)_v (Herasimchyk et al.)
    jacobian  a Hutchinson estimate of ||d h_n / d x_j||_F^2: with a Rademacher probe v per
              sequence (seeded), f = v . h_n and E_v ||v^T d h_n/d x_j||^2 = ||d h_n/d x_j||_F^2,
              so power 2 averages to the squared Frobenius norm; power 1 gives E||v^T J_j||, a
              monotone proxy. h_n is the last position's final hidden state (after the final norm).

Mixing statistics (``record``), from forward hooks during the same forward pass: for layer t,
with x the residual stream entering the layer and a the attention sub-layer's output that is
added to it,

    lambda_t = mean over sequences and positions of ||a_i|| / (||x_i|| + ||a_i||)
    A_t      = attention weights averaged over heads, then over sequences (n x n, row-stochastic).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn.functional as F

from lostmid.core.adjoint import tapped_logits
from lostmid.errors import ConfigError, LostmidError

TARGETS = ("loss", "top1", "jacobian")


@dataclass
class LayerStats:
    """Sums the hooks accumulate, one slot per layer; ``lambdas()`` and ``attention()`` read them out."""

    depth: int
    lam_sum: np.ndarray = field(init=False)
    lam_count: np.ndarray = field(init=False)
    attention_sum: list = field(init=False)  # per layer: torch (n, n) sum over sequences of the head mean
    sequences: np.ndarray = field(init=False)

    def __post_init__(self):
        self.lam_sum = np.zeros(self.depth)
        self.lam_count = np.zeros(self.depth)
        self.attention_sum = [None] * self.depth
        self.sequences = np.zeros(self.depth)

    def lambdas(self) -> np.ndarray:
        """lambda_t, shape (depth,)."""
        if not self.lam_count.all():
            raise LostmidError("no forward pass was recorded for some layer")
        return self.lam_sum / self.lam_count

    def attention(self) -> np.ndarray:
        """A_t (head and sequence mean), shape (depth, n, n), float64."""
        return np.stack([(a.double() / s).cpu().numpy() for a, s in zip(self.attention_sum, self.sequences)])


def _residual_hook(cell):
    def hook(module, args, kwargs):
        cell[0] = (args[0] if args else kwargs["hidden_states"]).detach()  # x: (batch, n, d)

    return hook


def _attention_hook(stats: LayerStats, t: int, cell, weights_of, scale: float):
    def hook(module, args, kwargs, output):
        a = (output[0] if isinstance(output, tuple) else output).detach() * scale  # (batch, n, d)
        norm_a, norm_x = a.norm(dim=-1), cell[0].norm(dim=-1)  # (batch, n)
        ratio = norm_a / (norm_x + norm_a).clamp_min(torch.finfo(a.dtype).tiny)
        stats.lam_sum[t] += float(ratio.sum())
        stats.lam_count[t] += ratio.numel()
        weights = weights_of(module, args, kwargs, output)  # (batch, heads, n, n)
        if weights is None:
            raise LostmidError(
                "the attention module returned no weights: load the model with attn_implementation='eager'"
            )
        mean = weights.detach().float().mean(1).sum(0)  # (n, n)
        stats.attention_sum[t] = mean if stats.attention_sum[t] is None else stats.attention_sum[t] + mean
        stats.sequences[t] += weights.shape[0]

    return hook


def hf_weights(module, args, kwargs, output):
    """Attention weights a Hugging Face attention module returns beside its output (eager path)."""
    return output[1] if isinstance(output, tuple) and len(output) > 1 else None


@contextlib.contextmanager
def record(pairs, weights_of=hf_weights, scales=None):
    """Hooks on every (layer, attention module) of ``pairs`` while the block runs; yields LayerStats.

    ``weights_of(module, args, kwargs, output)`` gives the (batch, heads, n, n) attention weights;
    ``scales[t]`` multiplies the attention output before lambda_t (the Euler step of the flag model).
    """
    stats = LayerStats(len(pairs))
    scales = [1.0] * len(pairs) if scales is None else scales
    handles = []
    try:
        for t, (layer, attention) in enumerate(pairs):
            cell = [None]
            handles.append(layer.register_forward_pre_hook(_residual_hook(cell), with_kwargs=True))
            handles.append(
                attention.register_forward_hook(
                    _attention_hook(stats, t, cell, weights_of, scales[t]), with_kwargs=True
                )
            )
        yield stats
    finally:
        for handle in handles:
            handle.remove()


def target_sum(target: str, logits_last, logits=None, next_ids=None, answers=None, hidden_last=None, probe=None):
    """The batch sum of the per-sequence target (see the module docstring); a scalar tensor.

    logits_last (S, V) the last position's logits; logits (S, n, V) and next_ids (S, n-1) for
    ``loss`` of a language model; answers (S,) for the flag task's loss; hidden_last (S, d) and
    probe (S, d) for ``jacobian``.
    """
    if target == "top1":
        return logits_last.float().softmax(-1).max(-1).values.sum()
    if target == "jacobian":
        return (hidden_last.float() * probe).sum()
    if target == "loss":
        if answers is not None:
            return F.cross_entropy(logits_last.float(), answers, reduction="sum")
        per_token = F.cross_entropy(logits[:, :-1].float().transpose(1, 2), next_ids, reduction="none")  # (S, n-1)
        return per_token.mean(1).sum()
    raise ConfigError(f"unknown target {target!r} (known: {', '.join(TARGETS)})")


def probes(sequences: int, d: int, seed: int, device) -> torch.Tensor:
    """Rademacher probe vectors (S, d), drawn at once so that chunking cannot change them."""
    generator = torch.Generator().manual_seed(seed)
    return (torch.randint(0, 2, (sequences, d), generator=generator).float() * 2 - 1).to(device)


def accumulate(grads: torch.Tensor, powers, sums: dict) -> None:
    """Add sum over sequences of ||g_j||^p (per position j) to ``sums[p]``; grads (S, n, d)."""
    norms = grads.detach().double().norm(dim=-1)  # (S, n)
    for p in powers:
        part = norms.pow(p).sum(0).cpu()
        sums[p] = part if p not in sums else sums[p] + part


def measure_hf(
    arch, ids: torch.Tensor, target: str, powers=(1,), chunk: int = 8, probe_seed: int = 0, stats_pairs=None
):
    """Measured influence of a Hugging Face causal LM on token ids (S, n).

    Returns ({p: mean ||d f/d x_j||^p, shape (n,)}, LayerStats or None). With ``stats_pairs``
    (``models.layers(arch)``) the hooks record lambda_t and A_t in the same forward passes.
    """
    model = arch.model
    embedding = model.get_input_embeddings()
    probe = probes(ids.shape[0], embedding.weight.shape[1], probe_seed, ids.device) if target == "jacobian" else None
    sums: dict = {}
    recorder = record(stats_pairs) if stats_pairs is not None else contextlib.nullcontext()
    with recorder as stats, torch.enable_grad():
        for start in range(0, ids.shape[0], chunk):
            part = ids[start : start + chunk]  # (s, n)
            x = embedding(part).detach().requires_grad_(True)  # (s, n, d)
            out = model(inputs_embeds=x, use_cache=False, output_hidden_states=target == "jacobian")
            hidden_last = out.hidden_states[-1][:, -1] if target == "jacobian" else None  # (s, d)
            value = target_sum(
                target,
                out.logits[:, -1],
                logits=out.logits,
                next_ids=part[:, 1:],
                hidden_last=hidden_last,
                probe=None if probe is None else probe[start : start + chunk],
            )
            (grad,) = torch.autograd.grad(value, x)
            accumulate(grad, powers, sums)
    return {p: (sums[p] / ids.shape[0]).numpy() for p in powers}, stats


def flag_pairs(model):
    """(step, attention module) of every attention-carrying residual step of a FlagTransformer, and
    the Euler step h_k of each (the attention output added to X_k is h_k Attn(LN X_k))."""
    pairs, scales = [], []
    for k, step in enumerate(model.steps):
        if hasattr(step, "attn"):
            pairs.append((step, step.attn))
            scales.append(model.step_size(k))
    return pairs, scales


def flag_weights(module, args, kwargs, output):
    """Attention weights of a flag-model attention module, recomputed from its inputs (normed x, bias)."""
    with torch.no_grad():
        return module.attention_weights(args[0], args[1])


def measure_flag(
    model,
    tokens: torch.Tensor,
    answers: torch.Tensor,
    target: str,
    powers=(1,),
    chunk: int = 256,
    probe_seed: int = 0,
    record_stats: bool = True,
):
    """Measured influence of a FlagTransformer on flag-task tokens (S, L) with answers (S,).

    The input is X_0 (token + position embedding); its gradient is read through a zero tap added to
    X_0 (``lostmid.core.adjoint.tapped_logits``, explicit attention). Targets: ``loss`` = cross-entropy of the
    answer at the
    readout, ``top1`` = the top-1 answer probability, ``jacobian`` as for language models with h_n the
    final-normed last state. Returns ({p: profile (L,)}, LayerStats or None).
    """
    pairs, scales = flag_pairs(model)
    d = model.config.d_model
    probe = probes(tokens.shape[0], d, probe_seed, tokens.device) if target == "jacobian" else None
    hidden = [None]
    handle = model.final_norm.register_forward_hook(lambda module, args, output: hidden.__setitem__(0, output))
    sums: dict = {}
    recorder = record(pairs, flag_weights, scales) if record_stats else contextlib.nullcontext()
    try:
        with recorder as stats, torch.enable_grad():
            for start in range(0, tokens.shape[0], chunk):
                part = tokens[start : start + chunk]  # (s, L)
                logits, (tap,) = tapped_logits(model, part, explicit=True)  # tap: (s, L, d)
                logits_last = logits[:, -1] if logits.dim() == 3 else logits  # (s, 2)
                value = target_sum(
                    target,
                    logits_last,
                    answers=answers[start : start + chunk],
                    hidden_last=hidden[0][:, -1],
                    probe=None if probe is None else probe[start : start + chunk],
                )
                (grad,) = torch.autograd.grad(value, tap)
                accumulate(grad, powers, sums)
    finally:
        handle.remove()
    return {p: (sums[p] / tokens.shape[0]).numpy() for p in powers}, stats
