"""``lostmid study-stamp``: the plan a study run begins under (lostmid.study.record)."""

from __future__ import annotations

import json
import logging

from lostmid import io
from lostmid.cli.registry import command

log = logging.getLogger(__name__)


def _stamp_args(parser):
    parser.add_argument("--repo", required=True, help="the repository the run runs from (its git checkout)")
    parser.add_argument("--plan", required=True, help="the plan file, inside the repository (study/plan.yaml)")
    parser.add_argument("--out", required=True, help="write the stamp (JSON) here")


@command("study-stamp", "record the study plan's sha256 and commit as a run begins", _stamp_args)
def study_stamp(args):
    from lostmid.study.record import plan_stamp

    stamp = plan_stamp(args.repo, args.plan)
    io.write_text(json.dumps(stamp, indent=2) + "\n", args.out)
    log.info(
        "plan %s at %s (sha256 %s), run commit %s",
        stamp["plan"],
        stamp["plan_commit"],
        stamp["plan_sha256"],
        stamp["run_commit"],
    )
