"""The config's ``evidence`` block: every decision rule's margin, level and checkpoint, fixed in advance.

Each key is a number stated before the default run's results were looked at (docs/evidence.md,
"Decision rules", says why each value); the evidence table repeats the rule in words on every
row. Built by ``lostmid.config.settings_from_section``: keys left out take the config schema's
defaults, which are the values of config/config.yaml.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class EvidenceSettings:
    level: float  # level of every interval over seeds
    # The run's plan: a row over fewer seeds is a pilot, with no verdict (2: every interval decides).
    min_seeds: int
    # The retrieval stage's plan: a row over fewer windows (its unit of replication) is a pilot, not decided.
    min_windows: int
    # "Mid-training": the first checkpoint after step 0 at which the baseline's mean evaluation
    # accuracy over seeds (balanced set, all flag positions) reaches this level: half-way from
    # chance (0.5) to perfect recall.
    mid_accuracy: float
    # Smallest position effect that matters: slope of logit(failure) on p = f/L (log odds ratio of
    # failure between the first and the last position). 0.5 is an odds ratio of 1.65 across the
    # context, e.g. failure 0.30 early against 0.41 late.
    slope_margin: float
    # Smallest difference in training speed that matters: the mean failure rate over training
    # (area under the failure curve divided by the span), in absolute failure rate.
    speed_margin: float
    # The model-free position preference (late minus early failure rate, blog (a) and (e)): the
    # smallest difference that matters, in absolute failure rate.
    preference_margin: float
    # Smallest difference in late-flag recall that matters (blog (e), "perfect recall all the way
    # along the sequence"): the failure rate on flags with p > 1/2, in absolute failure rate.
    recall_margin: float
    # "Comparable task accuracy": accuracy difference at the last checkpoint within +- this.
    accuracy_margin: float
    # Smallest change of E_inf that matters, on the natural log scale: log(1.5), a factor 1.5.
    log_ratio_margin: float
    # The fitted bias prefers recent keys (blog (c)): the least-squares line of the mean bias by lag
    # over lags >= 1 falls by at least this many logits from the nearest key to the farthest.
    recency_margin: float
    # The fit keeps the context's voice: the context's share of the influence profile may fall by at
    # most this, on the natural log scale (log 1.1: a tenth).
    share_margin: float
    # The reference of that share: "flat_capped", min(share at B = 0, (L-1)/L), or "unbiased", the
    # share at B = 0 (the rule as first written: lostmid.evidence.deviations).
    share_reference: str
    # What makes a fitted arm of the controls run not evaluable: "fit_checks", its fit failed its guard or
    # did not do what it is for (lostmid.evidence.fit_checks.fit_not_evaluable); "guard", only a failed
    # guard (the rule as first written: lostmid.evidence.deviations).
    mechanism_gate: str
    # What else makes the length study's rows on the fix's effect not evaluable: "fit_checks", the bias arm's
    # fit failed its guard or a fit check; "none", nothing (the rule as first written: deviations).
    length_gate: str
    # Influence predicts failure (docs/evidence.md, "Influence predicts failure"): the blog's "the reason"
    # implies a strong monotone link; Spearman's rho across flag positions as strong as -this matters.
    influence_failure_margin: float
    # The retrieval claims (docs/retrieval.md): an AUC of 0.6 is the smallest predictive power that matters.
    retrieval_auc_margin: float
    delta: float  # region scale of the influence metrics read (must be one of influence.deltas)
    # Initialization: the depth the blog quotes ("~10^6 after 4 layers") and the growth that matters.
    init_depth: int
    init_growth_margin: float  # orders of magnitude (log10) of the first/last ratio gained from depth 1
    density_growth_margin: float  # the same for the squared loss-gradient density (twice the blog's orders)
    blog_init_orders: float  # the blog's ~10^6 after 4 layers, quoted beside ours
    # Deterministic claims: tolerances of the rule-based verdicts.
    structural_tolerance: float  # max relative deviation of the structural baseline from its closed form
    flow_tolerance: float  # median relative error of the density-flow prediction against finite differences
    algebraic_tolerance: float  # a difference of regional densities smaller than this counts as no difference
    einf_zero: float  # "E_inf close to 0"
    imbalance_ratio: float  # "lowers the trace imbalance": at most this fraction of the baseline's
    z_growth_margin: float  # "Algorithm 1 more than doubles Z": log(Z Alg. 1 / Z baseline) that matters
    probe_ratio: (
        float  # "falls with the probe count": the largest count's value at most this fraction of the smallest's
    )
    # The validation protocol (docs/validation.md): a remedy's step costs at most this many times the
    # baseline's, in time and in peak memory (the paper: the same order, a larger constant).
    overhead_ratio: float
    # The sequence-length study (docs/length.md, "Rules"): the growth of log10 first/last per doubling
    # of L that matters, log10 2 (the ratio grows at least in proportion to L: the blog's rod, whose
    # energy "grows faster than L"); twice that for the squared density. And for the statistics whose
    # null is not 0 for every shape (E_inf, the last position's share, log2 per doubling): half the
    # slope of a spike on the last position (1).
    length_growth_margin: float
    length_concentration_margin: float
