"""Command of the report stage: every figure and every summary page, drawn by one process.

A figure job is mostly interpreter and seaborn start-up, so one ``lostmid figures`` draws all of
them: ``--figures`` names the figures to draw (lostmid.catalogue.FIGURES lists each figure's
tables), the table options give the files, and ``--pages`` writes the HTML summary tables of
the report (lostmid.catalogue.PAGES, lostmid.tables.summaries).
"""

from __future__ import annotations

import importlib
import json
import logging
from pathlib import Path

from lostmid.catalogue import FIGURE_TABLES, FIGURES, PAGES, Figure, Page
from lostmid.cli.registry import command
from lostmid.errors import ConfigError

log = logging.getLogger(__name__)


def _args(parser):
    for name in FIGURE_TABLES:
        parser.add_argument(
            f"--{name.replace('_', '-')}", nargs="*", default=[], help=f"Parquet files of the {name} table"
        )
    parser.add_argument(
        "--figures", nargs="*", default=[], help="names of the figures to draw (lostmid.catalogue.FIGURES)"
    )
    parser.add_argument("--out-dir", required=True, help="folder of the figures (<name>.png)")
    parser.add_argument(
        "--viewers-dir", default=None, help="folder of each figure's page for the report's viewer (<name>.html)"
    )
    parser.add_argument("--pages", nargs="*", default=[], help="HTML summary pages to write: " + ", ".join(PAGES))
    parser.add_argument("--pages-dir", default=None, help="folder of the summary pages (<name>.html)")
    parser.add_argument(
        "--baseline", default=None, help="the variant the remedy figures compare against (remedies.baseline)"
    )
    parser.add_argument(
        "--steps",
        type=int,
        nargs="*",
        default=None,
        help="checkpoints the remedy figures compare (remedies.plot_steps; none: the middle and last)",
    )
    parser.add_argument(
        "--delta", type=float, default=None, help="region scale the metrics figures show (remedies.delta)"
    )
    parser.add_argument(
        "--variants",
        type=json.loads,
        default=None,
        help="the config's variants block as JSON: each arm's reference in the figures that pair them",
    )
    parser.add_argument(
        "--mid-accuracy",
        type=float,
        default=None,
        help="the mid-training rule's accuracy level (evidence.mid_accuracy) of the figures drawn at mid-training",
    )


def _check(kind: str, names, declared: dict, args) -> None:
    """Every named figure or page is declared and was given the tables and options it is drawn from
    (``--steps`` may be left out: the middle and last checkpoints)."""
    unknown = sorted(set(names) - set(declared))
    if unknown:
        raise ConfigError(f"figures: unknown {kind}(s) {unknown}; known: {sorted(declared)}")
    for name in names:
        missing = [table for table in declared[name].tables if not getattr(args, table)]
        if missing:
            raise ConfigError(f"figures: {kind} {name} needs the table(s) {missing}, which were not given")
        missing = [
            f"--{option}" for option in declared[name].options if option != "steps" and getattr(args, option) is None
        ]
        if missing:
            raise ConfigError(f"figures: {kind} {name} needs the option(s) {missing}")


@command("figures", "every figure of the report and the HTML summary tables, in one process", _args)
def figures(args):
    _check("figure", args.figures, FIGURES, args)
    _check("page", args.pages, PAGES, args)
    tables = _Tables(args)
    out = Path(args.out_dir)
    for name in args.figures:
        draw(FIGURES[name], tables, out / f"{name}.png", args)
        if args.viewers_dir:
            from lostmid.plots.style import write_viewer

            write_viewer(out / f"{name}.png", Path(args.viewers_dir) / f"{name}.html")
        log.info("drew %s", out / f"{name}.png")
    for name in args.pages:
        write_page(PAGES[name], tables, Path(args.pages_dir) / f"{name}.html", args)


class _Tables:
    """Each table read once, on first use."""

    def __init__(self, args):
        self.args, self.cache = args, {}

    def __getitem__(self, name):
        if name not in self.cache:
            from lostmid.tables import keys

            self.cache[name] = keys.read(getattr(self.args, name), name)
        return self.cache[name]


def _options(names, args) -> dict:
    return {name: getattr(args, name) for name in names}


def draw(figure: Figure, tables: _Tables, path: Path, args) -> None:
    """``lostmid.plots.<figure.plot>(*its tables, path, **its options)``."""
    module, function = figure.plot.split(".")
    plot = getattr(importlib.import_module(f"lostmid.plots.{module}"), function)
    plot(*(tables[name] for name in figure.tables), path, **_options(figure.options, args))


def write_page(page: Page, tables: _Tables, path: Path, args) -> None:
    """An HTML summary table the report shows inline: ``lostmid.tables.summaries.<page.summary>``."""
    from lostmid import io
    from lostmid.tables import summaries

    options = _options(page.options, args)
    data = [tables[name] for name in page.tables]
    table = getattr(summaries, page.summary)(*data, **options) if page.summary else data[0]
    io.write_text(summaries.to_html(table, page.title.format(**options), page.note), path)
