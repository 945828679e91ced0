"""Command of the report stage: every figure and every summary page, drawn by one process.

A figure job is mostly interpreter and seaborn start-up, so one ``lostmid figures`` draws all of
them: ``--figures`` names the figures to draw (lostmid.workflow.FIGURES lists each figure's
tables), the table options give the files, and ``--pages`` writes the HTML summary tables of
the report (lostmid.workflow.PAGES, lostmid.tables.summaries).
"""

from __future__ import annotations

import logging
from pathlib import Path

from lostmid.cli.registry import command
from lostmid.errors import ConfigError
from lostmid.workflow import FIGURE_TABLES, FIGURES, PAGES

log = logging.getLogger(__name__)


def _args(parser):
    for name in FIGURE_TABLES:
        parser.add_argument(f"--{name.replace('_', '-')}", nargs="*", default=[], help=f"Parquet files of the {name} table")
    parser.add_argument("--figures", nargs="*", default=[], help="names of the figures to draw (lostmid.workflow.FIGURES)")
    parser.add_argument("--out-dir", required=True, help="folder of the figures (<name>.png)")
    parser.add_argument("--pages", nargs="*", default=[], help="HTML summary pages to write: " + ", ".join(PAGES))
    parser.add_argument("--pages-dir", default=None, help="folder of the summary pages (<name>.html)")
    parser.add_argument("--baseline", default="baseline", help="the variant the remedy figures compare against")
    parser.add_argument("--steps", type=int, nargs="*", default=None, help="checkpoints the remedy figures compare (default: middle and last)")
    parser.add_argument("--delta", type=float, default=0.2, help="region scale shown in the metrics figure")


@command("figures", "every figure of the report and the HTML summary tables, in one process", _args)
def figures(args):
    unknown = sorted(set(args.figures) - set(FIGURES))
    if unknown:
        raise ConfigError(f"figures: unknown figure(s) {unknown}; known: {sorted(FIGURES)}")
    tables = _Tables(args)
    out = Path(args.out_dir)
    for name in args.figures:
        missing = [table for table in FIGURES[name][1] if not getattr(args, table)]
        if missing:
            raise ConfigError(f"figures: figure {name} needs the table(s) {missing}, which were not given")
        draw(name, tables, out / f"{name}.png", args)
        log.info("drew %s", out / f"{name}.png")
    if args.pages:
        write_pages(args.pages, tables, Path(args.pages_dir))


class _Tables:
    """Each table read once, on first use."""

    def __init__(self, args):
        self.args, self.cache = args, {}

    def __getitem__(self, name):
        if name not in self.cache:
            from lostmid.tables import keys

            self.cache[name] = keys.read(getattr(self.args, name))
        return self.cache[name]


def draw(name: str, tables: _Tables, path: Path, args) -> None:
    from lostmid.plots import algebraic, channels, influence, remedies, training

    if name in ("remedy_failure", "remedy_influence"):
        steps = remedies.matched_steps(sorted(tables["remedies"].step.unique()), args.steps)
        table = tables["failure" if name == "remedy_failure" else "influence"]
        plot = remedies.failure_by_remedy if name == "remedy_failure" else remedies.influence_by_remedy
        return plot(table, steps, args.baseline, path)
    plots = {
        "failure_by_position": lambda: training.failure_by_position(tables["failure"], path),
        "training_curves": lambda: training.training_curves(tables["train"], path),
        "influence_profiles": lambda: influence.profiles_over_training(tables["influence"], path),
        "influence_depth": lambda: influence.depth_profiles(tables["influence"], path),
        "influence_metrics": lambda: influence.metrics_over_training(tables["metrics"], path, args.delta),
        "density_flow": lambda: influence.density_flow(tables["density_flow"], path),
        "influence_init_sweep": lambda: influence.init_sweep(tables["init_sweep"], path),
        "structural_baseline": lambda: influence.structural_baseline(tables["structural"], path),
        "channel_energies": lambda: channels.channel_energies(tables["channels"], tables["cross_terms"], path),
        "conditions": lambda: channels.conditions_table(tables["conditions"], path),
        "remedy_ablation": lambda: remedies.ablations(tables["remedies"], path),
        "remedy_overhead": lambda: remedies.overhead(tables["remedies"], args.baseline, path),
        "bias_heatmap": lambda: remedies.bias_heatmap(tables["bias_matrix"], tables["bias_summary"], path),
        "bias_profile": lambda: remedies.bias_profiles(tables["bias_profiles"], tables["bias_iterations"], path),
        "algebraic_table": lambda: algebraic.table_figure(tables["algebraic_table"], tables["algebraic_profiles"], path),
        "algebraic_probes": lambda: algebraic.probe_figure(tables["algebraic_probes"], path),
    }
    plots[name]()


def write_pages(pages, tables: _Tables, folder: Path) -> None:
    """The HTML summary tables the report shows inline."""
    import pandas as pd

    from lostmid import io
    from lostmid.tables import summaries

    unknown = sorted(set(pages) - set(PAGES))
    if unknown:
        raise ConfigError(f"figures: unknown page(s) {unknown}; known: {sorted(PAGES)}")
    make = {
        "failure": lambda: summaries.failure_by_third(tables["failure"]),
        "metrics": lambda: summaries.regional_metrics_over_seeds(tables["metrics"]),
        "conditions": lambda: summaries.condition_rates(tables["conditions"]) if tables.args.conditions else pd.DataFrame(),
        "algebraic": lambda: tables["algebraic_table"],
    }
    for name in pages:
        _, title, note = PAGES[name]
        io.write_text(summaries.to_html(make[name](), title, note), folder / f"{name}.html")
