"""Memory-bounded measurement of one causal LM: per-sequence profile, lambda_t and both rollouts.

No attention matrix of n x n x layers x heads is ever held. For each batch of sequences:

1. one forward pass through the base model with ``sdpa`` attention (the logits only at the last
   position for ``top1`` and ``jacobian``), and one backward pass: the gradient norms
   ||d f / d x_j||^p per sequence and position (as ``measure.measure_hf``, same targets);
   with ``checkpoint`` every decoder layer is recomputed in the backward pass
   (``torch.utils.checkpoint``, non-reentrant), keeping one layer's activations instead of all;
2. forward hooks record, per layer t and sequence s, lambda_t(s) = mean_i ||a_i|| / (||x_i|| + ||a_i||)
   (as ``measure.record``) and the attention module's input h_t (normed residual, (n, d)) and, for
   rotary models, the position embeddings (cos, sin);
3. after the backward pass, without gradients, the rollout row r = e_n^T M_H ... M_1,
   M_t = (1 - lambda_t) I + lambda_t A_t, is propagated from the top layer down: r <- (1 - lambda_t) r
   + lambda_t r A_t, where r A_t = mean over heads of sum_i r_i softmax_i(q_i K^T / sqrt d_h) is formed
   from the recomputed queries and keys a block of rows at a time (``row_times_attention``: at most
   ``block_elements`` scores at once). ``rollout_uniform`` (A_t = C) and ``cesaro`` need no attention.

A_t here is the head mean of ONE sequence: the rollouts are per sequence and then averaged over
sequences (the reading of Herasimchyk et al.'s per-input rollout), unlike ``measure.record``'s
sequence-mean attention of the random-init sweep, which the product cannot be taken of per sequence
there. Memory per sequence in the batch: the model's activations of one layer (checkpointing) or of
all layers, plus the stored (H, n, d) inputs; time: the forward and backward pass, the recomputation
(with checkpointing) and the rollout's H n^2 d_h multiply-adds per head (about half the attention
scores of the forward pass).
"""

from __future__ import annotations

import contextlib
import sys
from dataclasses import dataclass

import numpy as np
import torch
from torch.utils.checkpoint import checkpoint as torch_checkpoint

from lostmid.architectures import measure, models, theory


@dataclass
class Measurement:
    """Per-sequence results of one model on S sequences of n tokens (float64 numpy arrays)."""

    grads: dict  # {(target, power): (S, n) ||d f / d x_j||^p}
    lambdas: np.ndarray  # (S, H) lambda_t per sequence, input side first
    rollout_attention: np.ndarray  # (S, n) e_n^T M_H ... M_1 with the sequence's own A_t
    attention_first: np.ndarray  # (S, H) mean over rows i of A_t[i, 1]
    attention_self: np.ndarray  # (S, H) mean diagonal of A_t

    def theories(self) -> dict:
        """{theory: (S, n)} per-sequence theory profiles (each row sums 1)."""
        n = self.rollout_attention.shape[1]
        return {
            "cesaro": np.stack([theory.cesaro(lam.mean(), len(lam), n) for lam in self.lambdas]),
            "rollout_uniform": np.stack([theory.rollout(lam, n=n) for lam in self.lambdas]),
            "rollout_attention": self.rollout_attention,
        }


def queries_keys(arch: models.Arch, module, hidden: torch.Tensor, position_embeddings):
    """(q, k) of an attention module from its input ``hidden`` (b, n, d): (b, heads, n, d_h) each, keys
    repeated over the query heads of a group (grouped-query attention), rotary positions applied."""
    if arch.family == "gpt2":
        q, k, _ = module.c_attn(hidden).split(module.split_size, dim=2)
        shape = (*hidden.shape[:-1], -1, module.head_dim)
        return q.view(shape).transpose(1, 2), k.view(shape).transpose(1, 2)
    shape = (*hidden.shape[:-1], -1, module.head_dim)
    q = module.q_proj(hidden).view(shape).transpose(1, 2)
    k = module.k_proj(hidden).view(shape).transpose(1, 2)
    cos, sin = position_embeddings
    q, k = sys.modules[type(module).__module__].apply_rotary_pos_emb(q, k, cos, sin)
    return q, k.repeat_interleave(q.shape[1] // k.shape[1], dim=1)


def row_times_attention(q: torch.Tensor, k: torch.Tensor, r: torch.Tensor, scale: float, block_elements: int = 1 << 24):
    """(r A, first, self) for the head-mean causal softmax attention A of q, k (b, heads, n, d_h) and rows r (b, n).

    r A (b, n); first (b,) = mean over rows of A[i, 1]; self (b,) = mean of A's diagonal. Rows are taken
    ``rows`` at a time so that at most ``block_elements`` scores exist at once; a block needs the keys up
    to its last row only.
    """
    b, heads, n, _ = q.shape
    rows = max(1, block_elements // (b * heads * n))
    out = torch.zeros(b, n, dtype=q.dtype, device=q.device)
    first = torch.zeros(b, dtype=q.dtype, device=q.device)
    diagonal = torch.zeros(b, dtype=q.dtype, device=q.device)
    for start in range(0, n, rows):
        stop = min(start + rows, n)
        scores = torch.matmul(q[:, :, start:stop], k[:, :, :stop].transpose(-1, -2)) * scale  # (b, heads, rows, stop)
        future = torch.arange(stop, device=q.device)[None, :] > torch.arange(start, stop, device=q.device)[:, None]
        weights = scores.masked_fill_(future, float("-inf")).softmax(-1).mean(1)  # (b, rows, stop)
        out[:, :stop] += torch.einsum("bi,bij->bj", r[:, start:stop], weights)
        first += weights[:, :, 0].sum(1)
        diagonal += weights.diagonal(offset=start, dim1=1, dim2=2).sum(-1)
    return out, first / n, diagonal / n


@contextlib.contextmanager
def checkpointed(modules):
    """Every module of ``modules`` recomputed in the backward pass (non-reentrant torch.utils.checkpoint)."""

    def wrap(forward):
        return lambda *args, **kwargs: torch_checkpoint(forward, *args, use_reentrant=False, **kwargs)

    for module in modules:
        module.forward = wrap(module.forward)
    try:
        yield
    finally:
        for module in modules:
            del module.forward  # the class's forward again


class Recorder:
    """Forward hooks on every (layer, attention) pair: lambda_t per sequence and the attention inputs.

    Values are overwritten, not accumulated, so a checkpointed layer's recomputation stores the same values again.
    """

    def __init__(self, pairs):
        self.pairs = pairs
        depth = len(pairs)
        self.residual, self.lam, self.hidden, self.positions = (
            [None] * depth,
            [None] * depth,
            [None] * depth,
            [None] * depth,
        )

    def _pre(self, t):
        def hook(module, args, kwargs):
            self.residual[t] = (args[0] if args else kwargs["hidden_states"]).detach()

        return hook

    def _post(self, t):
        def hook(module, args, kwargs, output):
            a = (output[0] if isinstance(output, tuple) else output).detach()  # (b, n, d)
            norm_a, norm_x = a.norm(dim=-1), self.residual[t].norm(dim=-1)
            self.lam[t] = (norm_a / (norm_x + norm_a).clamp_min(torch.finfo(a.dtype).tiny)).mean(1)  # (b,)
            self.hidden[t] = (args[0] if args else kwargs["hidden_states"]).detach()
            self.positions[t] = kwargs.get("position_embeddings")

        return hook

    @contextlib.contextmanager
    def hooks(self):
        handles = []
        try:
            for t, (layer, attention) in enumerate(self.pairs):
                handles.append(layer.register_forward_pre_hook(self._pre(t), with_kwargs=True))
                handles.append(attention.register_forward_hook(self._post(t), with_kwargs=True))
            yield self
        finally:
            for handle in handles:
                handle.remove()


def rollout_rows(arch: models.Arch, recorder: Recorder, block_elements: int):
    """Per sequence of the batch: the attention rollout (b, n) and each layer's first/self attention (b, H)."""
    pairs = recorder.pairs
    b, n = recorder.hidden[0].shape[:2]
    row = torch.zeros(b, n, dtype=recorder.hidden[0].dtype, device=recorder.hidden[0].device)
    row[:, -1] = 1.0
    first, self_attention = [None] * len(pairs), [None] * len(pairs)
    with torch.no_grad():
        for t in reversed(range(len(pairs))):  # output side first: r <- r M_t
            module = pairs[t][1]
            q, k = queries_keys(arch, module, recorder.hidden[t], recorder.positions[t])
            mixed, first[t], self_attention[t] = row_times_attention(q, k, row, module.scaling, block_elements)
            lam = recorder.lam[t][:, None].to(row.dtype)
            row = (1 - lam) * row + lam * mixed
    return row, torch.stack(first, 1), torch.stack(self_attention, 1)


def _to_numpy(tensor) -> np.ndarray:
    return tensor.detach().double().cpu().numpy()


def measure_bounded(
    arch: models.Arch,
    ids: torch.Tensor,
    targets=("top1",),
    powers=(1,),
    chunk: int = 1,
    probe_seed: int = 0,
    checkpoint: bool = False,
    block_elements: int = 1 << 24,
) -> Measurement:
    """Per-sequence gradient profiles of every target and power, lambda_t and the attention rollout of token
    ids (S, n), ``chunk`` sequences per pass (memory only; see the module docstring)."""
    model = arch.model
    base = model.base_model
    head = model.get_output_embeddings()
    embedding = model.get_input_embeddings()
    pairs = models.layers(arch)
    probe = None
    if "jacobian" in targets:
        probe = measure.probes(ids.shape[0], embedding.weight.shape[1], probe_seed, ids.device)
    grads = {(target, p): [] for target in targets for p in powers}
    lambdas, rollouts, firsts, selfs = [], [], [], []
    recorder = Recorder(pairs)
    layers = [layer for layer, _ in pairs] if checkpoint else []
    with recorder.hooks(), checkpointed(layers), torch.enable_grad():
        for start in range(0, ids.shape[0], chunk):
            part = ids[start : start + chunk]  # (b, n)
            for i, target in enumerate(targets):
                x = embedding(part).detach().requires_grad_(True)  # (b, n, d)
                hidden = base(inputs_embeds=x, use_cache=False).last_hidden_state  # (b, n, d), after the final norm
                logits = head(hidden) if target == "loss" else None
                probes = None if probe is None else probe[start : start + chunk]
                value = measure.target_sum(
                    target,
                    head(hidden[:, -1]),
                    logits=logits,
                    next_ids=part[:, 1:],
                    hidden_last=hidden[:, -1],
                    probe=probes,
                )
                (grad,) = torch.autograd.grad(value, x)
                norms = grad.detach().double().norm(dim=-1)  # (b, n)
                for p in powers:
                    grads[(target, p)].append(_to_numpy(norms.pow(p)))
                del hidden, logits, value, grad
                if i == 0:  # the hooks saw this batch's forward: the mixing statistics are those of any target
                    row, first, self_attention = rollout_rows(arch, recorder, block_elements)
                    lambdas.append(_to_numpy(torch.stack(recorder.lam, 1)))
                    rollouts.append(_to_numpy(row))
                    firsts.append(_to_numpy(first))
                    selfs.append(_to_numpy(self_attention))
    return Measurement(
        {key: np.concatenate(value) for key, value in grads.items()},
        np.concatenate(lambdas),
        np.concatenate(rollouts),
        np.concatenate(firsts),
        np.concatenate(selfs),
    )
