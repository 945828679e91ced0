"""``lostmid study-record`` and ``lostmid findings``: the study's run record and docs/findings.md (lostmid.study)."""

from __future__ import annotations

import logging

from lostmid.cli.registry import command

log = logging.getLogger(__name__)


def _record_args(parser):
    parser.add_argument("--results", default="results", help="the study run's results folder")
    parser.add_argument("--plan", default="study/plan.yaml", help="the plan (its arms name the variants kept)")
    parser.add_argument("--overlay", default="config/study.yaml", help="the config overlay the run ran")
    parser.add_argument("--retrieval", default=None, help="the retrieval run's record folder (runs/<name>), if any")
    parser.add_argument("--out", default="runs/study", help="the run record folder")


@command("study-record", "copy what the findings read from a study run into runs/study", _record_args)
def study_record(args):
    from lostmid.study.plan import read_plan
    from lostmid.study.record import write_record

    written = write_record(args.results, read_plan(args.plan), args.out, args.overlay, args.retrieval)
    log.info("wrote %s into %s", ", ".join(written), args.out)


def _findings_args(parser):
    parser.add_argument("--run", default="runs/study", help="the study's run record folder")
    parser.add_argument("--plan", default="study/plan.yaml", help="the plan, inside the repository")
    parser.add_argument("--repo", default=".", help="the repository (git checkout) the plan is committed in")
    parser.add_argument("--out", default="docs/findings.md", help="the page to write")
    parser.add_argument("--figures", default="docs/figures", help="the folder of its figures")
    parser.add_argument("--readme", default=None, help="also put the answers into this file, between its markers")


@command("findings", "docs/findings.md from the study's run record and its plan", _findings_args)
def findings(args):
    from lostmid.study.findings import write_findings

    found = write_findings(args.plan, args.run, args.out, args.figures, args.repo, args.readme)
    log.info("wrote %s: %s", args.out, "; ".join(f"{row.id}: {row.outcome}" for row in found))
