"""Every constant of the algebraic simulations (the config's ``algebraic`` block), validated."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

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

    length: int = 40  # L, number of tokens
    depth: int = 32  # M, number of depth steps
    step: float = 0.03125  # eps, step size (M * eps = 1: depth horizon T = 1)
    mixing: float = 1.9  # kappa: B = I + eps * kappa * (C - I)
    features: int = 5  # d, per-token state dimension
    obs_decay: float = 0.9  # rho: C_out feature map W = diag(1, rho, rho^2, ...)
    uniform_mass: float = 0.15  # mass of the uniformly supervised part of the terminal covector
    delta: float = 0.2  # region scale of the metrics
    gamma1: float = 0.12  # Algorithm 1 ridge on the gains, gamma1 / (2L) ||u||^2
    lambda1: float = 15.0  # Algorithm 1 weight of E_inf
    eps_inf: float = 1e-3  # Algorithm 1 normalizer stabilizer: m_i = I_i / (mean_j I_j + eps_inf)
    alg2_rounds: int = 10  # Algorithm 2 outer rounds
    alg2_eta: float = 1.0  # Algorithm 2 exponent: w <- w * (nu / m)^eta, renormalized
    gamma3: float = 1.0  # Algorithm 3 ridge on the gains
    lambda3: float = 15.0  # Algorithm 3 weight of the trace penalty
    max_iter: int = 2000  # L-BFGS iteration cap (Algorithms 1 and 3)
    tol_grad: float = 1e-7  # L-BFGS stops when max |dJ/du| <= tol_grad ...
    tol_change: float = 1e-15  # ... or when J or the step changes by less than this
    probe_counts: tuple[int, ...] = field(default=(1, 2, 4, 8, 16, 32))
    repetitions: int = 1000  # independent probe batches per probe count
    seed: int = 0  # seeds the Gaussian probes

    @classmethod
    def from_dict(cls, raw: dict | None) -> "AlgebraicSettings":
        """Build and validate settings; every error names the offending ``algebraic.<key>``."""
        raw = dict(raw or {})
        known = {f.name: f for f in dataclasses.fields(cls)}
        unknown = sorted(set(raw) - set(known))
        if unknown:
            raise ConfigError(f"algebraic: unknown key(s) {unknown}; allowed: {sorted(known)}")
        values = {}
        for name, value in raw.items():
            default = known[name].default
            if name == "probe_counts":
                if not isinstance(value, (list, tuple)) or not value:
                    raise ConfigError(f"algebraic.probe_counts must be a non-empty list of integers, got {value!r}")
                value = tuple(_as_int(f"probe_counts[{i}]", v) for i, v in enumerate(value))
            elif isinstance(default, int) and not isinstance(default, bool):
                value = _as_int(name, value)
            else:
                value = _as_float(name, value)
            values[name] = value
        settings = cls(**values)
        settings.validate()
        return settings

    def validate(self) -> None:
        checks = {
            "length": self.length >= 5,
            "depth": self.depth >= 1,
            "step": 0 < self.step <= 1,
            "mixing": self.mixing > 0 and self.step * self.mixing <= 1,
            "features": self.features >= 1,
            "obs_decay": 0 < self.obs_decay <= 1,
            "uniform_mass": 0 <= self.uniform_mass < 1,
            "delta": 0 < self.delta < 0.5,
            "gamma1": self.gamma1 >= 0,
            "lambda1": self.lambda1 > 0,
            "eps_inf": self.eps_inf >= 0,
            "alg2_rounds": self.alg2_rounds >= 0,
            "alg2_eta": self.alg2_eta >= 0,
            "gamma3": self.gamma3 >= 0,
            "lambda3": self.lambda3 > 0,
            "max_iter": self.max_iter >= 1,
            "tol_grad": self.tol_grad > 0,
            "tol_change": self.tol_change > 0,
            "probe_counts": len(self.probe_counts) >= 2 and all(n >= 1 for n in self.probe_counts),
            "repetitions": self.repetitions >= 2,
            "seed": self.seed >= 0,
        }
        why = {
            "mixing": "must be > 0 with step * mixing <= 1 (B must stay a nonnegative, row-stochastic mix)",
            "probe_counts": "needs at least two probe counts, each >= 1 (a slope needs two points)",
        }
        for key, ok in checks.items():
            if not ok:
                raise ConfigError(f"algebraic.{key} = {getattr(self, key)!r} is out of range: {why.get(key, 'see the schema')}")
        check_deltas(self.length, [self.delta], "algebraic.delta")  # every region non-empty at this L

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["probe_counts"] = list(self.probe_counts)
        return d


def _as_int(name, value) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or float(value) != int(value):
        raise ConfigError(f"algebraic.{name} must be an integer, got {value!r}")
    return int(value)


def _as_float(name, value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ConfigError(f"algebraic.{name} must be a finite number, got {value!r}")
    return float(value)
