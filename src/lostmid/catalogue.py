"""The report's catalogue, declared once: its figures (``FIGURES``) and HTML summary pages
(``PAGES``), each with the tables it is drawn from. `lostmid figures` draws them; the figures rule
(workflow/rules/figures.smk) asks for those whose tables the run has (``figures``, ``pages``).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Figure:
    """A figure of the report, ``results/figures/<name>.png`` and its vector copy ``<name>.pdf``;
    workflow/report/<name>.rst is its caption."""

    category: str  # its category in the report
    tables: tuple[str, ...]  # the tables it is drawn from
    plot: str  # ``module.function`` of lostmid.plots: called with the tables (in this order), the path and ``options``
    options: tuple[str, ...] = ()  # the `lostmid figures` options it also takes, by keyword (baseline, steps, delta)


# The figures of the report, declared once: `lostmid figures` draws them, the figures rule asks for
# those whose tables the run has.
FIGURES = {
    # The blog's figures (lostmid.plots.blog): the baseline against the fix, and the Jacobian at init.
    "blog_failure": Figure("The blog's figures", ("failure",), "blog.failure_baseline_fix", ("variants",)),
    "blog_training": Figure("The blog's figures", ("train",), "blog.training_baseline_fix", ("variants",)),
    "blog_jacobian": Figure("The blog's figures", ("init_sweep",), "blog.jacobian_at_init"),
    "failure_by_position": Figure("Training", ("failure",), "training.failure_by_position"),
    "training_curves": Figure("Training", ("train",), "training.training_curves"),
    "influence_profiles": Figure("Influence", ("influence",), "influence.profiles_over_training"),
    "influence_depth": Figure("Influence", ("influence",), "influence.depth_profiles"),
    "influence_metrics": Figure("Influence", ("metrics",), "influence.metrics_over_training", ("delta",)),
    "density_flow": Figure("Influence", ("density_flow",), "influence.density_flow"),
    "influence_init_sweep": Figure("Influence", ("init_sweep",), "influence.init_sweep"),
    "structural_baseline": Figure("Influence", ("structural",), "influence.structural_baseline"),
    "channel_energies": Figure("Channels", ("channels", "cross_terms"), "channels.channel_energies", ("delta",)),
    "remedy_failure": Figure("Remedies", ("remedies", "failure"), "remedies.failure_by_remedy", ("baseline", "steps")),
    "remedy_influence": Figure(
        "Remedies", ("remedies", "influence"), "remedies.influence_by_remedy", ("baseline", "steps")
    ),
    "remedy_ablation": Figure("Remedies", ("remedies",), "remedies.ablations"),
    "remedy_overhead": Figure("Remedies", ("remedies",), "remedies.overhead", ("baseline",)),
    "bias_heatmap": Figure("Remedies", ("bias_matrix", "bias_summary"), "remedies.bias_heatmap"),
    "bias_profile": Figure("Remedies", ("bias_profiles", "bias_iterations"), "remedies.bias_profiles"),
    # Controls for the fix (docs/remedies.md): each arm's B beside its failure by position at mid-training.
    "mechanism_controls": Figure(
        "Remedies", ("bias_matrix", "failure"), "remedies.mechanism_controls", ("variants", "mid_accuracy")
    ),
    "algebraic_table": Figure(
        "Algebraic simulations", ("algebraic_table", "algebraic_profiles"), "algebraic.table_figure"
    ),
    "algebraic_probes": Figure("Algebraic simulations", ("algebraic_probes",), "algebraic.probe_figure"),
    # The sequence-length study (docs/length.md): drawn where the run has it.
    "length_imbalance": Figure("Length", ("length_init", "length_fit"), "length.imbalance_by_length"),
    "length_position_effect": Figure("Length", ("failure", "length_init"), "length.position_effect_by_length"),
}


@dataclass(frozen=True)
class Page:
    """An HTML summary page of the report, ``results/report_tables/<name>.html``; workflow/report/table_<name>.rst
    is its caption."""

    tables: tuple[str, ...]  # the tables it is drawn from
    title: str  # may name the ``delta`` option: ``{delta}``
    note: str
    summary: str | None  # lostmid.tables.summaries.<summary>(*tables, **options); None: the table as it is
    options: tuple[str, ...] = ()


# The HTML summary pages of the report, declared once (`lostmid figures --pages` writes them).
PAGES = {
    "failure": Page(
        ("failure",),
        "Failure by flag-position third",
        "Mean failure rate over seeds (± 95% t-interval) in the early, middle and late third of flag positions, "
        "at every checkpoint. Source: results/failure.",
        "failure_by_third",
    ),
    "metrics": Page(
        ("metrics",),
        "Influence metrics (δ = {delta})",
        "Regional metrics of the adjoint influence density at every checkpoint, mean over seeds (± 95% t-interval). "
        "Source: results/metrics.",
        "regional_metrics_over_seeds",
        ("delta",),
    ),
    "conditions": Page(
        ("conditions",),
        "Sufficient-condition tests",
        "Share of rows (runs × checkpoints × δ) where each test holds, where its conclusion holds, where it is "
        "conservative; violations must be 0. Source: results/conditions.",
        "condition_rates",
    ),
    "algebraic": Page(
        ("algebraic_table",),
        "Algebraic simulations (paper §4, Table 1)",
        "Regional densities and metrics of each method on the linear causal model. Source: results/algebraic_table.",
        None,
    ),
}
# Every table `lostmid figures` takes (an option each): those of the figures and the pages, in order of first use.
FIGURE_TABLES = tuple(dict.fromkeys(table for entry in [*FIGURES.values(), *PAGES.values()] for table in entry.tables))


def _drawable(needs, tables: dict[str, list[str]]) -> bool:
    return all(tables.get(table) for table in needs)


def figures(tables: dict[str, list[str]]) -> list[str]:
    """The figures whose tables the run has (``tables``: table name -> its files)."""
    return [name for name, figure in FIGURES.items() if _drawable(figure.tables, tables)]


def pages(tables: dict[str, list[str]]) -> list[str]:
    """The HTML summary pages whose tables the run has (the conditions page needs a residual run)."""
    return [name for name, page in PAGES.items() if _drawable(page.tables, tables)]
