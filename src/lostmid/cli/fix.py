"""The command of issue 55's fix run (study/fix_plan.yaml; lostmid.architectures.fix_jobs), one job each (``--job``):
one fit of the blog's bias and one calibration (with its strength) on its reserved window, the zero-bias check
against the none record, one block of held-out windows of a fix arm, and the gates' readings. Each reads its
recipe from the plan file the run's manifest records and writes into the plan's record folder."""

from __future__ import annotations

import json
import logging

from lostmid import io
from lostmid.cli.registry import command

log = logging.getLogger(__name__)

# --job -> (what it does, the function of fix_jobs, the options it takes after the plan; each takes the device last)
JOBS = {
    "fit": ("the blog's bias fit i on its reserved window (fits/blog_<i>.pt, .json)", "fit_blog", ("fit",)),
    "calibrate": ("calibration i and its strength on its window (fits/fitm_<i>.pt, .json)", "calibrate_fitm", ("fit",)),
    "none-check": ("a zero bias gives the none record's answers on a held-out window", "none_check", ()),
    "block": ("one block of held-out windows of a fix arm", "fix_block", ("arm", "n", "block", "size")),
    "gate": ("the gates' readings on the gate windows at n (those not yet recorded)", "gate_block", ("n",)),
    "gate-window": ("the gates' readings on one gate window at n", "gate_window", ("n", "window")),
}


def _args(parser):
    jobs = "; ".join(f"{name}: {words}" for name, (words, _, _) in JOBS.items())
    parser.add_argument("--job", required=True, choices=sorted(JOBS), help=jobs)
    parser.add_argument("--plan", required=True, help="the fix plan (study/fix_plan.yaml): the recipe and the windows")
    parser.add_argument("--done", required=True, help="JSON: the files the job wrote, once all are written")
    parser.add_argument("--fit", type=int, default=None, help="i: the fit, 0 .. F - 1 (fit, calibrate)")
    parser.add_argument("--n", type=int, default=None, help="the length (block, gate)")
    parser.add_argument("--arm", default=None, help="blog or fitm (block)")
    parser.add_argument("--block", type=int, default=None, help="b: held-out windows b*size .. (b+1)*size - 1 (block)")
    parser.add_argument("--size", type=int, default=None, help="held-out windows per job (block)")
    parser.add_argument("--window", type=int, default=None, help="k: one gate window, 0 .. 2F - 1 (gate-window)")


@command("fix", "issue 55's fix run: one job (--job) of the fit, the calibration or the held-out windows", _args)
def fix(args):
    from lostmid.architectures import fix_jobs
    from lostmid.architectures.fix_plan import read_fix_plan
    from lostmid.core import devices
    from lostmid.errors import ConfigError

    _, function, needs = JOBS[args.job]
    missing = [f"--{name}" for name in needs if getattr(args, name) is None]
    if missing:
        raise ConfigError(f"fix --job {args.job} needs {', '.join(missing)}")
    plan = read_fix_plan(args.plan)
    found = getattr(fix_jobs, function)(plan, *(getattr(args, name) for name in needs), devices.resolve(args.device))
    paths = found if isinstance(found, list) else [found]
    io.write_text(json.dumps([str(path) for path in paths], indent=1) + "\n", args.done)


def _page_args(parser):
    parser.add_argument("--record", required=True, help="the fix run's record folder (the plan's run.record: runs/fix)")
    parser.add_argument("--repo", default=".", help="the checkout whose committed plan the record's overlay names")
    parser.add_argument("--force", action="store_true", help="replace a committed page written from another record")


@command("fix-page", "the fix run's page, tables and figure from its record", _page_args)
def fix_page(args):
    from lostmid.pages.fix import write_fix_page

    log.info("wrote %s", write_fix_page(args.record, args.repo, args.force))
