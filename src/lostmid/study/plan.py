"""The study's plan (study/plan.yaml): read and checked, so that a malformed plan is one clear line."""

from __future__ import annotations

from pathlib import Path

import yaml

from lostmid.errors import ConfigError

MAX_PRIMARIES = 10
PRIMARY_KEYS = ("id", "question", "arms", "checkpoint", "estimator", "unit", "scale", "direction", "size", "words")


def read_plan(path) -> dict:
    """The plan as a mapping, after checking what the findings rely on: at most ten primaries with unique ids,
    each with its keys, a direction (increase or decrease) and a positive size; alpha in (0, 1)."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"plan file {path} does not exist")
    plan = yaml.safe_load(path.read_text())
    primaries = plan.get("primaries") if isinstance(plan, dict) else None
    if not primaries or len(primaries) > MAX_PRIMARIES:
        raise ConfigError(f"plan {path}: needs 1 to {MAX_PRIMARIES} primaries, has {len(primaries or [])}")
    ids = [primary.get("id") for primary in primaries]
    if len(set(ids)) != len(ids):
        raise ConfigError(f"plan {path}: a primary id is used twice: {ids}")
    for primary in primaries:
        missing = [key for key in PRIMARY_KEYS if primary.get(key) in (None, "")]
        if missing:
            raise ConfigError(f"plan {path}: primary {primary.get('id')} lacks {missing}")
        if primary["direction"] not in ("increase", "decrease") or not primary["size"] > 0:
            raise ConfigError(f"plan {path}: primary {primary['id']} needs direction increase/decrease and size > 0")
    if not 0 < plan.get("alpha", 0) < 1:
        raise ConfigError(f"plan {path}: alpha must lie in (0, 1)")
    return plan


def arm_variants(plan: dict, arm: str) -> list[str]:
    """The workflow variants of one of the plan's flag-task arms."""
    arms = plan["run"]["arms"]
    if arm not in arms:
        raise ConfigError(f"the plan has no arm {arm!r} (arms: {sorted(arms)})")
    return list(arms[arm]["variants"])
