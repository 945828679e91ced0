"""Command of the report stage: the summary tables, rendered as HTML pages for the report."""

from __future__ import annotations

from lostmid.cli import command

PAGES = {
    "failure": ("Failure by flag-position third", "Mean failure rate over seeds (± 95% t-interval) in the early, middle and late third of flag positions, at every checkpoint. Source: results/failure."),
    "metrics": ("Influence metrics (δ = 0.2)", "Regional metrics of the adjoint influence density at every checkpoint, mean over seeds (± 95% t-interval). Source: results/metrics."),
    "conditions": ("Sufficient-condition tests", "Share of rows (runs × checkpoints × δ) where each test holds, where its conclusion holds, where it is conservative; violations must be 0. Source: results/conditions."),
    "algebraic": ("Algebraic simulations (paper §4, Table 1)", "Regional densities and metrics of each method on the linear causal model. Source: results/algebraic_table."),
}


def _args(parser):
    parser.add_argument("--failure", nargs="+", required=True, help="failure tables (Parquet)")
    parser.add_argument("--metrics", nargs="+", required=True, help="metrics tables (Parquet)")
    parser.add_argument("--conditions", nargs="*", default=[], help="condition tables (Parquet)")
    parser.add_argument("--algebraic", required=True, help="algebraic table (Parquet)")
    parser.add_argument("--out", nargs=4, required=True, metavar=tuple(PAGES), help="HTML pages, in this order")


@command("report-tables", "HTML summary tables for the Snakemake report", _args)
def report_tables(args):
    import pandas as pd

    from lostmid import io, summaries, tables

    frames = {
        "failure": summaries.failure_by_third(tables.read(args.failure)),
        "metrics": summaries.regional_metrics_over_seeds(tables.read(args.metrics)),
        "conditions": summaries.condition_rates(tables.read(args.conditions)) if args.conditions else pd.DataFrame(),
        "algebraic": pd.read_parquet(args.algebraic),
    }
    for (name, (title, note)), path in zip(PAGES.items(), args.out):
        io.write_text(summaries.to_html(frames[name], title, note), path)
