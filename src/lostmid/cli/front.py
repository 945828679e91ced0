"""Command of the report's first screen (lostmid.front): what the run found, before its specs and graph.

lostmid report-front --evidence results/evidence/evidence.parquet [--findings docs/findings.md]
    [--manifest results/manifest.json] --out results/report_front/findings.html
"""

from __future__ import annotations

from pathlib import Path

from lostmid.cli.registry import command


def _args(parser):
    parser.add_argument("--evidence", type=Path, default=None, help="the run's evidence table (its headline)")
    parser.add_argument("--findings", type=Path, default=None, help="docs/findings.md, where the run has it")
    parser.add_argument("--manifest", type=Path, default=None, help="the run's manifest (where it came from)")
    parser.add_argument("--figures", nargs="*", type=Path, default=[], help="PNG figures shown under the findings")
    parser.add_argument("--headline", type=Path, default=None, help="PNG: accuracy by position, beside the answers")
    parser.add_argument("--out", type=Path, required=True, help="the HTML fragment to write")


@command("report-front", "the report's first screen: the findings' sentences, else the run's headline", _args)
def report_front(args):
    import pandas as pd

    from lostmid import io
    from lostmid.evidence.report import with_status
    from lostmid.front import front_html

    evidence = with_status(pd.read_parquet(args.evidence)) if args.evidence else None
    findings = args.findings.read_text() if args.findings else None
    stamp = None
    if args.manifest and args.manifest.exists():
        from lostmid import manifest

        stamp = manifest.stamp(manifest.read(args.manifest))
    io.write_text(front_html(evidence, findings, stamp, args.figures, args.headline), args.out)
