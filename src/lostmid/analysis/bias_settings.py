"""Settings of the attention-bias fit (docs/theory.md §6), kept free of torch so that the
workflow can check them when it parses the config (the fit itself is lostmid.analysis.bias_fit)."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from lostmid.errors import ConfigError


@dataclass(frozen=True)
class FitSettings:
    inits: int = 3  # random initializations averaged in the objective
    batch: int = 32  # sequences per initialization (one fixed batch each)
    max_iter: int = 120  # Adam iterations at most
    lr: float = 0.1  # Adam step on the logit bias
    tol: float = 1e-2  # stop when the best objective improved by less than tol (relative) ...
    patience: int = 10  # ... over the last `patience` iterations
    positions: str = "context"  # context: positions 1..L-1; all: the whole profile
    param: str = "distance"  # distance: B_ij = c(i - j) (L numbers); full: every entry free
    seed: int = 100_000  # fit seeds: seed + j (weights), seed + 1000 + j (batches); check: + 500

    @classmethod
    def from_dict(cls, raw: dict) -> "FitSettings":
        unknown = sorted(set(raw) - set(cls.__dataclass_fields__))
        if unknown:
            raise ConfigError(f"config key bias_fit.{unknown[0]}: unknown setting (known: {sorted(cls.__dataclass_fields__)})")
        settings = cls(**raw)
        if settings.param not in ("distance", "full"):
            raise ConfigError(f"config key bias_fit.param: expected distance or full, got {settings.param!r}")
        if settings.positions not in ("context", "all"):
            raise ConfigError(f"config key bias_fit.positions: expected context or all, got {settings.positions!r}")
        for key in ("inits", "batch", "max_iter", "patience"):
            if getattr(settings, key) < 1:
                raise ConfigError(f"config key bias_fit.{key}: must be >= 1, got {getattr(settings, key)}")
        return settings

    def seeds(self) -> list[int]:
        """Every seed the fit uses: check these are not training seeds."""
        return [self.seed + offset + j for offset in (0, 500, 1000, 1500) for j in range(self.inits)]

    def to_dict(self) -> dict:
        return asdict(self)


def check_disjoint_from_training(settings: FitSettings, training_seeds) -> None:
    """The fit must draw its initializations and batches from seeds no training run uses."""
    clash = sorted(set(settings.seeds()) & set(training_seeds))
    if clash:
        raise ConfigError(f"config key bias_fit.seed={settings.seed}: the fit would use training seeds {clash[:5]}; choose a seed far from them")
