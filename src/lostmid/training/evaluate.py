"""Failure rate and held-out cross-entropy by flag position on the balanced evaluation set, drawn per training seed.

Each run is evaluated on its own draw of ``lostmid.core.task.balanced_eval_set`` (seed
``eval_seed_for_run(evaluation.seed, run seed)``): the same number of sequences at every flag
position, half with target 0 and half with target 1. A constant predictor therefore fails on
exactly half the sequences at every position (no spurious position effect), and an interval
over seeds includes the evaluation set's own sampling error (docs/evidence.md).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from lostmid.core import task


@dataclass(frozen=True)
class EvaluationSettings:
    """The config's ``evaluation`` block (both keys required: no defaults)."""

    per_position: int  # sequences at every flag position, even: half with target 0, half with target 1
    seed: int  # base seed; run seed s draws its set with eval_seed_for_run(seed, s)


@torch.inference_mode()
def answer_logits(model, tokens: torch.Tensor, device, chunk: int = 2048) -> torch.Tensor:
    """The logits of the answer (read at the last position, whatever the readout) of every sequence,
    (n, 2), in chunks so large L fits in memory."""
    model.eval()
    parts = []
    for part in tokens.split(chunk):
        logits = model(part.to(device))
        parts.append((logits[:, -1] if logits.dim() == 3 else logits).cpu())
    return torch.cat(parts)


def failure_by_position(model, L: int, per_position: int, base_seed: int, run_seed: int, device) -> pd.DataFrame:
    """One row per flag position f = 2..L: p = f/L, n, failures, failure_rate and its Wilson 95% interval,
    ``loss``, the mean cross-entropy of the answer (the validation loss: these sequences are
    drawn apart from the training stream, by their own seed), and ``failures_first_half``, the failures
    among the position's first ``per_position // 2`` sequences (a split half of the set, balanced in
    target when ``per_position`` is a multiple of 4: the study's split-half reliability, docs/study.md).

    The evaluation set is ``balanced_eval_set(L, per_position, eval_seed_for_run(base_seed,
    run_seed))`` (``per_position`` even): ``base_seed`` is the config's ``evaluation.seed``,
    ``run_seed`` the training seed of the run.
    """
    tokens, targets, flags = task.balanced_eval_set(L, per_position, task.eval_seed_for_run(base_seed, run_seed))
    logits = answer_logits(model, tokens, device)
    wrong = (model.predictions(logits) != targets).long()
    failures = torch.zeros(L + 1, dtype=torch.long).index_add_(0, flags, wrong)[2:].numpy()
    first_half = (torch.arange(flags.numel()) % per_position < per_position // 2).long()
    failures_first_half = torch.zeros(L + 1, dtype=torch.long).index_add_(0, flags, wrong * first_half)[2:].numpy()
    cross_entropy = torch.nn.functional.cross_entropy(logits.double(), targets, reduction="none")
    loss = torch.zeros(L + 1, dtype=torch.float64).index_add_(0, flags, cross_entropy)[2:].numpy() / per_position
    n = np.full(L - 1, per_position)
    low, high = task.wilson_interval(failures, n)
    positions = np.arange(2, L + 1)
    return pd.DataFrame(
        {
            "flag_pos": positions,
            "p": positions / L,
            "n": n,
            "failures": failures,
            "failure_rate": failures / n,
            "ci_low": low,
            "ci_high": high,
            "loss": loss,
            "failures_first_half": failures_first_half,
        }
    )
