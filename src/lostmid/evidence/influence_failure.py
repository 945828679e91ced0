"""Influence predicts failure (docs/evidence.md, "Influence predicts failure"): the blog's
middle link, "possibly the reason the network loses things from the end of the sequence is" that
late tokens have less influence, tested on the flag-recall runs.

Per seed: Spearman's rho, across the flag positions f = 2..L, between the influence at the answer's
position j = f - 1 and the failure rate at f. Two measures of influence (``MEASURES``): the averaged
input density m_j of ``results/influence`` and the conditioned one of ``results/answer_influence``
(the energy at f - 1 over the sequences whose flag is at f). Two readings: influence
at initialization (step 0) or at mid-training, failure at mid-training. Over seeds: Student t on
rho. Rule: rho < 0, margin ``evidence.influence_failure_margin``. The rows are their own family.

Across arms (the controls of the fix): ``flatness_predicts_preference``, decided by the claim of the
same name over the variants of one (L, depth) that reach mid-training (claims.yaml): outside any
family (written after the mechanism run's other rows were seen; docs/remedies.md).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from lostmid.evidence import decisions as dec
from lostmid.evidence import registry
from lostmid.evidence.inputs import Effects, EvidenceError, Inputs, NotRun, Setting, rows_of, runs_of
from lostmid.evidence.readings import late_minus_early_failure_per_seed, mid_training_step, not_reached
from lostmid.evidence.settings import EvidenceSettings
from lostmid.stats import statistics as st

MEASURES = {
    "averaged": "the input density m_{f-1} over the whole influence batch",
    "conditioned": "the input energy at f-1 over the influence batch's sequences whose flag is at f",
}


def influence_by_flag(inputs: Inputs, measure: str, variant: str, L: int, depth: int, step: int) -> pd.DataFrame:
    """(seed, flag_pos, influence) at ``step``: the measure's influence at the answer's position f - 1
    for every flag position f = 2..L."""
    if measure == "averaged":
        part = rows_of(inputs.influence, "influence", variant, L, depth, step)
        part = part[(part.layer == 0) & (part.position <= L - 1)]
        return pd.DataFrame({"seed": part.seed, "flag_pos": part.position + 1, "influence": part.density})
    part = rows_of(inputs.answer_influence, "answer_influence", variant, L, depth, step)
    return pd.DataFrame({"seed": part.seed, "flag_pos": part.flag_pos, "influence": part.density})


def failure_by_flag(failure: pd.DataFrame, variant: str, L: int, depth: int, step: int) -> pd.DataFrame:
    """(seed, flag_pos, failure) at ``step``: the failure rate at every flag position."""
    part = rows_of(failure, "failure", variant, L, depth, step)
    return pd.DataFrame({"seed": part.seed, "flag_pos": part.flag_pos, "failure": part.failures / part.n})


def influence_failure_rho_per_seed(influence: pd.DataFrame, failure: pd.DataFrame, L: int) -> pd.Series:
    """Per seed: ``rank_correlation`` across the flag positions 2..L of influence (``influence_by_flag``)
    against failure (``failure_by_flag``). Both tables must hold the same seeds, each with every flag position."""
    if set(influence.seed) != set(failure.seed):
        raise EvidenceError(
            f"the influence and failure tables hold different seeds: {sorted(set(influence.seed))} against "
            f"{sorted(set(failure.seed))}"
        )
    joined = influence.merge(failure, on=["seed", "flag_pos"], validate="one_to_one")
    counts = joined.groupby("seed").size()
    short = counts[counts != L - 1]
    if not short.empty:
        raise EvidenceError(
            f"seeds {list(short.index)} do not have influence and failure at all {L - 1} flag positions"
        )
    if not np.isfinite(joined[["influence", "failure"]].to_numpy()).all():
        raise EvidenceError("the influence or failure by flag position is not finite")
    rho = {
        int(seed): st.rank_correlation(g.influence, g.failure)
        for seed, g in joined.sort_values("flag_pos").groupby("seed", sort=True)
    }
    return pd.Series(rho, dtype=np.float64)


def fisher_z_interval(rho: np.ndarray, level: float) -> st.Interval | None:
    """The Fisher-z reading: Student t on atanh(rho), mapped back by tanh; None where some |rho| = 1."""
    if (np.abs(rho) >= 1).any():
        return None
    z = st.t_interval(np.arctanh(rho), level)
    return st.Interval(math.tanh(z.estimate), math.tanh(z.low), math.tanh(z.high), z.n, "Fisher z")


def influence_failure_settings(reading: str, inputs: Inputs, ev: EvidenceSettings) -> list[Setting]:
    """The settings of one reading: every variant of the failure table at every (L, depth), at its own
    mid-training checkpoint (the checkpoint's words say where influence and failure are read)."""
    found = []
    for name in sorted(set(inputs.failure.variant.astype(str))):
        for L, depth in runs_of(inputs.failure, name):
            step, _ = mid_training_step(inputs.failure, name, L, depth, ev.mid_accuracy)
            checkpoint = (
                "mid-training not reached"
                if step is None
                else f"influence at step 0, failure at step {step} (mid-training)"
                if reading == "initialization"
                else f"step {step} (mid-training)"
            )
            found.append(Setting(name, L, depth, inputs.residual(name), checkpoint))
    return NotRun.unless(found, "no variant in the failure table")


# The stronger reading in the note of every row: rho at most -influence_failure_margin.
STRONGER = dec.Rule("at_most", "influence_failure_margin", factor=-1)


def _claim_name(measure: str, reading: str) -> str:
    return f"{measure}_influence_" + ("at_init_" if reading == "initialization" else "") + "predicts_failure"


def influence_predicts_failure(measure: str, reading: str, inputs: Inputs, ev: EvidenceSettings, s: Setting):
    """Influence predicts failure: the ``measure`` of influence at the answer's position f-1, read at ``reading``,
    ranks the flag positions against their failure rate at the variant's mid-training checkpoint (rho < 0)."""
    name = _claim_name(measure, reading)
    margin, rule = ev.influence_failure_margin, registry.CLAIMS_BY_NAME[name].rule
    step, best = mid_training_step(inputs.failure, s.variant, s.L, s.depth, ev.mid_accuracy)
    if step is None:
        return not_reached(s.variant, best, ev)
    influence_step = 0 if reading == "initialization" else step
    influence = influence_by_flag(inputs, measure, s.variant, s.L, s.depth, influence_step)
    failure = failure_by_flag(inputs.failure, s.variant, s.L, s.depth, step)
    rho = influence_failure_rho_per_seed(influence, failure, s.L)
    # The declared estimator's interval (t over seeds) read against the stronger rule, for the note.
    strong = dec.verdict_by(STRONGER, st.t_interval(rho.to_numpy(), ev.level), ev)
    z = fisher_z_interval(rho.to_numpy(), ev.level)
    constant = int((rho == 0.0).sum())
    note = (
        f"influence at step {influence_step}, failure at step {step} (mid-training, best mean accuracy "
        f"{best:.3f}); {MEASURES[measure]}; stronger reading rho <= -{margin:g}: {strong}; "
        + (
            f"Fisher-z reading {dec.interval_words(z)}, {dec.verdict_by(rule, z, ev)}"
            if z is not None
            else "Fisher-z reading undefined (a seed has |rho| = 1)"
        )
        + f"; seeds with rho 0 (a constant profile or exactly no rank correlation): {constant}"
    )
    return Effects((rho.to_numpy(),), f"per-seed Spearman rho over the {s.L - 1} flag positions", note)


# =========================================================================== across arms


def trained_flatness_per_seed(metrics: pd.DataFrame, variant: str, L: int, depth: int, step: int, delta: float):
    """Per seed: log E_inf of the input density at ``step`` (region scale ``delta``): 0 is flat."""
    part = rows_of(metrics, "metrics", variant, L, depth, step)
    part = part[np.isclose(part.delta, delta)]
    if part.empty:
        raise NotRun(f"{variant} at L {L}, depth {depth} has no metrics rows at delta {delta:g}")
    e_inf = part.set_index("seed").E_inf.astype(np.float64)
    if not (np.isfinite(e_inf) & (e_inf > 0)).all():
        raise EvidenceError(f"{variant}'s E_inf at step {step} is not positive and finite")
    return np.log(e_inf)


def arm_flatness_and_preference(
    inputs: Inputs, ev: EvidenceSettings, arms, L: int, depth: int
) -> tuple[dict[str, pd.Series], dict[str, pd.Series]]:
    """Per arm, at its own mid-training checkpoint: the trained flatness (``trained_flatness_per_seed``)
    and the position preference (``late_minus_early_failure_per_seed``), each per seed. An arm that never
    reaches mid-training is in neither."""
    flatness, preference = {}, {}
    for arm in arms:
        step, _ = mid_training_step(inputs.failure, arm, L, depth, ev.mid_accuracy)
        if step is None:
            continue
        flatness[arm] = trained_flatness_per_seed(inputs.metrics, arm, L, depth, step, ev.delta)
        preference[arm] = late_minus_early_failure_per_seed(inputs.failure, arm, L, depth, step)
    return flatness, preference


def across_arms_settings(inputs: Inputs, ev: EvidenceSettings) -> list[Setting]:
    """One setting per (L, depth) of the failure table that holds three or more variants."""
    counts = inputs.failure.groupby(["L", "depth"]).variant.nunique()
    found = [
        Setting("across arms", int(L), int(depth), None, "each arm at its own mid-training")
        for (L, depth), n in counts.items()
        if n >= 3
    ]
    return NotRun.unless(found, "no (L, depth) with three or more variants in the failure table")


def flatness_predicts_preference_across_arms(inputs: Inputs, ev: EvidenceSettings, s: Setting) -> Effects:
    """Across the arms of one (L, depth): does a flatter trained model prefer early flags less
    (``flatness_predicts_preference``, rho > 0, margin ``influence_failure_margin``)? Arms that never
    reach mid-training are left out and named."""
    failure = inputs.failure
    arms = sorted(set(failure.variant[(failure.L == s.L) & (failure.depth == s.depth)].astype(str)))
    flatness, preference = arm_flatness_and_preference(inputs, ev, arms, s.L, s.depth)
    reached = list(flatness)
    left_out = [arm for arm in arms if arm not in flatness]
    if len(reached) < 3:
        raise NotRun(f"fewer than three arms reach mid-training at L {s.L}, depth {s.depth}: {reached}")
    note = (
        "per arm (mean log E_inf, mean late minus early failure): "
        + "; ".join(f"{arm} ({flatness[arm].mean():.3g}, {preference[arm].mean():.3g})" for arm in reached)
        + (f"; left out (mid-training not reached): {', '.join(left_out)}" if left_out else "")
    )
    return Effects((flatness, preference), note=note)
