"""Controls for the blog's fix: attention biases built from a fitted B (the literal reading's) that keep
one of its properties and drop the others, so that a trained arm can say which property carries the
fix's effect (docs/remedies.md, "Controls for the fix").

Every B here is L x L, zero above the diagonal and gauge-fixed (each causal row's mean removed:
softmax ignores a row's shift, so the model is the same). c(k) is the mean of B(i, i - k) over the
queries i that have a key k positions back. The rules (``CONTROL_RULES``):

- ``lag_ramp``: B_ij = c(i - j), the source's lag means as a distance-only prior (recency, and the
  diagonal's c(0), without any query-specific entry);
- ``reversed_ramp``: the ramp's rows read backwards, B_ij = c(j - 1) for keys j = 1..i: each query
  keeps its row's values but the largest goes to the *first* key (a primacy prior of the same size);
- ``row_shuffle``: the source's causal entries permuted within each row (seeded): every row keeps
  its values (how peaked the prior is) but neither recency nor the diagonal survives;
- ``diagonal``: the diagonal alone: B_ii = B(i, i) - mean_{j < i} B(i, j) (the self-preference a query
  has over its older keys in the source), every other entry 0: a pure self-attention boost.
"""

from __future__ import annotations

import pandas as pd
import torch

from lostmid.analysis.bias_fit import Problems, fitted_imbalance, fitted_positions, gauge_fix, held_out_report
from lostmid.analysis.settings import FIT_INITS, FitSettings
from lostmid.core.model import ModelConfig
from lostmid.errors import InputError

CONTROL_RULES = ("lag_ramp", "reversed_ramp", "row_shuffle", "diagonal")


def check_bias(bias, L: int, what: str) -> None:
    """InputError, one line naming ``what`` and the problem, unless ``bias`` is a finite L x L causal
    bias: a floating-point tensor of shape (L, L), finite on and below the diagonal, zero above it."""
    if not isinstance(bias, torch.Tensor) or not bias.is_floating_point():
        raise InputError(f"{what} is not a floating-point tensor ({type(bias).__name__})")
    if tuple(bias.shape) != (L, L):
        raise InputError(f"{what} has the wrong shape: {tuple(bias.shape)}, expected ({L}, {L})")
    causal = torch.ones(L, L, dtype=torch.bool, device=bias.device).tril()
    bad = ~torch.isfinite(bias[causal])
    if bad.any():
        raise InputError(f"{what} is not finite: {int(bad.sum())} entries on or below the diagonal are NaN or inf")
    above = bias[~causal]
    if (above != 0).any():
        raise InputError(
            f"{what} is not causal: {int((above != 0).sum())} entries above the diagonal are not zero "
            f"(largest {float(above.abs().max()):.3g})"
        )


def lag_means(bias: torch.Tensor) -> torch.Tensor:
    """c(k), k = 0..L-1: the mean of B(i, i - k) over the queries that have a key k positions back."""
    L = bias.shape[0]
    return torch.stack([torch.diagonal(bias, offset=-k).mean() for k in range(L)])


def lag_ramp(bias: torch.Tensor) -> torch.Tensor:
    """B_ij = c(i - j) with the source's lag means (gauge-fixed)."""
    L = bias.shape[0]
    lag = (torch.arange(L)[:, None] - torch.arange(L)[None, :]).clamp_min(0)
    return gauge_fix(lag_means(bias)[lag])


def reversed_ramp(bias: torch.Tensor) -> torch.Tensor:
    """The lag ramp's rows read backwards: B_ij = c(j - 1) for keys j = 1..i (1-based), gauge-fixed."""
    L = bias.shape[0]
    return gauge_fix(lag_means(bias)[torch.arange(L)].expand(L, L).clone())


def row_shuffle(bias: torch.Tensor, seed: int) -> torch.Tensor:
    """The causal entries of each row permuted (a generator seeded with ``seed``), gauge-fixed."""
    generator = torch.Generator().manual_seed(seed)
    shuffled = torch.zeros_like(bias)
    for i in range(bias.shape[0]):
        shuffled[i, : i + 1] = bias[i, : i + 1][torch.randperm(i + 1, generator=generator)]
    return gauge_fix(shuffled)


def diagonal(bias: torch.Tensor) -> torch.Tensor:
    """The source's self-preference alone: B_ii = B(i, i) - mean_{j < i} B(i, j), 0 elsewhere (the first
    query has no other key: 0), gauge-fixed."""
    L = bias.shape[0]
    excess = torch.zeros(L, dtype=bias.dtype)
    for i in range(1, L):
        excess[i] = bias[i, i] - bias[i, :i].mean()
    return gauge_fix(torch.diag(excess))


def control_bias(source: torch.Tensor, rule: str, seed: int, L: int, what: str = "the source bias") -> torch.Tensor:
    """The control ``rule`` (CONTROL_RULES) built from the L x L ``source``; both checked by ``check_bias``
    (a malformed source is refused with one line naming ``what``)."""
    check_bias(source, L, what)
    source = source.detach().cpu().double()
    if rule == "lag_ramp":
        built = lag_ramp(source)
    elif rule == "reversed_ramp":
        built = reversed_ramp(source)
    elif rule == "row_shuffle":
        built = row_shuffle(source, seed)
    elif rule == "diagonal":
        built = diagonal(source)
    else:
        raise ValueError(f"unknown control rule {rule!r}; expected one of {CONTROL_RULES}")
    built = built.float()
    check_bias(built, L, f"the {rule} control of {what}")
    return built


def control_report(
    config: ModelConfig, settings: FitSettings, bias: torch.Tensor, inserted: ModelConfig
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """The bias fit's tables for a control (nothing is fitted): the objective the fit of ``settings``
    minimizes, at the control on the fit's own initializations (one row, iteration 0), and the held-out
    profiles and summary (``held_out_report``: on the model ``config`` the source was fitted on, and as
    ``inserted_*`` in the model ``inserted`` it trains in). ``accepted`` is true: a control has no guard;
    it was built by its rule and checked (``check_bias``)."""
    L = config.seq_len
    part = fitted_positions(L, settings.positions)
    problems = Problems.draw(config, settings, FIT_INITS, settings.inits)
    energies = problems.profiles(bias).detach()  # B carries no gradient: nothing is fitted
    flatness = fitted_imbalance(energies, part).mean().item()
    whole = fitted_imbalance(energies, slice(0, L)).mean().item()
    iterations = pd.DataFrame(
        {"iteration": [0], "objective": [flatness], "E_inf_fit": [flatness], "E_inf": [whole], "converged": [True]}
    )
    profiles, summary, _ = held_out_report(config, settings, bias, inserted)
    return iterations, profiles, summary.assign(accepted=True)
