"""The sequence-length study (docs/length.md): how the influence profile at initialization and the
blog's literal bias fit behave as L grows, at one depth.

Two tables, both profiles (one row per position), so that every statistic is computed from them
in one place (``lostmid.tables.length``):

- ``init_profiles``: at every L, every initialization seed, with and without the residual path,
  the blog's measure E||d logits_L / d x_j|| (``output_jacobian``) and the squared loss-gradient
  density (``density``) on a stratified batch (``lostmid.analysis.influence.init_sweep`` at one depth).
- ``fit_profiles``: at every L, the literal B (``lostmid.analysis.bias_fit``: the output-Jacobian
  target over all positions, on the network without the residual path) fitted in the full form up to
  ``full_max_L`` and in the distance form B_ij = c(i - j) up to ``fit_max_L``; and the distance-form B fitted
  at ``carry_from``, carried to every longer L with c(k) held at its farthest fitted value for the
  lags it never saw. Each B's target profile on the fit's held-out initializations, with B = 0 and
  with B, in the fit network (``residual`` false) and inserted into the residual model (true).
  Beside it, one row per fit: its held-out check and its cost.
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace

import numpy as np
import pandas as pd
import torch

from lostmid.analysis import influence
from lostmid.analysis.bias_fit import FitResult, Problems, bias_matrix, fit_bias
from lostmid.analysis.settings import HELD_OUT, FitSettings, InitSweepSettings, LengthSettings
from lostmid.core.density import relative_position
from lostmid.core.model import ModelConfig
from lostmid.errors import ConfigError
from lostmid.tables.keys import with_keys

log = logging.getLogger(__name__)

# The bias of a fitted profile: none (B = 0), the B fitted at this L in either form, or the
# distance-form B fitted at ``carry_from`` and carried over.
BIASES = ("none", "full", "distance", "carried")


def fit_memory_mb(L: int, config: ModelConfig, batch: int) -> float:
    """Estimated peak memory of one initialization's output-Jacobian objective with its double
    backward: the explicit attention maps (batch x heads x L^2 per layer) dominate at long L; ~12
    float32 copies of them per layer are kept (softmax, its graph, the Jacobian pass and its graph).
    The throughput benchmark measures the real peak beside it (docs/performance.md)."""
    per_layer = batch * (config.heads * L * L + 4 * config.mlp_ratio * L * config.d_model)
    return 12 * 4 * per_layer * config.depth / 2**20


def model_config(model_block: dict, L: int, depth: int, residual: bool) -> ModelConfig:
    try:
        return ModelConfig(**{**model_block, "seq_len": L, "depth": depth, "residual": residual})
    except (TypeError, ValueError) as err:
        raise ConfigError(f"config key model at length.L={L}: {err}") from err


def check_lengths(model_block: dict, settings: LengthSettings, fit: FitSettings) -> None:
    """One line naming the first length the model or the fit cannot hold, before any job."""
    for L in settings.L:
        config = model_config(model_block, L, settings.depth, False)
        need = fit_memory_mb(L, config, fit.batch)
        if need > settings.max_memory_mb:
            raise ConfigError(
                f"config key length.L={L}: the bias fit would hold ~{need:.0f} MB (the attention maps of "
                f"{fit.batch} sequences, {config.heads} heads, {config.depth} layers, double backward), above "
                f"length.max_memory_mb={settings.max_memory_mb}; drop the length or lower length.fit.batch"
            )


def init_profiles(model_block: dict, settings: LengthSettings, device=None) -> pd.DataFrame:
    """Columns L, residual, depth, seed, position, p, energy, density, output_jacobian."""
    model_block = {k: v for k, v in model_block.items() if k not in ("seq_len", "depth", "residual")}
    parts = []
    for L in settings.L:
        start = time.perf_counter()
        sweep = InitSweepSettings(L, (settings.depth,), settings.seeds, settings.batch_per_position, settings.seed)
        parts.append(with_keys(influence.init_sweep(model_block, sweep, device), L=L))
        log.info("profiles at init, L %d: %d seeds x 2, %.1f s", L, len(settings.seeds), time.perf_counter() - start)
    return pd.concat(parts, ignore_index=True)


def carried_bias(bias: torch.Tensor, L: int) -> torch.Tensor:
    """A distance-form B fitted at a shorter L0 as a B at ``L``: c(k) read off its last row (the only
    row that has every lag 0..L0-1; a row's shift does not change its softmax), held at c(L0 - 1)
    for the lags k >= L0 it never saw."""
    L0 = bias.shape[0]
    c = bias[L0 - 1].flip(0)  # c(k) = B[L0-1, L0-1-k]
    lags = torch.cat([c, c[-1].expand(max(L - L0, 0))])
    return bias_matrix(lags[:L], L, "distance")


def heldout_profiles(config: ModelConfig, fit: FitSettings, biases: dict[str, torch.Tensor]) -> pd.DataFrame:
    """The fit's target profile on its held-out initializations under each bias: rows bias,
    heldout_init, position, p, output_jacobian."""
    problems = Problems.draw(config, fit, HELD_OUT, fit.heldout)
    L = config.seq_len
    parts = []
    for name, bias in biases.items():
        values = problems.profiles(bias).detach().double().numpy()  # (heldout, L), as bias_fit.held_out_tables
        parts.append(
            pd.DataFrame(
                {
                    "bias": name,
                    "heldout_init": np.repeat(np.arange(values.shape[0]), L),
                    "position": np.tile(np.arange(1, L + 1), values.shape[0]),
                    "p": np.tile(relative_position(np.arange(1, L + 1), L), values.shape[0]),
                    "output_jacobian": values.reshape(-1),
                }
            )
        )
    return pd.concat(parts, ignore_index=True)


def _cost_row(L: int, param: str, result: FitResult, seconds: float) -> dict:
    return {
        "L": L,
        "param": param,
        "seconds": seconds,
        "iterations": len(result.iterations) - 1,
        "converged": result.converged,
        "accepted": result.accepted,
        "imbalance_before": result.before,
        "imbalance_after": result.after,
        "change": result.change[0],
        "change_low": result.change[1],
        "change_high": result.change[2],
    }


def fit_profiles(
    model_block: dict, settings: LengthSettings, fit: FitSettings, device=None
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(profiles: L, depth, residual, bias, fitted_at, heldout_init, position, p, output_jacobian;
    fits: one row per fit, its held-out check and cost). Fits run on the CPU (the fit's own path)."""
    model_block = {k: v for k, v in model_block.items() if k not in ("seq_len", "depth", "residual")}
    profiles, fits, carried = [], [], None
    for L in settings.L:
        fit_config = model_config(model_block, L, settings.depth, False)
        inserted = model_config(model_block, L, settings.depth, True)
        biases, fitted_at = {"none": torch.zeros(L, L)}, {"none": np.nan}
        params = [param for param, top in (("full", settings.full_max_L), ("distance", settings.fit_max_L)) if L <= top]
        for param in params:
            start = time.perf_counter()
            result = fit_bias(fit_config, replace(fit, param=param), inserted)
            seconds = time.perf_counter() - start
            fits.append(_cost_row(L, param, result, seconds))
            biases[param], fitted_at[param] = result.bias, L
            log.info(
                "L %d, %s B: %.1f s, held-out imbalance %.3g -> %.3g", L, param, seconds, result.before, result.after
            )
        if carried is not None:
            biases["carried"], fitted_at["carried"] = carried_bias(carried, L), settings.carry_from
        if L == settings.carry_from:
            carried = biases["distance"]
        for residual, config in ((False, fit_config), (True, inserted)):
            table = heldout_profiles(config, fit, biases)
            table["fitted_at"] = table.bias.map(fitted_at)
            profiles.append(with_keys(table, L=L, depth=settings.depth, residual=residual))
    return pd.concat(profiles, ignore_index=True), pd.DataFrame(fits)
