"""``lostmid pooled``: the pooled rows of claims run on several disjoint seed sets (lostmid.evidence.pooled)."""

from __future__ import annotations

import logging

from lostmid import io
from lostmid.cli.registry import command, json_arg

log = logging.getLogger(__name__)

# The lines of a page between which ``--into`` writes the pooled table (no committed page keeps it: the runs it
# pools are typed into docs/data/pooled_runs.csv, not run records; docs/validation.md, "Pooled evidence").
POOLED_MARKERS = ("<!-- pooled evidence: begin -->", "<!-- pooled evidence: end -->")


def _args(parser):
    parser.add_argument(
        "--runs", default="docs/data/pooled_runs.csv", help="the declared runs file (one line per run of a claim's row)"
    )
    parser.add_argument("--settings", type=json_arg, default=None, help="the config's evidence block (JSON)")
    parser.add_argument("--out", default=None, help="write the pooled rows as Parquet here")
    parser.add_argument(
        "--into", default=None, help="write the Markdown between the pooled-evidence markers of this page"
    )


@command("pooled", "pooled evidence: fixed and random effects over disjoint seed sets, with heterogeneity", _args)
def pooled(args):
    from lostmid.config import settings_from_section
    from lostmid.evidence import pooled as pool
    from lostmid.evidence.settings import EvidenceSettings

    ev = settings_from_section(EvidenceSettings, args.settings or {}, "evidence")
    runs = pool.read_runs(args.runs)
    rows = pool.pooled_rows(runs, ev)
    if args.out:
        io.write_parquet(rows, args.out)
    text = pool.markdown(runs, rows)
    if args.into:
        io.write_between_markers(args.into, *POOLED_MARKERS, "\n" + text.rstrip("\n") + "\n\n")
        log.info("wrote %d pooled rows into %s", len(rows), args.into)
    else:
        print(text, end="")
