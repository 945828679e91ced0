"""The registry of the evidence stage: the rows of ``claims.yaml`` (every claim of the blog post and of the paper
that the workflow can test, each check of an instrument), loaded once and checked, as ``Claim`` objects in the
order of the evidence table; the rules by key.

The table is read on first use (``CLAIMS``, ``CLAIMS_BY_NAME``, ``RULES``), so that a reading may look a claim or
a rule up by name (a gate reads its check's declaration) without importing the modules it names first. A
malformed row is one line naming the row and what is wrong; every such line is reported at once.
"""

from __future__ import annotations

import functools
import importlib
from pathlib import Path

import yaml

from lostmid.evidence import decisions as dec
from lostmid.evidence.estimators import ESTIMATORS
from lostmid.evidence.inputs import Claim, EvidenceError
from lostmid.evidence.tables import TABLES

TABLE = Path(__file__).with_name("claims.yaml")
REQUIRED = (
    *("name", "kind", "source", "statistic", "unit", "needs"),
    *("settings", "reading", "estimator", "rule", "checkpoints"),
)
OPTIONAL = ("family", "replicates", "beside", "log_axis")


def resolve(reference):
    """The function a row names: a dotted path, or [path, arg, ...], the function at path with those first
    arguments."""
    path, *args = reference if isinstance(reference, list) else [reference]
    module, _, name = str(path).rpartition(".")
    try:
        found = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError, ValueError):
        raise ValueError(f"{path} names no function") from None
    return functools.partial(found, *args) if args else found


def claim_of(row: dict, rules: dict) -> Claim:
    """One row as a ``Claim``; ValueError saying what is wrong with it."""
    missing = [key for key in REQUIRED if key not in row]
    unknown = sorted(set(row) - set(REQUIRED) - set(OPTIONAL))
    if missing or unknown:
        raise ValueError(f"lacks {missing}" if missing else f"has unknown keys {unknown}")
    if row["rule"] not in rules:
        raise ValueError(f"rule {row['rule']!r} is not a key of rules")
    if row["estimator"] not in ESTIMATORS:
        raise ValueError(f"estimator {row['estimator']!r} is not one of {list(ESTIMATORS)}")
    unread = sorted(set(row["needs"]) - set(TABLES))
    if unread:
        raise ValueError(f"needs {unread}, which are not tables of the stage")
    fields = {key: tuple(value) if isinstance(value, list) else value for key, value in row.items() if key != "reading"}
    fields.update(settings=resolve(row["settings"]), compute=resolve(row["reading"]), rule=rules[row["rule"]])
    return Claim(**fields)


@functools.cache
def table(path: Path = TABLE) -> tuple[dict[str, dec.Rule], list[Claim]]:
    """The rules by key and the claims of ``path``, in order; EvidenceError with one line per malformed row."""
    declared = yaml.safe_load(path.read_text())
    problems, rules, claims = [], {}, []
    for key, rule in (declared.get("rules") or {}).items():
        try:
            rules[key] = dec.Rule(**rule)
        except (TypeError, ValueError) as err:
            problems.append(f"{path.name}: rule {key}: {err}")
    for i, row in enumerate(declared.get("claims") or [], 1):
        try:
            claims.append(claim_of(row, rules))
        except (TypeError, ValueError) as err:
            problems.append(f"{path.name}: claim {i} ({row.get('name', 'unnamed')}): {err}")
    twice = sorted({c.name for c in claims if [d.name for d in claims].count(c.name) > 1})
    problems += [f"{path.name}: claim {name} is declared twice" for name in twice]
    if problems:
        raise EvidenceError("\n".join(problems))
    return rules, claims


def __getattr__(name: str):
    if name == "RULES":
        return table()[0]
    if name == "CLAIMS":
        return table()[1]
    if name == "CLAIMS_BY_NAME":
        return {claim.name: claim for claim in table()[1]}
    raise AttributeError(f"module {__name__} has no attribute {name}")
