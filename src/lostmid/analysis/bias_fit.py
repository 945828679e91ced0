"""The blog's bias correction: a fixed additive attention-logit bias B that flattens the
influence profile at initialization (docs/theory.md §6).

B is one L x L matrix (entries on and below the diagonal; the causal mask hides the rest),
shared by every head and layer, data-independent and fitted once per (L, depth, block
layout). By default B is Toeplitz, B_ij = c(i - j), L numbers (``param: distance``): with
every entry free (``full``, L(L+1)/2 numbers) the fit chases the sampling noise of its
batches when the systematic imbalance is small, as it is at init in a residual model. It minimizes the influence imbalance E_inf of the input-adjoint density at step 0,
averaged over several random initializations and batches whose seeds are disjoint from the
training seeds; the model's weights stay fixed, only B moves (Adam on B, gradients through
the adjoint). The initializations are evaluated together: their weights are stacked and one
vmapped pass gives every initialization's adjoint (lostmid.core.adjoint.seed_input_energies).

Which positions are flattened (``positions``):
- ``all``: the theory's (docs/theory.md) E_inf over the whole profile.
- ``context`` (default): positions 1..L-1, renormalized over them. In a residual model the
  last position, where the answer is read out, reaches the loss through the identity path
  with unit gain, while every other position reaches it only through attention with small
  initial weights; at initialization m_L ~ L and the rest ~ 0, whatever B is. No attention
  bias can move that spike, so ``all`` would spend the fit on it; ``context`` flattens the
  profile over the positions that can hold the target, which is what the bias can change.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from lostmid.core import task
from lostmid.core.adjoint import seed_input_energies
from lostmid.core.density import density, imbalance, positions
from lostmid.analysis.settings import FitSettings
from lostmid.errors import ConfigError
from lostmid.core.model import FlagTransformer, ModelConfig, model_at_init

log = logging.getLogger(__name__)


@dataclass
class FitResult:
    bias: torch.Tensor  # (L, L), gauge-fixed, zero above the diagonal
    iterations: pd.DataFrame  # iteration, E_inf_fit, E_inf
    profiles: pd.DataFrame  # stage (before/after), position, p, density (held-out inits)
    before: float  # held-out E_inf of the fitted positions at B = 0
    after: float  # ... at the fitted B
    converged: bool


def fitted_positions(L: int, positions: str) -> slice:
    return slice(0, L - 1) if positions == "context" else slice(0, L)


def fitted_imbalance(energies: torch.Tensor, part: slice) -> torch.Tensor:
    """The fit's objective per initialization: E_inf (uniform target) of the density renormalized
    over the positions ``part`` (``lostmid.core.density``); energies (inits, L) -> (inits,)."""
    return imbalance(density(energies[..., part]))


def gauge_fix(theta: torch.Tensor) -> torch.Tensor:
    """The causal part of theta with each row's mean removed (softmax ignores row shifts)."""
    L = theta.shape[0]
    causal = torch.ones(L, L, dtype=torch.bool).tril()
    b = theta.masked_fill(~causal, 0.0)
    row_mean = b.sum(1, keepdim=True) / causal.sum(1, keepdim=True)
    return (b - row_mean).masked_fill(~causal, 0.0)


def bias_matrix(theta: torch.Tensor, L: int, param: str) -> torch.Tensor:
    """B from the free parameters: ``full`` theta is L x L; ``distance`` theta[k] is the bias of
    a key k positions back (a Toeplitz B: the same recency preference for every query)."""
    if param == "distance":
        lag = (torch.arange(L)[:, None] - torch.arange(L)[None, :]).clamp_min(0)
        theta = theta[lag]
    return gauge_fix(theta)


@dataclass
class Problems:
    """The fit's random initializations, each with its own batch: ``energies`` evaluates them all
    in one vmapped pass (lostmid.core.adjoint.seed_input_energies)."""

    models: list[FlagTransformer]
    tokens: torch.Tensor  # (inits, batch, L)
    targets: torch.Tensor  # (inits, batch)

    @classmethod
    def draw(cls, config: ModelConfig, settings: FitSettings, offset: int) -> "Problems":
        L = config.seq_len
        law = task.flag_law(L, "uniform")
        models, batches = [], []
        for j in range(settings.inits):
            models.append(model_at_init(config, settings.seed + offset + j))
            batches.append(task.sample_batch(settings.batch, L, law, torch.Generator().manual_seed(settings.seed + 1000 + offset + j)))
        return cls(models, torch.stack([b[0] for b in batches]), torch.stack([b[1] for b in batches]))

    def energies(self, bias: torch.Tensor) -> torch.Tensor:
        """Influence energy I(i) of every initialization's input adjoint under ``bias``, (inits, L)."""
        return seed_input_energies(self.models, self.tokens, self.targets, bias)


def fit_bias(config: ModelConfig, settings: FitSettings) -> FitResult:
    """Fit B by Adam on mean_j E_inf(model_j, batch_j; B), stopping on the relative tolerance."""
    if config.attention == "uniform":
        raise ConfigError("config key model.attention: a logit bias has no effect on uniform attention")
    L = config.seq_len
    part = fitted_positions(L, settings.positions)
    problems = Problems.draw(config, settings, offset=0)
    theta = torch.zeros((L,) if settings.param == "distance" else (L, L), requires_grad=True)
    optimizer = torch.optim.Adam([theta], lr=settings.lr)
    rows, best, history = [], float("inf"), []
    converged = False
    for iteration in range(settings.max_iter + 1):
        bias = bias_matrix(theta, L, settings.param)
        energies = problems.energies(bias)
        objective = fitted_imbalance(energies, part).mean()
        full = fitted_imbalance(energies.detach(), slice(0, L)).mean()
        rows.append((iteration, objective.item(), full.item()))
        best = min(best, objective.item())
        history.append(best)
        if iteration >= settings.patience:
            old = history[-1 - settings.patience]
            if old - best <= settings.tol * abs(old):
                converged = True
                break
        if iteration == settings.max_iter:
            break
        optimizer.zero_grad()
        objective.backward()
        optimizer.step()
    bias = bias_matrix(theta.detach(), L, settings.param)
    iterations = pd.DataFrame(rows, columns=["iteration", "E_inf_fit", "E_inf"])
    profiles, before, after = held_out_profiles(config, settings, bias)
    log.info("bias fit L=%d: %d iterations, held-out E_inf %.4g -> %.4g", L, len(rows) - 1, before, after)
    return FitResult(bias, iterations, profiles, before, after, converged)


def held_out_profiles(config: ModelConfig, settings: FitSettings, bias: torch.Tensor):
    """Density profiles before (B = 0) and after (fitted B) on held-out inits and batches."""
    L = config.seq_len
    part = fitted_positions(L, settings.positions)
    problems = Problems.draw(config, settings, offset=500)
    frames, scores = [], {}
    for stage, b in (("before", torch.zeros(L, L)), ("after", bias)):
        energies = problems.energies(b).detach()
        scores[stage] = fitted_imbalance(energies, part).mean().item()
        mean_density = density(energies).mean(0).numpy()
        fit_density = np.full(L, np.nan)
        fit_density[part] = density(energies[:, part]).mean(0).numpy()
        frames.append(
            pd.DataFrame(
                {
                    "stage": stage,
                    "position": np.arange(1, L + 1),
                    "p": positions(L),
                    "density": mean_density,
                    "density_fit": fit_density,
                    "E_inf_fit": scores[stage],
                    "E_inf": fitted_imbalance(energies, slice(0, L)).mean().item(),
                }
            )
        )
    return pd.concat(frames, ignore_index=True), scores["before"], scores["after"]


def bias_long(bias: torch.Tensor) -> pd.DataFrame:
    """B in long format: one row per (query i, key j) on and below the diagonal (1-based)."""
    L = bias.shape[0]
    i, j = torch.tril_indices(L, L)
    return pd.DataFrame({"query": (i + 1).numpy(), "key": (j + 1).numpy(), "bias": bias[i, j].numpy()})
