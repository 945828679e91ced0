"""Claims of the retrieval stage (docs/retrieval.md, which fixed the rules before the first run): does the
influence profile predict where a pretrained LM fails to retrieve a needle?

One row per (model, task, n) and measure (task-conditioned, task-free), read off the ``retrieval`` table (the
stage's per-example rows): the AUC of success on the needle's influence share, minus 0.5, with the percentile
bootstrap over windows (``retrieval_summary.auc_draws``, the draws and seed of the config's retrieval block;
windows are the replication unit, in the ``n_seeds`` column). The random-init twin's rows are "not evaluable"
(the control: accuracy only, no gradients); so is a row whose examples all succeed or all fail (no AUC).
"""

from __future__ import annotations

from lostmid.architectures import retrieval_summary as rs
from lostmid.architectures.settings import RetrievalSettings
from lostmid.config import settings_from_section
from lostmid.evidence.inputs import NOT_EVALUABLE, Effects, Inputs, NotRun, Setting, no_estimate
from lostmid.evidence.settings import EvidenceSettings

TWIN = "random-init twin: the control, accuracy only (no gradients)"


def _setting_words(model: str, weights: str, task: str) -> str:
    return f"{model} ({weights}): {task}"


def retrieval_settings(measure: str, inputs: Inputs, ev: EvidenceSettings) -> list[Setting]:
    """One setting per (model, weights, task, n) of the table: the twin's not evaluable, an n without
    influence values not run."""
    column, found = rs.MEASURES[measure], []
    for (model, weights, task, n), part in inputs.retrieval.groupby(["model", "weights", "task", "n"], sort=True):
        variant = _setting_words(model, weights, task)
        if weights == "twin":
            found.append(Setting(variant, int(n), not_evaluable=TWIN))
        elif part[column].isna().all():
            found.append(Setting(variant, int(n), missing=f"no example at n = {n} has the {measure} influence"))
        else:
            found.append(Setting(variant, int(n)))
    return NotRun.unless(found, "the retrieval table has no rows")


def influence_predicts_retrieval(measure: str, inputs: Inputs, ev: EvidenceSettings, setting: Setting):
    """AUC - 0.5 of the setting's examples on the needle's ``measure`` influence share, with its bootstrap draws
    over windows."""
    column, table = rs.MEASURES[measure], inputs.retrieval
    words = table.apply(lambda r: _setting_words(r.model, r.weights, r.task), axis=1)
    rows = table[(words == setting.variant) & (table.n == setting.L)]
    windows = rows.window.nunique()
    rows = rows[rows[column].notna()]
    if rows.empty:
        return no_estimate(NOT_EVALUABLE, "no influence values (accuracy only)", windows)
    if rows.success.all() or not rows.success.any():
        outcome = "succeeded" if rows.success.all() else "failed"
        return no_estimate(NOT_EVALUABLE, f"every one of the {len(rows)} examples {outcome}", windows)
    settings = settings_from_section(RetrievalSettings, inputs.retrieval_settings, "retrieval")
    draws = rs.auc_draws(rows, column, settings.resamples, settings.seed)
    method = (
        f"AUC of success on the needle's {measure} influence share over {len(rows)} examples "
        f"({int(rows.success.sum())} successes) of {rows.window.nunique()} windows, minus 0.5; "
        f"percentile bootstrap over windows ({settings.resamples} draws, seed {settings.seed})"
    )
    return Effects((draws, rows.window.nunique(), method))
