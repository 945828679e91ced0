"""Which training objective a run's ``remedy.kind`` selects."""

from __future__ import annotations

from lostmid.objectives.algorithm1_balance import BalanceObjective
from lostmid.objectives.algorithm2_reweight import ReweightObjective
from lostmid.objectives.algorithm3_observability import ObservabilityObjective
from lostmid.objectives.task_loss import TaskObjective

# remedy.kind -> its training objective. The bias correction changes the model (a fixed
# attention-logit bias), not the loss.
OBJECTIVES: dict[str, type[TaskObjective]] = {
    "none": TaskObjective,
    "bias": TaskObjective,
    "balance": BalanceObjective,
    "reweight": ReweightObjective,
    "observability": ObservabilityObjective,
}


def make_objective(spec: dict) -> TaskObjective:
    """The objective of a run spec, with its remedy settings."""
    kind = spec.get("remedy", {}).get("kind", "none")
    try:
        return OBJECTIVES[kind](spec)
    except KeyError:
        raise ValueError(f"unknown remedy kind {kind!r}; known: {sorted(OBJECTIVES)}") from None
