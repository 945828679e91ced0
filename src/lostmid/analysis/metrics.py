"""Regional metrics of a normalized influence density (docs/theory.md §4), as reported (numpy, float64).

A density m over L positions has mean 1. Position i (1-based) sits at p_i = (i - 1/2) / L.
Regions at scale delta: left p < delta, middle delta <= p < 1 - delta, right p >= 1 - delta.
The density, the positions and E_inf themselves are ``lostmid.core.density`` (shared with the
torch penalties); ``normalize`` and ``influence_imbalance`` wrap them for numpy callers, with
the checks a reported metric needs.
"""

from __future__ import annotations

import numpy as np

from lostmid.core.density import density as _density
from lostmid.core.density import imbalance, positions

LIM_STABILIZER = 1e-8


def cesaro_matrix(L: int) -> np.ndarray:
    """Causal averaging C_ij = 1{j <= i} / i (1-based): uniform causal attention, each position the
    mean of its prefix. The structural baseline, the algebraic model and the rollout theories use it."""
    return np.tril(np.ones((L, L))) / np.arange(1, L + 1)[:, None]


def normalize(energy) -> np.ndarray:
    """Density m_i = I(i) / mean_j I(j) (``lostmid.core.density.density``) of every profile
    (last axis) of ``energy``, in float64; a ValueError where a profile is zero everywhere."""
    energy = np.asarray(energy, dtype=np.float64)
    if np.any(energy.mean(axis=-1) <= 0):
        raise ValueError("influence energy is zero everywhere: the density is undefined")
    return _density(energy)


def region_masks(L: int, delta: float) -> dict[str, np.ndarray]:
    """Boolean masks of the left, middle and right regions at scale delta."""
    check_delta(delta)
    p = positions(L)
    left = p < delta
    right = p >= 1 - delta
    masks = {"left": left, "middle": ~left & ~right, "right": right}
    empty = [name for name, mask in masks.items() if not mask.any()]
    if empty:
        raise ValueError(f"delta={delta} leaves region(s) {empty} empty for L={L}; use a larger L or delta")
    return masks


def check_deltas(L: int, deltas, key: str) -> None:
    """Every region non-empty at every delta for sequence length L; else a ConfigError naming
    the config ``key`` the deltas came from."""
    from lostmid.errors import ConfigError

    for delta in deltas:
        try:
            region_masks(L, delta)
        except ValueError as err:
            raise ConfigError(f"config key {key}: {err}") from None


def check_delta(delta: float) -> None:
    if not 0 < delta < 0.5:
        raise ValueError(f"delta must lie in (0, 0.5), got {delta}")


def metrics_from_regions(m_left: float, m_middle: float, m_right: float) -> dict[str, float]:
    """Delta, SC and LIM from the three regional averages."""
    edge = min(m_left, m_right)
    delta_gap = edge - m_middle
    contrast_scale = edge + m_middle
    return {
        "Delta": delta_gap,
        # A profile with no mass in the middle and on one edge has no defined contrast.
        "SC": delta_gap / contrast_scale if contrast_scale > 0 else float("nan"),
        "LIM": 1 - m_middle / (edge + LIM_STABILIZER),
    }


def influence_imbalance(density, target=None) -> float:
    """E_inf(nu) = (1/L) sum_i (m_i - nu_i)^2 (``lostmid.core.density.imbalance``) of one profile,
    with nu = 1 (uniform) by default; a ValueError if ``target`` has another shape."""
    density = np.asarray(density, dtype=np.float64)
    nu = np.ones_like(density) if target is None else np.asarray(target, dtype=np.float64)
    if nu.shape != density.shape:
        raise ValueError(f"target density has shape {nu.shape}, density has {density.shape}")
    return float(imbalance(density, nu))


def regional_means(density, delta: float) -> dict[str, float]:
    """m_B = mean of m_i over the region B, for B = left, middle, right at scale delta (one profile)."""
    density = np.asarray(density, dtype=np.float64)
    if density.ndim != 1:
        raise ValueError(f"density must be one profile (1-D), got shape {density.shape}")
    return {name: float(density[mask].mean()) for name, mask in region_masks(density.size, delta).items()}


def regional_metrics(density, delta: float = 0.2, target=None) -> dict[str, float]:
    """Regional averages and the metrics of docs/theory.md §4 for one density profile.

    Returns m_left, m_middle, m_right, Delta, SC, LIM and E_inf (against ``target``, uniform if None).
    """
    means = regional_means(density, delta)
    return {
        **{f"m_{name}": value for name, value in means.items()},
        **metrics_from_regions(means["left"], means["middle"], means["right"]),
        "E_inf": influence_imbalance(density, target),
    }


def influence_metrics(energy, delta: float, target=None) -> dict[str, float]:
    """``regional_metrics`` of the density of the energy profile I, and its raw total Z = sum_i I(i)
    (reported beside every normalized quantity: a remedy can flatten m while moving Z)."""
    energy = np.asarray(energy, dtype=np.float64)
    return {**regional_metrics(normalize(energy), delta, target), "Z": float(energy.sum())}
