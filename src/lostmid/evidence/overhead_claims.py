"""The paper's overhead claims on trained runs (section 4.5): a remedy's time and memory per training step
against its baseline's, paired by seed, for the pairs whose arms both train one seed at a time."""

from __future__ import annotations

import numpy as np
import pandas as pd

from lostmid.evidence.inputs import Effects, Inputs, NotRun, Setting, every_kind, pair_settings, rows_of
from lostmid.evidence.readings import paired
from lostmid.evidence.settings import EvidenceSettings
from lostmid.evidence.validation_claims import per_seed


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
    if not found:
        raise NotRun(f"no {kind} variant and baseline that both train with seed_batch 1")
    return found


def overhead_settings(inputs: Inputs, ev: EvidenceSettings) -> list[Setting]:
    return every_kind(overhead_pairs, ("balance", "reweight", "observability"), inputs, ev)
