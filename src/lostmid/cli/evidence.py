"""Command of the evidence stage: the claims table (Parquet, Markdown) and its forest plot."""

from __future__ import annotations

import logging

from lostmid import io
from lostmid.cli.registry import command, json_arg
from lostmid.errors import ConfigError
from lostmid.evidence.tables import TABLES

log = logging.getLogger(__name__)

# The lines of a page between which ``--into`` writes the Markdown table (a run's own page, runs/<name>/README.md).
PAGE_MARKERS = ("<!-- evidence table: begin -->", "<!-- evidence table: end -->")


def quote_into(page: str, markdown: str) -> None:
    """Replace what stands between the page's PAGE_MARKERS lines by ``markdown`` (atomic write); a
    page without both markers, in order, is a ConfigError naming it."""
    io.write_between_markers(page, *PAGE_MARKERS, "\n" + markdown.rstrip("\n") + "\n\n")


def _args(parser):
    parser.add_argument(
        "--config",
        nargs="+",
        default=None,
        help="config YAML files, merged as Snakemake merges --configfile: the evidence, variants and model "
        "blocks are read from them (the JSON options below override)",
    )
    parser.add_argument("--settings", type=json_arg, default=None, help="the config's evidence block (JSON)")
    parser.add_argument(
        "--variants", type=json_arg, default=None, help="the config's variants block (JSON): name -> overrides"
    )
    parser.add_argument(
        "--model", type=json_arg, default=None, help="the config's model block (JSON): defaults of the variants"
    )
    parser.add_argument(
        "--retrieval-settings",
        type=json_arg,
        default=None,
        help="the config's retrieval block (JSON): the bootstrap draws and seed of the retrieval claims",
    )
    for name, table in TABLES.items():
        parser.add_argument(
            "--" + name.replace("_", "-"),
            nargs="*",
            default=None,
            help=f"{table.help}; left out: the claims that need it get a 'not run' row",
        )
    family = parser.add_mutually_exclusive_group()
    family.add_argument("--family", default=None, help="evaluate only the claims of this family (e.g. retrieval)")
    family.add_argument("--without-family", default=None, help="evaluate every claim but those of this family")
    parser.add_argument("--out", help="Parquet: one row per claim and setting")
    parser.add_argument("--page", help="HTML: the table as the report shows it (lostmid.plots.evidence)")
    parser.add_argument("--markdown", action="store_true", help="print the table as Markdown (for the README)")
    parser.add_argument(
        "--table",
        default=None,
        help="an evidence table already written (Parquet file or folder): print it, compute nothing",
    )
    parser.add_argument(
        "--claims-matching",
        default=None,
        help="with --table: only the rows whose claim name matches this regular expression (e.g. '^length_')",
    )
    parser.add_argument(
        "--into",
        default=None,
        help="a docs page: with --markdown, write the table between its lines "
        f"'{PAGE_MARKERS[0]}' and '{PAGE_MARKERS[1]}' instead of printing it",
    )


def load_tables(args) -> dict:
    """Every given table, read and concatenated (None where the option was left out)."""
    from lostmid.tables import keys as tables

    loaded = {}
    for name in TABLES:
        paths = getattr(args, name)
        loaded[name] = tables.read(paths, name) if paths else None
    return loaded


def show(markdown: str, page: str | None) -> None:
    if page:
        quote_into(page, markdown)
        log.info("wrote the evidence table into %s", page)
    else:
        print(markdown)


@command(
    "evidence", "evidence table: every claim of the blog and the paper with its interval over seeds and verdict", _args
)
def evidence(args):
    from lostmid.config import read_merged, settings_from_section
    from lostmid.evidence import claims
    from lostmid.evidence.settings import EvidenceSettings
    from lostmid.pages.evidence import markdown

    if args.table:
        import pandas as pd

        from lostmid.evidence.report import with_status

        table = with_status(pd.read_parquet(args.table))
        if args.claims_matching:
            table = table[table.claim.str.contains(args.claims_matching, regex=True)]
        show(markdown(table), args.into)
        return
    blocks = read_merged(args.config or [])  # no files: an empty config
    settings = settings_from_section(
        EvidenceSettings, args.settings if args.settings is not None else blocks.get("evidence"), "evidence"
    )
    variants = args.variants if args.variants is not None else blocks.get("variants")
    if variants is None:
        raise ConfigError("lostmid evidence needs the variants: --variants JSON or --config with a variants block")
    model = args.model if args.model is not None else blocks.get("model", {})
    retrieval = args.retrieval_settings if args.retrieval_settings is not None else blocks.get("retrieval")
    inputs = claims.Inputs(variants=variants, model=model, retrieval_settings=retrieval, **load_tables(args))
    chosen = [
        claim
        for claim in claims.CLAIMS
        if (args.family is None or claim.family == args.family)
        and (args.without_family is None or claim.family != args.without_family)
    ]
    if not chosen:
        raise ConfigError(f"no claim belongs to the family {args.family!r}")
    table = claims.evidence_table(inputs, settings, chosen)
    if args.out:
        io.write_parquet(table, args.out)
    if args.page:
        from lostmid.plots import evidence as plots_evidence

        plots_evidence.write_page(table, args.page)
    if args.markdown:
        show(markdown(table), args.into)
    counts = table.verdict.value_counts().to_dict()
    log.info("%d rows: %s", len(table), ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
