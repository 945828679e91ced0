"""Failure rate by flag position on the fixed, stratified evaluation set (docs/theory.md §2)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from lostmid.core import task


@torch.inference_mode()
def predict(model, tokens: torch.Tensor, device, chunk: int = 2048) -> torch.Tensor:
    """Answers of ``model`` for every sequence, in chunks so large L fits in memory."""
    model.eval()
    answers = [model.predictions(model(part.to(device))).cpu() for part in tokens.split(chunk)]
    return torch.cat(answers)


def failure_by_position(model, L: int, per_position: int, seed: int, device) -> pd.DataFrame:
    """One row per flag position f = 2..L: p = f/L, n, failures, failure_rate and its Wilson 95% interval."""
    tokens, targets, flags = task.stratified_eval_set(L, per_position, seed)
    wrong = (predict(model, tokens, device) != targets).long()
    failures = torch.zeros(L + 1, dtype=torch.long).index_add_(0, flags, wrong)[2:].numpy()
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
        }
    )
