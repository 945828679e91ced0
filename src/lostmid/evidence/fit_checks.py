"""The bias fit's checks, one row per reading of the blog's fix: did the fit flatten the profile on held-out
initializations without silencing the context?

A *reading* of the blog's fix is a bias variant (its name): how B is fitted (target, positions, fit model,
parametrization) and what it is inserted into. Every claim about the fix gets one row per reading. The fit's
checks come first: before (c), (d) or (e) is decided for a reading, its fit must have done what it is for
(flattened the profile on held-out initializations, kept the context's share, passed its own guard); otherwise
those rows are "not evaluable" (``fit_not_evaluable``: a verdict on a broken intervention would be about our
fit, not the blog's)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from lostmid.evidence import registry
from lostmid.evidence.estimators import failed_check, made_by
from lostmid.evidence.inputs import Effects, EvidenceError, Inputs, NotRun, Setting, runs_of
from lostmid.evidence.settings import EvidenceSettings
from lostmid.stats import statistics as st

# The fit's checks (rows of claims.yaml) that gate every claim about a reading, by name: on the fit model's
# held-out initializations; and, for the claims about training with B (``fit_not_evaluable(trained=True)``), in the
# model B trains in where that is another (``Inputs.trains_elsewhere``; ``evidence.fit_gate``).
CHECKS = ("bias_fit_flattens_profile", "bias_fit_keeps_context_share")
TRAINED_CHECK = "bias_fit_flattens_trained_model"


def fit_rows(inputs: Inputs, s: Setting) -> pd.DataFrame:
    """The bias_fit_summary rows of one reading (one per held-out initialization); NotRun when there are none."""
    if inputs.bias_summary is None:
        raise NotRun("no bias_fit_summary table given")
    table = inputs.bias_summary
    part = table[(table.variant == s.variant) & (table.L == s.L) & (table.depth == s.depth)]
    if part.empty:
        raise NotRun(f"bias_fit_summary has no rows of {s.variant} at L {s.L}, depth {s.depth}")
    if not part.heldout_init.is_unique:
        raise EvidenceError(
            f"bias_fit_summary lists a held-out initialization of {s.variant} at L {s.L}, depth {s.depth} twice"
        )
    columns = [f"{q}_{stage}" for q in ("imbalance", "context_share") for stage in ("before", "after")]
    values = part[columns].to_numpy(np.float64)
    if not (np.isfinite(values).all() and (values > 0).all()):
        raise EvidenceError(
            f"bias_fit_summary of {s.variant} at L {s.L}, depth {s.depth}: an imbalance or context "
            "share is not positive and finite"
        )
    return part.sort_values("heldout_init")


def inserted_rows(inputs: Inputs, s: Setting) -> pd.DataFrame:
    """``fit_rows`` with the measures in the model B is inserted into (``inserted_*``); NotRun without them."""
    part = fit_rows(inputs, s)
    if not {"inserted_imbalance_before", "inserted_imbalance_after"} <= set(part.columns):
        raise NotRun("bias_fit_summary has no inserted_imbalance columns")
    return part


def geometric_change(part: pd.DataFrame, quantity: str) -> str:
    """ "before -> after": the geometric means over the held-out inits of ``quantity`` at B = 0 and with B."""
    before, after = (float(np.exp(np.log(part[f"{quantity}_{stage}"]).mean())) for stage in ("before", "after"))
    return f"{before:.3g} -> {after:.3g}"


def log_change_per_init(part: pd.DataFrame, quantity: str) -> pd.Series:
    """Per held-out initialization: log(quantity with the fitted B / quantity at B = 0)."""
    after, before = (part[f"{quantity}_{stage}"].to_numpy(np.float64) for stage in ("after", "before"))
    return pd.Series(np.log(after / before), index=part.heldout_init.to_numpy())


SHARE_REFERENCE_WORDS = {"flat_capped": "min(share at B = 0, (L-1)/L)", "unbiased": "share at B = 0"}


def log_share_change_per_init(part: pd.DataFrame, L: int, reference: str = "flat_capped") -> pd.Series:
    """Per held-out initialization: log(context share with the fitted B / its reference), the reference
    being the share at B = 0 or the share of a flat profile over all L positions, (L-1)/L, whichever is
    lower (``flat_capped``). A whole-profile fit on a model whose last position has no voice at B = 0
    (share ~1, the no-residual network) gives that position its 1/L: the context's share then falls to
    (L-1)/L without any position being silenced, which is what the check is about. ``unbiased``: the
    share at B = 0, the rule as first written (a deviation: lostmid.evidence.deviations)."""
    after, before = (part[f"context_share_{stage}"].to_numpy(np.float64) for stage in ("after", "before"))
    reference_share = np.minimum(before, (L - 1) / L) if reference == "flat_capped" else before
    return pd.Series(np.log(after / reference_share), index=part.heldout_init.to_numpy())


def _fit_words(part: pd.DataFrame) -> str:
    first = part.iloc[0]
    return (
        f"fit: target {first.target}, positions {first.positions}, fit model {first.fit_model}, "
        f"param {first.param}; the fit's guard accepted it: {bool(part.accepted.astype(bool).all())}"
    )


def over_inits(values, what: str, note: str, **terms) -> Effects:
    """The per-init ``values`` over the held-out initializations of the fit (the unit of replication: n_seeds
    counts them)."""
    method = f"per held-out initialization of the fit (the unit of replication: n_seeds counts them), {what}"
    return Effects((np.asarray(values),), method, note, terms, unit="held-out init")


def reading_settings(inputs: Inputs, ev: EvidenceSettings) -> list[Setting]:
    """One setting per reading: every bias variant at every (L, depth) where the run fitted or trained it."""
    found = set()
    for name in inputs.of_kind("bias"):
        for table in (inputs.bias_summary, inputs.bias_matrix, inputs.failure):
            if table is not None and "variant" in table:
                found |= {(name, L, depth) for L, depth in runs_of(table, name)}
    if not found:
        raise NotRun("no bias variant (remedy kind bias) in the run's tables")
    return [
        Setting(v, L, depth, inputs.residual(v), "initialization (held-out inits of the fit)", reading=v)
        for v, L, depth in sorted(found)
    ]


def bias_fit_flattens_profile(inputs: Inputs, ev: EvidenceSettings, s: Setting) -> Effects:
    """The blog's fit "flatten[s] the influence profile above at initialization": on the fit's held-out
    initializations, the imbalance E_inf of the fitted target's profile over the fit's positions falls from B = 0
    to the fitted B. Per held-out initialization: log(E_inf after / E_inf before)."""
    part = fit_rows(inputs, s)
    change = log_change_per_init(part, "imbalance")
    note = f"E_inf {geometric_change(part, 'imbalance')} (geometric means over {len(part)} held-out inits); "
    return over_inits(change.to_numpy(), "log(E_inf with the fitted B / at B = 0)", note + _fit_words(part))


def trained_model_settings(inputs: Inputs, ev: EvidenceSettings) -> list[Setting]:
    """The readings whose B trains in a model other than its fit's (``Inputs.trains_elsewhere``), one setting each
    where the run fitted or trained it."""
    found = [s for s in reading_settings(inputs, ev) if inputs.trains_elsewhere(s.variant)]
    return NotRun.unless(found, "no bias variant trains in a model other than its fit's")


def bias_fit_flattens_trained_model(inputs: Inputs, ev: EvidenceSettings, s: Setting) -> Effects:
    """The fit flattens the model B *trains* in, not only its fit model: on the fit's held-out initializations drawn
    in the model B is inserted into (``inserted_imbalance_*``), log(E_inf with B / at B = 0) of the fit target's
    profile. For a B fitted on another model (the blog's literal reading: fitted without the residual path,
    trained with it) a flat fit model says nothing about the model the claims are about."""
    part = inserted_rows(inputs, s)
    change = log_change_per_init(part, "inserted_imbalance")
    means = f"(geometric means over {len(part)} held-out inits)"
    note = f"E_inf in the trained model {geometric_change(part, 'inserted_imbalance')} {means}; "
    return over_inits(change.to_numpy(), "log(E_inf with B / at B = 0) in the trained model", note + _fit_words(part))


def bias_fit_keeps_context_share(inputs: Inputs, ev: EvidenceSettings, s: Setting) -> Effects:
    """The fit flattens the profile without silencing it: the context's share (positions 1..L-1) of the profile's
    total is not lower with the fitted B than at B = 0 (or than a flat profile's (L-1)/L, whichever is lower:
    log_share_change_per_init), on held-out initializations. Per held-out initialization: log(share after / that
    reference); a non-inferiority test."""
    part = fit_rows(inputs, s)
    change = log_share_change_per_init(part, s.L, ev.share_reference)
    ratio = f"log(context share with the fitted B / {SHARE_REFERENCE_WORDS[ev.share_reference]})"
    before, after = (100 * float(part[f"context_share_{stage}"].mean()) for stage in ("before", "after"))
    note = f"context share {before:.3g}% -> {after:.3g}% (mean over {len(part)} held-out inits); "
    return over_inits(change.to_numpy(), ratio, note + _fit_words(part), ratio=ratio)


def fit_not_evaluable(
    inputs: Inputs,
    ev: EvidenceSettings,
    variant: str | None,
    L: int,
    depth: int,
    checks: bool = True,
    trained: bool = False,
) -> str | None:
    """Why the claims about a reading cannot be decided because of its fit (None: the fit did what it
    is for): no report of the fit, a failed guard, or one of its checks (``CHECKS``) not supported at
    the row's level (``checks=False``: the guard alone). ``trained``: a claim about training with B, which is
    also gated on ``TRAINED_CHECK`` where B trains in a model other than its fit's (``evidence.fit_gate``
    trained_model; fit_model, the rule as first written, does not)."""
    if variant is None:
        return "the bias matrix names no variant, so its fit cannot be checked"
    s = Setting(variant, L, depth)
    try:
        part = fit_rows(inputs, s)
    except NotRun as why:
        return f"the fit's effect is unchecked ({why})"
    problems = [] if part.accepted.astype(bool).all() else ["the fit failed its own guard (accepted false)"]
    names = CHECKS if checks else ()
    if checks and trained and ev.fit_gate == "trained_model" and inputs.trains_elsewhere(variant):
        names += (TRAINED_CHECK,)
    for check in (registry.CLAIMS_BY_NAME[name] for name in names):
        failed = failed_check(check, inputs, ev, s)
        if failed:
            problems.append(f"{check.name} is {failed}")
    return "the fit did not do what it is for: " + "; ".join(problems) if problems else None


def gate(*reasons: str | None) -> str | None:
    """Why a row is not evaluable: the reasons given, joined (None when there are none)."""
    found = [r for r in reasons if r]
    return "; ".join(found) if found else None


def fit_inputs(summary: pd.DataFrame, fit: str) -> tuple[Inputs, Setting] | None:
    """The inputs and setting of one fit's checks (``summary``: a study's bias_fit_summary rows; the fit's own, at
    its L and depth); None where the summary holds no row of it."""
    part = summary[summary.variant == fit]
    if part.empty:
        return None
    setting = Setting(fit, int(part.L.iloc[0]), int(part.depth.iloc[0]))
    return Inputs(variants={fit: {}}, model={}, bias_summary=part), setting


def default_settings() -> EvidenceSettings:
    """The evidence settings a study's gate reads its fit checks at: the defaults (config/config.yaml's level)."""
    from lostmid.config import settings_from_section

    return settings_from_section(EvidenceSettings, {}, "evidence")


def fit_reasons(summary: pd.DataFrame, fits: list[str]) -> dict[str, str | None]:
    """Per fit of a study's fix arm (``summary``: its bias_fit_summary rows), why it fails the fit checks on the
    model it trains (``fit_not_evaluable``: the guard and ``CHECKS`` at the default evidence settings' level); None
    where it passes. A fit without rows in the summary fails: it has no check."""
    ev = default_settings()
    reasons = {}
    for fit in fits:
        found = fit_inputs(summary, fit)
        if found is None:
            reasons[fit] = "no fit check in the record"
            continue
        inputs, s = found
        reasons[fit] = fit_not_evaluable(inputs, ev, fit, s.L, s.depth)
    return reasons


def fit_flatness(summary: pd.DataFrame, fits: list[str]) -> dict[str, st.Interval]:
    """Per fit of a study's fix arm that the summary holds: the gate's measure as its check makes it
    (``bias_fit_flattens_profile`` by its declared estimator, ``made_by``): the mean of log(E_inf with B / at B = 0)
    over the fit's held-out initializations and its interval at the default evidence settings' level."""
    ev, check = default_settings(), registry.CLAIMS_BY_NAME[CHECKS[0]]
    found = {fit: fit_inputs(summary, fit) for fit in fits}
    return {fit: made_by(check, pair[0], ev, pair[1]).interval for fit, pair in found.items() if pair is not None}
