"""Which property of the blog's B carries its effect (docs/remedies.md, "Controls for the fix"): every
*arm* (a bias variant: a reading of the fix, or a control built from the literal reading's B,
lostmid.analysis.bias_controls) against its baseline and against the literal reading, paired by seed.

The rows form their own family (``mechanism``) for the family-wise correction. They are gated on what
this comparison needs: the reference learns, and a fitted arm's fit did what it is for (its guard and its
checks on the fit model's held-out initializations, ``fit_checks.fit_not_evaluable``; the rule as first
written gated on the guard alone: ``evidence.mechanism_gate``, a deviation). Whether an arm's B flattens
the model it *trains* is not a gate but one of the measured properties
(``arm_flattens_trained_model_at_init``), since which property carries the effect is the question.
"""

from __future__ import annotations

from dataclasses import replace

from lostmid.evidence.fit_checks import fit_not_evaluable, gate, geometric_change, inserted_rows, log_change_per_init
from lostmid.evidence.inputs import Effects, Inputs, NotRun, Setting, pair_settings, runs_of
from lostmid.evidence.readings import (
    never_learns,
)
from lostmid.evidence.settings import EvidenceSettings

ARM_KINDS = ("bias", "control")  # lostmid.evidence.inputs: a control is a bias variant built by a rule


def _fit_failed(inputs: Inputs, ev: EvidenceSettings, s: Setting) -> str | None:
    """Why an arm is not evaluable because of its B: a fitted arm (or reference) whose fit did not do what
    it is for (``fit_not_evaluable``), or, under ``mechanism_gate: guard``, only one that failed its guard."""
    for variant in sorted({s.variant, s.reference} & set(inputs.of_kind("bias"))):
        why = fit_not_evaluable(inputs, ev, variant, s.L, s.depth, ev.mechanism_gate == "fit_checks")
        if why:
            return f"{variant}: {why}"
    return None


def _require_controls(inputs: Inputs) -> None:
    if not inputs.of_kind("control"):
        raise NotRun("no control variant in the run (the controls' run: config/mechanism.yaml)")


def arm_settings(checkpoint: str, inputs: Inputs, ev: EvidenceSettings) -> list[Setting]:
    """Every arm at every (L, depth) of the failure table, against its baseline (the variant without a
    remedy and with the same model and train overrides). Only in a run with controls (config/mechanism.yaml):
    elsewhere the bias arms' rows are the blog's own (c)-(e)."""
    _require_controls(inputs)
    found = []
    for kind in ARM_KINDS:
        try:
            settings = pair_settings(kind, "failure", checkpoint, inputs, ev)
        except NotRun:
            continue
        for s in settings:
            why = None if s.missing else gate(_fit_failed(inputs, ev, s), never_learns(inputs, ev, s))
            found.append(replace(s, reading=s.variant, not_evaluable=why))
    return NotRun.unless(found, "no bias or control variant in the failure table")


def literal_reading(inputs: Inputs) -> str:
    """The literal reading the controls are built from: the one variant their ``control.of`` names."""
    sources = {inputs.variants[name]["remedy"]["control"]["of"] for name in inputs.of_kind("control")}
    if len(sources) != 1:
        raise NotRun(
            "no control variant names the literal reading" if not sources else f"the controls name {sorted(sources)}"
        )
    return sources.pop()


def literal_settings(checkpoint: str, inputs: Inputs, ev: EvidenceSettings) -> list[Setting]:
    """Every other arm with the literal reading's baseline, against the literal reading, at each (L, depth)
    where both were trained."""
    literal = literal_reading(inputs)
    found = []
    for s in arm_settings(checkpoint, inputs, ev):
        if s.variant == literal or s.missing or s.reference != inputs.reference(literal):
            continue
        pair = replace(s, reference=literal)
        if (s.L, s.depth) not in runs_of(inputs.failure, literal):
            pair = replace(
                pair, missing=f"the literal reading {literal} has no failure rows at L {s.L}, depth {s.depth}"
            )
        else:
            pair = replace(pair, not_evaluable=gate(pair.not_evaluable, _fit_failed(inputs, ev, pair)))
        found.append(pair)
    return NotRun.unless(found, f"no arm beside the literal reading {literal} with its baseline")


# ----------------------------------------------------------------------------- per-seed effects


def arm_flattens_trained_model_at_init(inputs: Inputs, ev: EvidenceSettings, s: Setting) -> Effects:
    """Whether the arm's B flattens the model it trains, at initialization: per held-out initialization of
    the (source's) fit, log(E_inf with B / at B = 0) of the fit target's profile in the model B is inserted
    into (``inserted_imbalance_*``). A measured property of the arm, not a gate."""
    part = inserted_rows(inputs, s)
    first = part.iloc[0]
    note = (
        f"E_inf in the trained model {geometric_change(part, 'inserted_imbalance')}, on the fit model "
        f"{geometric_change(part, 'imbalance')} (geometric means over {len(part)} held-out inits); "
        f"B: {first.param}, fit model {first.fit_model}, c0 {first.c0:.3g}, lag slope {first.lag_slope:.3g}, "
        f"self-attention at init {first.self_attention_init_b0:.3g} -> {first.self_attention_init:.3g}"
    )
    method = "per held-out initialization of the fit (n_seeds counts them), log ratio of the inserted model's imbalance"
    return Effects((log_change_per_init(part, "inserted_imbalance").to_numpy(),), method, note, unit="held-out init")


def flatness_settings(inputs: Inputs, ev: EvidenceSettings) -> list[Setting]:
    """Every arm at every (L, depth) of the bias summary (the fit's or the control's held-out report)."""
    _require_controls(inputs)
    if inputs.bias_summary is None:
        raise NotRun("no bias_fit_summary table given")
    found = [
        Setting(name, L, depth, inputs.residual(name), "initialization (held-out inits)", reading=name)
        for kind in ARM_KINDS
        for name in inputs.of_kind(kind)
        for L, depth in runs_of(inputs.bias_summary, name)
    ]
    return NotRun.unless(found, "no bias or control variant in bias_fit_summary")
