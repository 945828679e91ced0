"""The config's ``evidence`` block: every decision rule's margin, level and checkpoint, fixed in advance.

Each key is a number stated before the default run's results were looked at (docs/evidence.md,
"Decision rules", says why each value); the evidence table repeats the rule in words on every
row. Keys left out take the defaults below, which are the values of config/config.yaml.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

from lostmid.errors import ConfigError


@dataclass(frozen=True)
class EvidenceSettings:
    level: float = 0.95  # level of every interval over seeds
    # "Mid-training": the first checkpoint after step 0 at which the baseline's mean evaluation
    # accuracy over seeds (balanced set, all flag positions) reaches this level: half-way from
    # chance (0.5) to perfect recall.
    mid_accuracy: float = 0.75
    # Smallest position effect that matters: slope of logit(failure) on p = f/L (log odds ratio of
    # failure between the first and the last position). 0.5 is an odds ratio of 1.65 across the
    # context, e.g. failure 0.30 early against 0.41 late.
    slope_margin: float = 0.5
    # Smallest difference in training speed that matters: the mean failure rate over training
    # (area under the failure curve divided by the span), in absolute failure rate.
    speed_margin: float = 0.02
    # Smallest difference in late-flag recall that matters (blog (e), "perfect recall all the way
    # along the sequence"): the failure rate on flags with p > 1/2, in absolute failure rate.
    recall_margin: float = 0.02
    # "Comparable task accuracy": accuracy difference at the last checkpoint within +- this.
    accuracy_margin: float = 0.05
    # Smallest change of E_inf that matters, on the natural log scale: log(1.5), a factor 1.5.
    log_ratio_margin: float = 0.4054651081081644
    delta: float = 0.2  # region scale of the influence metrics read (must be one of influence.deltas)
    # Initialization: the depth the blog quotes ("~10^6 after 4 layers") and the growth that matters.
    init_depth: int = 4
    init_growth_margin: float = 1.0  # orders of magnitude (log10) of the first/last ratio gained from depth 1
    blog_init_orders: float = 6.0  # the blog's ~10^6 after 4 layers, quoted beside ours
    # Deterministic claims: tolerances of the rule-based verdicts.
    structural_tolerance: float = 1.0e-6  # max relative deviation of the structural baseline from its closed form
    flow_tolerance: float = 0.1  # median relative error of the density-flow prediction against finite differences
    algebraic_tolerance: float = 1.0e-3  # a difference of regional densities smaller than this counts as no difference
    einf_zero: float = 0.01  # "E_inf close to 0"
    imbalance_ratio: float = 0.5  # "lowers the trace imbalance": at most this fraction of the baseline's
    probe_ratio: float = 0.5  # "falls with the probe count": the largest count's value at most this fraction of the smallest's

    @classmethod
    def from_dict(cls, raw: dict | None) -> "EvidenceSettings":
        """Settings from the config block; an unknown key or a bad value is one ConfigError naming it."""
        raw = {} if raw is None else raw
        if not isinstance(raw, dict):
            raise ConfigError(f"config key evidence must be a mapping, got {type(raw).__name__}")
        names = {f.name: f for f in fields(cls)}
        unknown = sorted(set(raw) - set(names))
        if unknown:
            raise ConfigError(f"config key evidence.{unknown[0]} is unknown; known keys: {sorted(names)}")
        values = {}
        for key, value in raw.items():
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ConfigError(f"config key evidence.{key} must be a finite number, got {value!r}")
            values[key] = int(value) if key == "init_depth" else float(value)
        settings = cls(**values)
        settings.check()
        return settings

    def check(self) -> None:
        if not 0 < self.level < 1:
            raise ConfigError(f"config key evidence.level must lie in (0, 1), got {self.level}")
        if not 0.5 < self.mid_accuracy < 1:
            raise ConfigError(f"config key evidence.mid_accuracy must lie in (0.5, 1), got {self.mid_accuracy}")
        if not 0 < self.delta < 0.5:
            raise ConfigError(f"config key evidence.delta must lie in (0, 0.5), got {self.delta}")
        if self.init_depth < 2:
            raise ConfigError(f"config key evidence.init_depth must be >= 2, got {self.init_depth}")
        for key in ("slope_margin", "speed_margin", "recall_margin", "accuracy_margin", "log_ratio_margin", "init_growth_margin",
                    "structural_tolerance", "flow_tolerance", "algebraic_tolerance", "einf_zero"):
            if not getattr(self, key) > 0:
                raise ConfigError(f"config key evidence.{key} must be > 0, got {getattr(self, key)}")
        for key in ("imbalance_ratio", "probe_ratio"):
            if not 0 < getattr(self, key) < 1:
                raise ConfigError(f"config key evidence.{key} must lie in (0, 1), got {getattr(self, key)}")
