"""``lostmid pooled``: the pooled row of a claim run on several disjoint seed sets (lostmid.evidence.pooled)."""

from __future__ import annotations

import logging

from lostmid import io
from lostmid.cli.registry import command

log = logging.getLogger(__name__)

# The lines of a page between which ``--into`` writes the pooled table (no committed page keeps it: of the run
# records, only runs/default keeps an evidence table, one seed set; docs/validation.md, "Pooled evidence").
POOLED_MARKERS = ("<!-- pooled evidence: begin -->", "<!-- pooled evidence: end -->")


def _args(parser):
    parser.add_argument(
        "--runs", nargs="+", required=True, help="run record folders (runs/<name>/), each with its evidence table"
    )
    parser.add_argument("--claim", required=True, help="the claim whose row is pooled")
    parser.add_argument(
        "--setting", default=None, help="the start of the row's setting, where the claim has several rows in a run"
    )
    parser.add_argument("--out", default=None, help="write the pooled rows as Parquet here")
    parser.add_argument(
        "--into", default=None, help="write the Markdown between the pooled-evidence markers of this page"
    )


@command("pooled", "pooled evidence: fixed and random effects over disjoint seed sets, with heterogeneity", _args)
def pooled(args):
    from lostmid.evidence import pooled as pool
    from lostmid.pages.evidence import pooled_markdown

    runs = pool.read_runs(args.runs, args.claim, args.setting)
    rows = pool.pooled_rows(runs)
    if rows.empty:
        log.warning("the runs hold claim %s on one seed set: no pooled row", args.claim)
    if args.out:
        io.write_parquet(rows, args.out)
    text = pooled_markdown(runs, rows)
    if args.into:
        io.write_between_markers(args.into, *POOLED_MARKERS, "\n" + text.rstrip("\n") + "\n\n")
        log.info("wrote %d pooled rows into %s", len(rows), args.into)
    else:
        print(text, end="")
