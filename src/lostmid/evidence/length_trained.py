"""The trained claims of the sequence-length study (docs/length.md): the baseline's position effect (a)
and the fix's effect (e) as L grows, and (e)'s model-free reading at every L.

Trained arms at several L are variants named ``<arm>_L<n>`` beside ``<arm>`` (config/length.yaml):
the arm is the name without that suffix.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from lostmid.evidence.fit_checks import fit_not_evaluable
from lostmid.evidence.inputs import Effects, Inputs, NotEvaluable, NotRun, Setting, runs_of
from lostmid.evidence.readings import late_minus_early_failure_per_seed, mid_training_step, slopes_at
from lostmid.evidence.settings import EvidenceSettings


def arm(variant: str) -> str:
    """The arm of a variant: its name without an ``_L<n>`` suffix (config/length.yaml)."""
    return re.sub(r"_L\d+$", "", variant)


def trained_growth_settings(inputs: Inputs, ev: EvidenceSettings) -> list[Setting]:
    if inputs.failure is None:
        raise NotRun("no failure table")
    found = []
    by_arm: dict[tuple[str, int], list[tuple[int, str]]] = {}
    for variant in inputs.of_kind("none"):
        for L, depth in runs_of(inputs.failure, variant):
            by_arm.setdefault((arm(variant), depth), []).append((L, variant))
    for (_arm, depth), runs in sorted(by_arm.items()):
        if len({L for L, _ in runs}) >= 2:
            short, long = min(runs), max(runs)
            found.append(
                Setting(
                    variant=long[1],
                    reference=short[1],
                    L=long[0],
                    depth=depth,
                    residual=inputs.residual(long[1]),
                    checkpoint=f"L {long[0]} against L {short[0]}, each at its own mid-training",
                )
            )
    if not found:
        raise NotRun("no baseline arm trained at two or more lengths")
    return found


def _slopes_at_mid(inputs: Inputs, ev: EvidenceSettings, variant: str, L: int, depth: int) -> pd.Series:
    step, best = mid_training_step(inputs.failure, variant, L, depth, ev.mid_accuracy)
    if step is None:
        raise NotEvaluable(f"{variant} at L {L} never reached mid-training (best {best:.3f})")
    return slopes_at(inputs.failure, variant, L, depth, step)


def _short_L(s: Setting) -> int:
    return int(re.search(r"against L (\d+)", s.checkpoint).group(1))


def position_effect_grows_with_length(inputs: Inputs, ev: EvidenceSettings, s: Setting) -> Effects:
    """Trained: the baseline's position effect (a), the logistic slope of failure on p at mid-training,
    is larger at the longest L than at the shortest (Welch; seeds are independent runs at each L)."""
    long = _slopes_at_mid(inputs, ev, s.variant, s.L, s.depth)
    short = _slopes_at_mid(inputs, ev, s.reference, _short_L(s), s.depth)
    note = f"(a) slope: {long.mean():.3g} at L {s.L}, {short.mean():.3g} at L {_short_L(s)}"
    return Effects((long, short), note=note)


def _bias_arm(inputs: Inputs, baseline: str, L: int, depth: int) -> str:
    """The one bias variant paired with ``baseline`` at (L, depth): (e)'s arm of the growth claims."""
    paired = (v for v in inputs.of_kind("bias") if inputs.reference(v) == baseline)
    fixed = sorted(v for v in paired if (L, depth) in runs_of(inputs.failure, v))
    if not fixed:
        raise NotRun(f"no bias variant paired with {baseline} at L {L}")
    if len(fixed) > 1:
        raise NotEvaluable(f"{len(fixed)} bias variants pair with {baseline} at L {L} ({', '.join(fixed)})")
    return fixed[0]


def _fix_effect(inputs: Inputs, ev: EvidenceSettings, variant: str, baseline: str, L: int, depth: int, per_seed):
    """(e)'s per-seed paired effect (the bias arm ``variant`` minus its ``baseline``), each at its own
    mid-training, with ``per_seed(failure, variant, L, depth, step)``. Not evaluable when the arm's fit did
    not do what it is for (``fit_not_evaluable``; ``evidence.length_gate: none``, the rule as first
    written, skips this)."""
    if ev.length_gate == "fit_checks":
        why = fit_not_evaluable(inputs, ev, variant, L, depth)
        if why:
            raise NotEvaluable(f"{variant} at L {L}: {why}")
    values = []
    for arm_variant in (variant, baseline):
        step, best = mid_training_step(inputs.failure, arm_variant, L, depth, ev.mid_accuracy)
        if step is None:
            raise NotEvaluable(f"{arm_variant} at L {L} never reached mid-training (best {best:.3f})")
        values.append(per_seed(inputs.failure, arm_variant, L, depth, step))
    shared = values[0].index.intersection(values[1].index)
    return (values[0].loc[shared] - values[1].loc[shared]).astype(np.float64)


def fix_effect_grows_with_length(inputs: Inputs, ev: EvidenceSettings, s: Setting) -> Effects:
    """The interaction: (e)'s effect (debiased - baseline slope, each at its own mid-training) is more
    negative at the longest L than at the shortest (the fix matters more as L grows)."""
    short_L = _short_L(s)
    long = _fix_effect(inputs, ev, _bias_arm(inputs, s.variant, s.L, s.depth), s.variant, s.L, s.depth, slopes_at)
    short = _fix_effect(
        inputs, ev, _bias_arm(inputs, s.reference, short_L, s.depth), s.reference, short_L, s.depth, slopes_at
    )
    note = f"(e) effect: {long.mean():.3g} at L {s.L}, {short.mean():.3g} at L {short_L}"
    return Effects((long, short), note=note)


def model_free_settings(inputs: Inputs, ev: EvidenceSettings) -> list[Setting]:
    found = []
    for variant in inputs.of_kind("bias"):
        reference = inputs.reference(variant)
        if reference is None:
            continue
        for L, depth in runs_of(inputs.failure, variant):
            found.append(
                Setting(variant, L, depth, inputs.residual(variant), "each at its own mid-training", reference)
            )
    if not found:
        raise NotRun("no bias variant with a reference in the failure table")
    return found


def fix_lowers_model_free_preference(inputs: Inputs, ev: EvidenceSettings, s: Setting) -> Effects:
    """(e), model-free, at every L: the paired difference (debiased - baseline) of the late-minus-early
    failure rate, each at its own mid-training; rule less than zero, margin ``recall_margin``."""
    effect = _fix_effect(inputs, ev, s.variant, s.reference, s.L, s.depth, late_minus_early_failure_per_seed)
    return Effects((effect.to_numpy(),), "paired by seed")
