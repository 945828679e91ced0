"""Commands of the retrieval stage (docs/retrieval.md): one window of one model (or its random-init twin) at
one length, and the stage's tables and figure from every window's examples."""

from __future__ import annotations

import logging
from pathlib import Path

from lostmid import io
from lostmid.cli.registry import command, draw_figure, figure_args, json_arg

log = logging.getLogger(__name__)

# The lines of a page between which ``retrieval-tables --into`` writes a run's tables (a run record's own page
# is written whole by ``retrieval-page``).
PAGE_MARKERS = ("<!-- retrieval results: begin -->", "<!-- retrieval results: end -->")


def _settings(parser):
    parser.add_argument("--settings", type=json_arg, required=True, help="the config's retrieval block (JSON)")


def _job_args(parser):
    _settings(parser)
    parser.add_argument("--n", type=int, required=True, help="the length (one of retrieval.lengths)")
    parser.add_argument("--block", type=int, required=True, help="b: windows b*block .. (b+1)*block - 1 drawn at n")
    parser.add_argument("--twin", action="store_true", help="the random-init twin (accuracy only) instead of the model")
    parser.add_argument(
        "--record", default=None, help="the record folder (default: retrieval.record): a Parquet per window in windows/"
    )
    parser.add_argument("--done", required=True, help="JSON: the block's window files, written once all are recorded")


def settings_of(args):
    from lostmid.architectures.settings import RetrievalSettings
    from lostmid.config import settings_from_section
    from lostmid.errors import ConfigError

    settings = settings_from_section(RetrievalSettings, args.settings, "retrieval")
    if getattr(args, "n", None) is not None and args.n not in settings.lengths:
        raise ConfigError(f"--n {args.n} is not one of retrieval.lengths {list(settings.lengths)}")
    return settings


@command("retrieval", "needles at every fraction q of real-text windows: one block of windows of a model", _job_args)
def retrieval(args):
    import json

    from lostmid.architectures.retrieval_jobs import retrieval_block
    from lostmid.core import devices

    settings = settings_of(args)
    count, gradients = settings.count(args.n, args.twin)
    windows = settings.block_windows(args.n, args.twin, args.block)
    log.info(
        "retrieval: %s, n = %d, windows %d-%d of %d (gradients on the first %d: %s), tasks %s, %d fractions, BOS %s",
        "random-init twin" if args.twin else "pretrained",
        args.n,
        windows.start,
        windows.stop - 1,
        count,
        gradients,
        ", ".join(settings.measures),
        ", ".join(settings.tasks),
        len(settings.fractions),
        settings.bos,
    )
    paths = retrieval_block(settings, args.twin, args.n, args.block, devices.resolve(args.device), args.record)
    io.write_text(json.dumps([str(path) for path in paths], indent=1) + "\n", args.done)


def _corpus_args(parser):
    _settings(parser)
    parser.add_argument("--out", required=True, help="JSON: the corpus's tokens and disjoint windows per n")


@command("retrieval-corpus", "check that the corpus holds the windows the retrieval stage asks for", _corpus_args)
def retrieval_corpus(args):
    import json

    from lostmid.architectures.retrieval_jobs import corpus_windows

    io.write_text(json.dumps(corpus_windows(settings_of(args)), indent=1) + "\n", args.out)


def _summary_args(parser):
    _settings(parser)
    parser.add_argument("--windows", nargs="+", required=True, help="the window jobs' Parquet files")
    parser.add_argument("--examples", required=True, help="Parquet: every job's examples")
    parser.add_argument("--accuracy", required=True, help="Parquet: accuracy, log-prob and influence by (task, n, q)")
    parser.add_argument("--predictive", required=True, help="Parquet: AUC and Spearman by (task, n, measure)")
    figure_args(parser, "PNG: accuracy by q beside the influence by q")


@command("retrieval-summary", "the retrieval stage's tables (intervals over windows) and its figure", _summary_args)
def retrieval_summary(args):
    from lostmid.architectures import retrieval_summary as rs

    settings = settings_of(args)
    examples = rs.read_windows(args.windows, settings.record_hash())
    accuracy = rs.accuracy_table(examples, settings.resamples, settings.level, settings.seed)
    predictive = rs.predictive_table(examples, settings.resamples, settings.level, settings.seed)
    for table, path in ((examples, args.examples), (accuracy, args.accuracy), (predictive, args.predictive)):
        io.write_parquet(table, path)
    from lostmid.plots.retrieval import accuracy_and_influence

    draw_figure(args, accuracy_and_influence, accuracy)


def _markdown_args(parser):
    parser.add_argument("--results", default="results", help="a run's results folder")
    parser.add_argument("--out", default=None, help="write the Markdown here (default: print it)")
    parser.add_argument(
        "--into", default=None, help=f"write it into this docs page, between its lines {' and '.join(PAGE_MARKERS)}"
    )


@command("retrieval-tables", "Markdown tables of the retrieval stage (accuracy by q, AUCs) from a run", _markdown_args)
def retrieval_tables(args):
    from pathlib import Path

    from lostmid.architectures.retrieval_summary import markdown

    text = markdown(Path(args.results))
    evidence = Path(args.results) / "evidence" / "retrieval.parquet"
    if evidence.exists():
        import pandas as pd

        from lostmid.evidence.report import with_status
        from lostmid.pages.evidence import markdown as evidence_markdown

        text += (
            "\nThe claims (`lostmid evidence --markdown --table results/evidence/retrieval.parquet`; rules: "
            "above):\n\n" + evidence_markdown(with_status(pd.read_parquet(evidence)))
        )
    if args.into:
        io.write_between_markers(args.into, *PAGE_MARKERS, "\n" + text + "\n")
    if args.out:
        io.write_text(text, args.out)
    elif not args.into:
        print(text, end="")


# A run record's own page (runs/<name>/README.md: the folder's page on the forge), beside its tables and figure.
PAGE = "README.md"


def _page_args(parser):
    parser.add_argument("--record", required=True, help="a run's record folder (runs/<name>, retrieval.record)")


@command("retrieval-page", "a retrieval run's tables, figure and README.md from its record folder alone", _page_args)
def retrieval_page(args):
    write_page(Path(args.record))
    log.info("wrote %s/%s", args.record, PAGE)


HEADLINE = "accuracy_by_position.png"  # Liu et al.'s Figure 1 form, in the record beside its tables


def write_page(record: Path, into: Path | None = None) -> None:
    """The record's tables, figure and page, written into ``into`` (the record itself unless given; the page
    names the record as given, so a copy written elsewhere is the same page)."""
    from lostmid.architectures.retrieval_record import page, write_tables
    from lostmid.plots.retrieval import accuracy_and_influence, accuracy_by_position

    into = into or record
    tables = write_tables(record, into)
    accuracy_and_influence(tables["accuracy"], into / "retrieval.png")
    accuracy_by_position(tables["accuracy"], into / HEADLINE)  # the report's first screen shows it
    io.write_text(page(record, tables), into / PAGE)
