"""The config's ``evidence`` block: every decision rule's margin, level and checkpoint, fixed in advance.

Each key is a number stated before the default run's results were looked at (docs/evidence.md,
"Decision rules", says why each value); the evidence table repeats the rule in words on every
row. Built by ``lostmid.config.settings_from_section``: keys left out take the config schema's
defaults, which are the values of config/config.yaml. What each key means is said once, in its
``description`` in ``lostmid/config.schema.yaml``.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class EvidenceSettings:
    # Intervals, the run's plan (a row over fewer seeds or windows is a pilot) and the mid-training checkpoint.
    level: float
    min_seeds: int
    min_windows: int
    mid_accuracy: float
    # The smallest effects that matter (the margins of the trained claims' rules).
    slope_margin: float
    speed_margin: float
    preference_margin: float
    recall_margin: float
    accuracy_margin: float
    log_ratio_margin: float
    recency_margin: float
    share_margin: float
    # The rules changed after data were seen (their first form: lostmid.evidence.deviations).
    share_reference: str
    mechanism_gate: str
    fit_gate: str
    length_gate: str
    influence_failure_margin: float
    retrieval_auc_margin: float
    delta: float  # region scale of the influence metrics read (one of influence.deltas)
    # Initialization: the depth the blog quotes ("~10^6 after 4 layers") and the growth that matters.
    init_depth: int
    init_growth_margin: float
    density_growth_margin: float
    blog_init_orders: float
    # Deterministic claims and the paper's validation protocol: tolerances and ratios.
    structural_tolerance: float
    flow_tolerance: float
    algebraic_tolerance: float
    einf_zero: float
    imbalance_ratio: float
    z_growth_margin: float
    probe_ratio: float
    overhead_ratio: float
    # The sequence-length study (docs/length.md, "Rules").
    length_growth_margin: float
    length_concentration_margin: float
