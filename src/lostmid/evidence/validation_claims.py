"""The paper's validation protocol (section 4.5) on trained runs (docs/validation.md): Algorithms 1-3
beside their baselines where the measure carries signal, the position shift, the dose-response of each penalty,
and the overhead (a remedy's time and memory per training step).

Where a measure carries signal (docs/validation.md says why): the primary reading compares each arm at its *own*
mid-training checkpoint (``readings.mid_training_step``), on the quantity each algorithm penalizes; the last
common checkpoint is reported beside it, and every normalized figure carries the paired log ratio of its raw
total (Z, the trace total) in the note. Each reading returns its per-seed effect (``per_seed``), which the claim
and the power plan (``scripts/evidence_power.py --validation``) share.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import numpy as np
import pandas as pd

from lostmid.core.density import imbalance
from lostmid.evidence import decisions as dec
from lostmid.evidence import registry
from lostmid.evidence.estimators import failed_check
from lostmid.evidence.inputs import (
    Effects,
    Inputs,
    NotRun,
    Setting,
    every_kind,
    last_common_step,
    pair_settings,
    rows_of,
    runs_of,
)
from lostmid.evidence.paper_claims import log_metric
from lostmid.evidence.readings import (
    late_failure_per_seed,
    matched_pair,
    mean_accuracy_at,
    mid_training_step,
    paired,
)
from lostmid.evidence.settings import EvidenceSettings
from lostmid.stats import statistics as st
from lostmid.tables.summaries import accuracy_per_checkpoint

MATCHED = "own mid-training (matched accuracy)"
LAST = "last common checkpoint"
# Each seed of each arm where its own accuracy crosses the mid-training level, interpolated between checkpoints
# (the checkpoint grid left Algorithm 1 at 0.923 against the baseline's 0.762 at "matched" accuracy).
INTERPOLATED = "matched accuracy, interpolated between checkpoints"
# The position shift's two checkpoints: the last (the reading fixed first), and the mid-training checkpoint of the
# uniform-law reference, both arms at that step (added after the validation run's shift did not bite at the last
# checkpoint: by then every arm recalls every position; docs/validation.md, "Position shift").
SHIFT_LAST = f"{LAST}, evaluated on the uniform balanced set"
SHIFT_MID = "mid-training of the uniform-law reference (both arms there), evaluated on the uniform balanced set"
SHIFTS = ("early", "late")
READINGS = {"matched": MATCHED, "last": LAST, "interpolated": INTERPOLATED}  # by the names claims.yaml gives them


def per_seed(values: pd.Series, method: str, note: str = "", terms: dict | None = None, log_scale=False) -> Effects:
    """A per-seed effect (NaN seeds left out) for the declared Student t estimator (``log_scale``: its exp, for the
    log-mean estimator, whose t interval of the logs is mapped back by exp and whose rule is read on the ratio)."""
    values = values.dropna().to_numpy()
    return Effects((np.exp(values) if log_scale else values,), method, note, terms or {})


# =========================================================================== which arms, which checkpoints


def flag_law(inputs: Inputs, name: str) -> str:
    """The training flag law a variant overrides (``uniform`` when it sets none): the position-shift
    arms are the variants whose ``train.flag_law`` is early or late."""
    return (inputs.variants[name].get("train") or {}).get("flag_law", "uniform")


def aimed_at_uniform(inputs: Inputs, name: str) -> bool:
    """Trained on the uniform flag law with the uniform target density (Algorithm 1's ``target``)."""
    return (
        flag_law(inputs, name) == "uniform"
        and (inputs.variants[name].get("remedy") or {}).get("target", "uniform") == "uniform"
    )


def uniform_arm_settings(kind: str, table: str, readings: list[str], inputs: Inputs, ev: EvidenceSettings):
    """The remedy arms of ``kind`` trained on the uniform law for the uniform target, paired with
    their references (``pair_settings``), once per checkpoint reading named in ``readings`` (``READINGS``)."""
    found = [
        Setting(s.variant, s.L, s.depth, s.residual, READINGS[name], s.reference, s.missing)
        for s in pair_settings(kind, table, "", inputs, ev)
        if aimed_at_uniform(inputs, s.variant)
        for name in readings
    ]
    return NotRun.unless(
        found, f"no {kind} variant trained on the uniform flag law for the uniform target in the {table} table"
    )


def arm_steps(inputs: Inputs, ev: EvidenceSettings, s: Setting, table: pd.DataFrame) -> tuple[int, int]:
    """The checkpoints of the setting's variant and of its reference: each its own mid-training
    checkpoint (MATCHED), or the last step both have in ``table`` (LAST)."""
    if s.checkpoint == LAST:
        step = last_common_step(table, s)
        return step, step
    return own_mid_training(inputs, ev, s.variant, s), own_mid_training(inputs, ev, s.reference, s)


def own_mid_training(inputs: Inputs, ev: EvidenceSettings, name: str, s: Setting) -> int:
    """``name``'s mid-training checkpoint at the setting's L and depth (NotRun if it never gets there)."""
    step, best = mid_training_step(inputs.failure, name, s.L, s.depth, ev.mid_accuracy)
    if step is None:
        raise NotRun(
            f"mid-training undefined: {name}'s mean evaluation accuracy never reached {ev.mid_accuracy:g} "
            f"(best {best:.3f})"
        )
    return step


def _interval_words(values: pd.Series, ev: EvidenceSettings) -> str:
    return dec.interval_words(st.t_interval(values.to_numpy(), ev.level))


def _steps_words(s: Setting, steps: tuple[int, int]) -> str:
    each = f"{s.variant} at step {steps[0]}, {s.reference} at step {steps[1]}"
    return f"step {steps[0]}" if steps[0] == steps[1] else each


# =========================================================================== the loss-free profiles


def observability_per_seed(inputs: Inputs, variant: str, s: Setting, step: int, quantity: str) -> pd.Series:
    """Per seed, from the loss-free profiles at ``step``: the log of the trace imbalance
    (``trace``: E_obs of the trace density, Algorithm 3's quantity with every position), of the
    output-Jacobian imbalance (``jacobian``), or of the raw trace total (``trace_total``)."""
    if inputs.observability is None:
        raise NotRun("table observability not given (influence.trace_variants names no variant)")
    part = rows_of(inputs.observability, "observability", variant, s.L, s.depth, step)
    if quantity == "trace_total":
        values = part.groupby("seed").trace.sum()
    else:
        column = {"trace": "trace_density", "jacobian": "jacobian_density"}[quantity]
        values = part.groupby("seed")[column].apply(lambda d: float(imbalance(d.to_numpy(np.float64), 1.0)))
    if not (np.isfinite(values).all() and (values > 0).all()):
        raise NotRun(f"the {quantity} of {variant} at step {step} is not positive and finite")
    return np.log(values.astype(np.float64))


def _log_ratio(per_variant: Callable[[str, int], pd.Series], s: Setting, steps: tuple[int, int]) -> pd.Series:
    return paired(per_variant(s.variant, steps[0]), per_variant(s.reference, steps[1]))


# =========================================================================== per-seed effects of the claims


def _accuracy_gap(inputs: Inputs, s: Setting, steps: tuple[int, int]) -> str:
    """The two arms' mean evaluation accuracies at their checkpoints: what "matched" leaves unmatched."""
    accuracy = [mean_accuracy_at(inputs.failure, v, s.L, s.depth, t) for v, t in zip((s.variant, s.reference), steps)]
    return f"mean accuracy {accuracy[0]:.3f} against {accuracy[1]:.3f} (gap {accuracy[0] - accuracy[1]:+.3f})"


def interpolated_log_ratio(inputs: Inputs, ev: EvidenceSettings, s: Setting, column: str = "E_inf") -> Effects:
    """Per seed, log(column remedy / reference), each arm's log interpolated to where the seed's own
    accuracy crosses ``mid_accuracy`` (``readings.at_matched_accuracy``)."""
    arms = matched_pair(inputs, ev, s, lambda v, step: log_metric(inputs, ev, v, s, step, column))
    values = paired(arms[0][0], arms[1][0])
    method = (
        f"per-seed log({column} remedy / {column} baseline), each seed interpolated to accuracy {ev.mid_accuracy:g}"
    )
    return per_seed(values, method, "; ".join(words for _, words in arms) + "; accuracy gap 0 by construction")


def balance_e_inf(inputs: Inputs, ev: EvidenceSettings, s: Setting) -> Effects:
    """Algorithm 1's (and 2's: their claims' rules differ) log E_inf ratio against the reference."""
    if s.checkpoint == INTERPOLATED:
        return interpolated_log_ratio(inputs, ev, s)
    steps = arm_steps(inputs, ev, s, inputs.metrics)
    values = _log_ratio(lambda v, step: log_metric(inputs, ev, v, s, step), s, steps)
    z = _log_ratio(lambda v, step: log_metric(inputs, ev, v, s, step, "Z"), s, steps)
    return per_seed(
        values,
        f"per-seed log(E_inf remedy / E_inf baseline), {_steps_words(s, steps)}, delta {ev.delta:g}",
        f"raw total energy: log(Z remedy / Z baseline) {_interval_words(z, ev)}; {_accuracy_gap(inputs, s, steps)}",
    )


def _loss_free(inputs: Inputs, ev: EvidenceSettings, s: Setting, quantity: str) -> tuple[pd.Series, tuple[int, int]]:
    """The paired log ratio of a loss-free ``quantity`` (``observability_per_seed``), and the arms' steps."""
    steps = arm_steps(inputs, ev, s, inputs.observability if inputs.observability is not None else inputs.metrics)
    return _log_ratio(lambda v, step: observability_per_seed(inputs, v, s, step, quantity), s, steps), steps


def balance_jacobian(inputs: Inputs, ev: EvidenceSettings, s: Setting) -> Effects:
    values, steps = _loss_free(inputs, ev, s, "jacobian")
    return per_seed(
        values, f"per-seed log ratio of the imbalance of the output-Jacobian density, {_steps_words(s, steps)}"
    )


def observability_trace(inputs: Inputs, ev: EvidenceSettings, s: Setting) -> Effects:
    values, steps = _loss_free(inputs, ev, s, "trace")
    total, _ = _loss_free(inputs, ev, s, "trace_total")
    metrics = inputs.metrics[np.isclose(inputs.metrics.delta, ev.delta)]
    lim = paired(
        *(
            rows_of(metrics, "metrics", v, s.L, s.depth, step).set_index("seed").LIM
            for v, step in zip((s.variant, s.reference), steps)
        )
    )
    return per_seed(
        values,
        f"per-seed log ratio of the exact trace imbalance E_obs (every position), {_steps_words(s, steps)}",
        f"raw trace total: log ratio {_interval_words(total, ev)}; LIM (delta {ev.delta:g}) remedy - baseline "
        f"{_interval_words(lim, ev)} (the paper: trace balancing need not lower LIM)",
    )


# --------------------------------------------------------------------------- the position shift


def shift_settings(gated_by: str | None, inputs: Inputs, ev: EvidenceSettings) -> list[Setting]:
    """The position-shift arms (train.flag_law early or late). ``gated_by`` (the name of the check that the shift
    bites): each remedy arm against the baseline trained on the same law (``Inputs.reference``), not evaluable
    where that check is not supported (``shift_not_evaluable``); None: every arm, baseline or remedy, against its
    own counterpart trained on the uniform law (that check's own settings)."""
    remedies = gated_by is not None
    found = []
    for name in sorted(inputs.variants):
        if flag_law(inputs, name) not in SHIFTS or (remedies and inputs.remedy(name) == "none"):
            continue
        reference = inputs.reference(name) if remedies else uniform_counterpart(inputs, name)
        for L, depth in runs_of(inputs.failure, name):
            counterpart = "baseline" if remedies else "uniform-law counterpart"
            missing = f"{name} has no {counterpart} with failure rows at L {L}, depth {depth}"
            if reference is not None and (L, depth) in runs_of(inputs.failure, reference):
                missing = None
            for checkpoint in (SHIFT_LAST, SHIFT_MID):
                setting = Setting(name, L, depth, inputs.residual(name), checkpoint, reference, missing)
                if remedies and missing is None:
                    setting = replace(setting, not_evaluable=shift_not_evaluable(inputs, ev, setting, gated_by))
                found.append(setting)
    return NotRun.unless(
        found,
        "no variant trained on a shifted flag law (train.flag_law early or late)"
        + (" with a remedy" if remedies else ""),
    )


def shift_not_evaluable(inputs: Inputs, ev: EvidenceSettings, s: Setting, check_name: str) -> str | None:
    """Why a remedy's position-shift row cannot be decided (None: it can): the shift must bite first,
    i.e. the baseline trained on the same shifted law must fail its under-trained flags more than its
    uniform-law counterpart (the check ``check_name`` supported at the row's level, read for the reference against
    that counterpart); otherwise there is nothing for the remedy to recover."""
    uniform = uniform_counterpart(inputs, s.reference)
    if uniform is None or (s.L, s.depth) not in runs_of(inputs.failure, uniform):
        return f"the shift is unchecked: {s.reference} has no uniform-law counterpart at L {s.L}, depth {s.depth}"
    check = registry.CLAIMS_BY_NAME[check_name]
    failed = failed_check(check, inputs, ev, replace(s, variant=s.reference, reference=uniform, not_evaluable=None))
    return f"the shift does not bite: {check.name} for {s.reference} vs {uniform} is {failed}" if failed else None


def uniform_counterpart(inputs: Inputs, name: str) -> str | None:
    """The variant with the same overrides as ``name`` but trained on the uniform flag law (seed_batch aside)."""

    def key(v: str) -> tuple:
        return *inputs.overrides(v, ("seed_batch", "flag_law")), inputs.variants[v].get("remedy") or {}

    same = [
        other for other in sorted(inputs.variants) if flag_law(inputs, other) == "uniform" and key(other) == key(name)
    ]
    return same[0] if same else None


def shift_step(inputs: Inputs, ev: EvidenceSettings, s: Setting) -> int:
    """The one checkpoint both arms of a position-shift setting are compared at: the last they share
    (SHIFT_LAST), or the mid-training checkpoint of the uniform-law counterpart of the reference (SHIFT_MID:
    the check and the remedy rows of one shifted law then read the same step)."""
    if s.checkpoint == SHIFT_LAST:
        return last_common_step(accuracy_per_checkpoint(inputs.failure), s)
    uniform = uniform_counterpart(inputs, s.reference)
    if uniform is None:
        raise NotRun(f"{s.reference} has no uniform-law counterpart whose mid-training checkpoint to read")
    return own_mid_training(inputs, ev, uniform, s)


def shift(inputs: Inputs, ev: EvidenceSettings, s: Setting) -> Effects:
    law = flag_law(inputs, s.variant)
    step = shift_step(inputs, ev, s)
    late = law == "early"  # the half of the flags the shifted law under-trains, on the uniform balanced set
    values = paired(
        *(late_failure_per_seed(inputs.failure, v, s.L, s.depth, step, late) for v in (s.variant, s.reference))
    )
    half = "p > 1/2" if late else "p <= 1/2"
    note = ""
    if inputs.metrics is not None:
        e_inf = _log_ratio(lambda v, st_: log_metric(inputs, ev, v, s, st_), s, (step, step))
        note = (
            f"influence on the uniform influence batch: log(E_inf {s.variant} / {s.reference}) "
            f"{_interval_words(e_inf, ev)}"
        )
    return per_seed(
        values, f"per-seed failure rate on flags with {half} at step {step}", note, {"law": law, "half": half}
    )


# --------------------------------------------------------------------------- dose-response of each penalty


STRENGTH_KEY = {"balance": "beta", "observability": "lam"}


def strength_settings(kind: str, inputs: Inputs, ev: EvidenceSettings) -> list[Setting]:
    """One setting per ladder of ``kind``: arms that differ only in strength (same other remedy
    parameters, same model and train overrides), at least two strengths, with their baseline as
    strength 0; ``Setting.variant`` lists the arms."""
    table = inputs.metrics if kind == "balance" else inputs.observability
    if table is None:
        raise NotRun(f"the {'metrics' if kind == 'balance' else 'observability'} table is not given")
    ladders: dict[tuple, list[str]] = {}
    for name in inputs.of_kind(kind):
        if not aimed_at_uniform(inputs, name) or inputs.reference(name) is None:
            continue
        rest = {k: v for k, v in inputs.variants[name]["remedy"].items() if k != STRENGTH_KEY[kind]}
        ladders.setdefault((repr(sorted(rest.items())), inputs.reference(name)), []).append(name)
    found = []
    for (_, reference), names in sorted(ladders.items()):
        if len({inputs.variants[n]["remedy"][STRENGTH_KEY[kind]] for n in names}) < 2:
            continue
        runs = set(runs_of(table, reference)).intersection(*(runs_of(table, n) for n in names))
        for L, depth in sorted(runs):
            found.append(Setting(",".join(sorted(names)), L, depth, inputs.residual(reference), MATCHED, reference))
    return NotRun.unless(found, f"no two {kind} variants that differ only in {STRENGTH_KEY[kind]}")


def ladder_settings(inputs: Inputs, ev: EvidenceSettings) -> list[Setting]:
    return every_kind(strength_settings, ("balance", "observability"), inputs, ev)


def strength(inputs: Inputs, ev: EvidenceSettings, s: Setting) -> Effects:
    names = s.variant.split(",")
    kind = inputs.remedy(names[0])
    key = STRENGTH_KEY[kind]
    strengths = {s.reference: 0.0, **{n: float(inputs.variants[n]["remedy"][key]) for n in names}}
    top = max(strengths.values())
    per_arm = {}
    for name in strengths:
        step = own_mid_training(inputs, ev, name, s)
        per_arm[name] = (
            log_metric(inputs, ev, name, s, step)
            if kind == "balance"
            else observability_per_seed(inputs, name, s, step, "trace")
        )
    frame = pd.DataFrame(per_arm).dropna()
    x = np.array([strengths[n] / top for n in frame.columns])
    slopes = pd.Series([float(np.polyfit(x, row.to_numpy(), 1)[0]) for _, row in frame.iterrows()], index=frame.index)
    target = "E_inf" if kind == "balance" else "E_obs"
    return per_seed(
        slopes,
        f"per-seed least-squares slope of log {target} (each arm at its own mid-training) on "
        f"{key} / {top:g} over {key} = {sorted(strengths.values())}",
        terms={"target": target, "key": key, "top": top},
    )


# --------------------------------------------------------------------------- the overhead
# A remedy's time and memory per training step against its baseline's, paired by seed, for the pairs whose arms
# both train one seed at a time.


def _per_run(inputs: Inputs, variant: str, s: Setting, column: str) -> pd.Series:
    part = rows_of(inputs.train, "train", variant, s.L, s.depth)
    values = (
        part.groupby("seed")[column].median()
        if column.endswith("seconds_per_step")
        else part.groupby("seed")[column].max()
    )
    if not (np.isfinite(values).all() and (values > 0).all()):
        raise NotRun(f"the training log of {variant} has no positive {column}")
    return np.log(values.astype(np.float64))


def overhead(column: str, what: str, inputs: Inputs, ev: EvidenceSettings, s: Setting) -> Effects:
    """The per-seed ratio of ``column`` (remedy / baseline), for the declared log-mean estimator."""
    values = paired(_per_run(inputs, s.variant, s, column), _per_run(inputs, s.reference, s, column))
    method = f"per-seed ratio of the {what} (remedy / baseline, same block)"
    return per_seed(values, method, terms={"what": what}, log_scale=True)


def time_overhead(inputs: Inputs, ev: EvidenceSettings, s: Setting) -> Effects:
    """The time overhead, by the process's CPU time per step: the load of other processes on the machine
    stretches wall-clock time, not the CPU time the step itself takes (torch's threads are fixed per job),
    so the ratio no longer follows the machine's load (benchmarks/bench_overhead_load.py shows a
    loaded and an idle run agree). A train table written before the CPU-time column falls back on the
    wall-clock time, and its method says so."""
    train = inputs.train
    if "cpu_seconds_per_step" in train and train["cpu_seconds_per_step"].notna().all():
        return overhead("cpu_seconds_per_step", "median process CPU time per training step", inputs, ev, s)
    what = "median wall-clock time per training step (the table predates the CPU-time column: the load enters)"
    return overhead("seconds_per_step", what, inputs, ev, s)


def sequential(inputs: Inputs, name: str) -> bool:
    """The variant trains its seeds one at a time (``train.seed_batch`` left out or 1): its per-step time is one
    seed's."""
    return (inputs.variants[name].get("train") or {}).get("seed_batch", 1) == 1


def overhead_pairs(kind: str, inputs: Inputs, ev: EvidenceSettings) -> list[Setting]:
    """The pairs of ``kind`` whose arms both train one seed at a time: a vmapped step is several seeds'
    (and Algorithm 3 is never vmapped), so only such pairs compare time and memory per step."""
    found = [
        s
        for s in pair_settings(kind, "train", "every training step", inputs, ev)
        if sequential(inputs, s.variant) and (s.reference is None or sequential(inputs, s.reference))
    ]
    return NotRun.unless(found, f"no {kind} variant and baseline that both train with seed_batch 1")


def overhead_settings(inputs: Inputs, ev: EvidenceSettings) -> list[Setting]:
    return every_kind(overhead_pairs, ("balance", "reweight", "observability"), inputs, ev)
