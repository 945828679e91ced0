"""Deviations on the record: every decision rule of the evidence stage changed after data were seen.

``deviations.yaml`` is the one registry (docs/evidence.md, "Deviations on the record", renders it): when,
what changed, why, the rule as first written, what had been seen, and the settings that restore the
first rule. ``lostmid.evidence.claims.evidence_table`` decides every row a second time with all of them
restored (``first_written``), from the estimates already made (a claim whose reading reads a restored setting,
``Deviation.rereads``, is read again), and puts that verdict in the column ``verdict_as_first_written`` of
every row whose claim a deviation names or whose verdict the first rules change (a fit check feeding
the gate of (c)-(e), for instance); ``deviations`` names the deviations a row is subject to.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import yaml

from lostmid.evidence.settings import EvidenceSettings


@dataclass(frozen=True)
class Deviation:
    name: str
    date: str  # when the rule was changed (commit date)
    what: str  # the rule as it is now
    why: str
    first_written: str  # the rule as first written
    seen: str  # the data seen before the change
    restore: dict  # evidence settings that restore the rule as first written
    claims: tuple[str, ...]  # the claims whose rule changed
    rereads: tuple[str, ...] = ()  # the claims whose reading itself reads a restored setting


DEVIATIONS = [
    Deviation(**{**row, "claims": tuple(row["claims"]), "rereads": tuple(row.get("rereads", ()))})
    for row in yaml.safe_load(Path(__file__).with_name("deviations.yaml").read_text())["deviations"]
]


def first_written(ev: EvidenceSettings) -> EvidenceSettings:
    """The evidence settings with every deviation undone: the rules as first written."""
    restored = {key: value for d in DEVIATIONS for key, value in d.restore.items()}
    return replace(ev, **restored)
