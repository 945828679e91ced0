"""Training objectives: the task loss, and the hook through which remedies change it.

An objective turns one batch into a loss. Remedies that carry state between steps (the
reweighting law of Algorithm 2, a probe generator) expose it through ``state_dict`` so
that a checkpoint captures it and chained segments stay exactly one run.
"""

from __future__ import annotations

import torch

from lostmid.core.adjoint import functional_logits


class TaskObjective:
    """Plain cross-entropy of the readout: the baseline (and the debiased variant, whose
    change lives in the model's fixed attention bias, not in the loss).

    An objective with ``functional = True`` also gives its loss as a pure function of the
    weights (``functional_loss``), so that ``lostmid.training.seed_batch`` can train several seeds in
    one vmapped step; the rest of its work (per-sequence weights, its generators) stays per
    seed in ``sequence_weights``, outside the transform.
    """

    functional = True

    def __init__(self, spec: dict):
        self.spec = spec

    def __call__(self, model, tokens, targets, flags, step: int):
        """Return (loss, logits) for one batch at training step ``step``."""
        weights = self.sequence_weights(model, tokens, flags, step)
        logits = model(tokens)
        return model.loss(logits, targets, weights), logits

    def sequence_weights(self, model, tokens, flags, step: int) -> torch.Tensor | None:
        """Per-sequence loss weights of this step, (batch,), or None for all ones."""
        return None

    def functional_loss(self, model, weights: dict, buffers: dict, tokens, targets, sequence_weights=None):
        """(loss, logits) of one batch with the model's parameters replaced by ``weights``.

        Only settings shared by every seed may enter here: it runs under vmap over seeds.
        """
        logits = functional_logits(model, weights, buffers, tokens)
        return model.loss(logits, targets, sequence_weights), logits

    def state_dict(self) -> dict:
        return {}

    def load_state_dict(self, state: dict) -> None:
        if state:
            raise ValueError(f"{type(self).__name__} has no state, got keys {sorted(state)}")


def sequence_seed(seed: int, salt: int) -> int:
    """Seed of a remedy's own generator: distinct from the data seed (1_000_003 seed + 17)."""
    return 2_000_003 * seed + salt
