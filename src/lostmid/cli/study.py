"""``lostmid study-record`` and ``lostmid findings``: the study's run record and docs/findings.md (lostmid.study)."""

from __future__ import annotations

import logging
from pathlib import Path

from lostmid.cli.registry import command

log = logging.getLogger(__name__)


def _record_args(parser):
    parser.add_argument("--results", default="results", help="the study run's results folder")
    parser.add_argument("--plan", default="study/plan.yaml", help="the plan (its arms name the variants kept)")
    parser.add_argument("--overlay", default="config/study.yaml", help="the config overlay the run ran")
    parser.add_argument("--retrieval", default=None, help="the retrieval run's record folder (runs/<name>), if any")
    parser.add_argument("--out", default="runs/study", help="the run record folder")
    parser.add_argument(
        "--force", action="store_true", help="replace a committed record of another run (its manifest differs)"
    )


@command("study-record", "copy what the findings read from a study run into runs/study", _record_args)
def study_record(args):
    import yaml

    from lostmid.study.plan import read_plan
    from lostmid.study.record import write_record
    from lostmid.study.study2_reading import with_variants

    plan = read_plan(args.plan)
    if not all("variants" in arm for arm in plan["run"]["arms"].values()):  # study/plan2.yaml: from the overlay
        plan = with_variants(plan, yaml.safe_load(Path(args.overlay).read_text()))
    written = write_record(args.results, plan, args.out, args.overlay, args.retrieval, args.force)
    log.info("wrote %s into %s", ", ".join(written), args.out)


def _findings_args(parser):
    parser.add_argument("--run", default="runs/study", help="the study's run record folder")
    parser.add_argument("--plan", default="study/plan.yaml", help="the plan, inside the repository")
    parser.add_argument("--repo", default=".", help="the repository (git checkout) the plan is committed in")
    parser.add_argument("--out", default="docs/findings.md", help="the page to write")
    parser.add_argument("--figures", default="docs/figures", help="the folder of its figures")
    parser.add_argument("--readme", default=None, help="also put the answers into this file, between its markers")
    parser.add_argument("--study2-run", default=None, help="the second study's record (runs/<name>): one page for both")
    parser.add_argument("--plan2", default="study/plan2.yaml", help="the second study's plan (with --study2-run)")
    parser.add_argument(
        "--force",
        action="store_true",
        help="replace --out (and --readme's answers) even where git tracks it and it was written from another "
        "record (its Run: line differs); without it such a page is refused",
    )
    parser.epilog = FINDINGS_EPILOG


FINDINGS_EPILOG = """Before anything is written the record is checked whole: the folder and its manifest (at least one
invocation), overlay.yaml with the sha256 the manifest records, and every table under tables/ present, readable,
its keys unique and its measured columns finite; else one line naming the file, exit status 2, nothing written.
The endpoints are primary only when the plan (any file inside --repo) has the sha256 every invocation recorded,
committed at each invocation's commit; otherwise every answer, row and README line says exploratory. A page git
tracks is replaced only by a page of the same record (the stamp's Run: line, the run's commits and configs);
the README's answers only beside such a page; --force replaces another record's."""


@command("findings", "docs/findings.md from the study's record and its plan", _findings_args)
def findings(args):
    from lostmid.pages.findings import write_findings
    from lostmid.pages.study2 import write_combined

    if args.study2_run:
        found = write_combined(
            args.plan, args.run, args.plan2, args.study2_run, args.out, args.figures, args.repo, args.readme, args.force
        )
    else:
        found = write_findings(args.plan, args.run, args.out, args.figures, args.repo, args.readme, args.force)
    log.info("wrote %s: %s", args.out, "; ".join(f"{row.id}: {row.outcome}" for row in found))
