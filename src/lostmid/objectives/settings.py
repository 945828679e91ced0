"""Settings of the training-time remedies (the ``remedy`` section of a variant), kept free of torch
so that the tables can name them without loading the training code (lostmid.objectives).

The remedy section is part of the run spec (lostmid.config), so the config keeps it as written;
``remedy_settings`` builds the kind's settings with ``lostmid.config.settings_from_section``, which
checks the section against the schema and takes the kind's defaults from it."""

from __future__ import annotations

from dataclasses import dataclass

from lostmid.config import settings_from_section


@dataclass(frozen=True)
class NoParameters:
    """Kinds none (the task loss) and bias (the fitted attention-logit bias: a model change)."""

    kind: str


@dataclass(frozen=True)
class Balance:
    """Algorithm 1: loss + beta/2 E_inf(nu) on the first ``sequences`` sequences (0: all)."""

    kind: str
    beta: float
    target: str  # the target density nu
    sequences: int


@dataclass(frozen=True)
class Reweight:
    """Algorithm 2: flag positions weighted by tau(f) ~ r(f)^eta, refreshed every ``every`` steps."""

    kind: str
    eta: float
    every: int
    probe_per_position: int


@dataclass(frozen=True)
class Observability:
    """Algorithm 3: loss + lam/2 E_obs with ``probes`` Hutchinson probes per monitored position."""

    kind: str
    lam: float
    probes: int
    monitored: int | float  # a count >= 1, or a fraction of L in (0, 1]


REMEDIES = {
    "none": NoParameters,
    "bias": NoParameters,
    "balance": Balance,
    "reweight": Reweight,
    "observability": Observability,
}
STRENGTH = {"balance": "beta", "reweight": "eta", "observability": "lam"}
TARGETS = ("uniform", "late", "early")


def remedy_settings(remedy: dict, variant: str):
    """The settings of ``variant``'s remedy section; a bad section is a ConfigError naming the key
    (``variants.<variant>.remedy.<key>``). An unknown or missing kind fails the schema check."""
    cls = REMEDIES.get(remedy.get("kind"), NoParameters)
    return settings_from_section(cls, remedy, f"variants.{variant}.remedy")
