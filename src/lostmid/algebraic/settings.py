"""Every constant of the algebraic simulations: the config's ``algebraic`` section, built by
``lostmid.config.settings_from_section`` (defaults and ranges: the config schema)."""

from __future__ import annotations

from dataclasses import dataclass

from lostmid.analysis.metrics import check_deltas
from lostmid.errors import ConfigError


@dataclass(frozen=True)
class AlgebraicSettings:
    """Every constant of the algebraic simulations; ``config["algebraic"]`` maps onto it 1:1.

    The paper states the Cesàro mixing, the supervised mass 0.15, gamma1 = 0.12, lambda1 = 15,
    delta = 0.2, the probe counts and the 1000 repetitions. The rest (L, M, eps, kappa, d, rho,
    the Algorithm 2 and 3 constants) it leaves unstated; the defaults are the result of a small
    search documented in docs/algebraic.md.
    """

    length: int  # L, number of tokens
    depth: int  # M, number of depth steps
    step: float  # eps, step size (M * eps = 1: depth horizon T = 1)
    mixing: float  # kappa: B = I + eps * kappa * (C - I)
    features: int  # d, per-token state dimension
    obs_decay: float  # rho: C_out feature map W = diag(1, rho, rho^2, ...)
    uniform_mass: float  # mass of the uniformly supervised part of the terminal covector
    delta: float  # region scale of the metrics
    gamma1: float  # Algorithm 1 ridge on the gains, gamma1 / (2L) ||u||^2
    lambda1: float  # Algorithm 1 weight of E_inf
    eps_inf: float  # Algorithm 1 normalizer stabilizer: m_i = I_i / (mean_j I_j + eps_inf)
    alg2_rounds: int  # Algorithm 2 outer rounds
    alg2_eta: float  # Algorithm 2 exponent: w <- w * (nu / m)^eta, renormalized
    gamma3: float  # Algorithm 3 ridge on the gains
    lambda3: float  # Algorithm 3 weight of the trace penalty
    max_iter: int  # L-BFGS iteration cap (Algorithms 1 and 3)
    tol_grad: float  # L-BFGS stops when max |dJ/du| <= tol_grad ...
    tol_change: float  # ... or when J or the step changes by less than this
    probe_counts: tuple[int, ...]
    repetitions: int  # independent probe batches per probe count
    seed: int  # seeds the Gaussian probes

    def check(self) -> None:
        if self.step * self.mixing > 1:
            raise ConfigError(
                f"config key algebraic.mixing={self.mixing}: step * mixing must be <= 1 (B must stay a "
                f"nonnegative, row-stochastic mix), got algebraic.step={self.step}"
            )
        check_deltas(self.length, (self.delta,), "algebraic.delta")  # regions non-empty at this L
