"""Commands of the algebraic simulations (paper section 4): the remedy table, the probe study, their figures."""

from __future__ import annotations

import logging

from lostmid import io
from lostmid.cli.registry import command, json_arg
from lostmid.errors import ConfigError

log = logging.getLogger(__name__)


def _settings(raw):
    from lostmid.algebraic.settings import AlgebraicSettings

    if not isinstance(raw, dict):
        raise ConfigError(f"algebraic: --settings must be a JSON object, got {type(raw).__name__}")
    return AlgebraicSettings.from_dict(raw)


def _table_args(parser):
    parser.add_argument("--settings", type=json_arg, required=True, help="the config's algebraic block (JSON)")
    parser.add_argument("--out", required=True, help="Parquet table: one row per method (baseline, alg1, alg2, alg3)")
    parser.add_argument("--profiles", default=None, help="optional Parquet of the per-token densities behind the table")


@command("algebraic-table", "remedy table of the algebraic controlled model (paper Table 1)", _table_args)
def algebraic_table(args):
    import torch

    from lostmid.algebraic.remedies import remedy_table

    settings = _settings(args.settings)
    torch.set_num_threads(args.threads or 1)
    table, profiles = remedy_table(settings)
    for row in table.itertuples():
        if not row.converged:
            log.warning("%s: optimizer stopped with max|grad| = %.3g > tol_grad = %g", row.method, row.grad_max, settings.tol_grad)
    log.info("algebraic table:\n%s", table.round(4).to_string(index=False))
    io.write_parquet(table, args.out)
    if args.profiles:
        io.write_parquet(profiles, args.profiles)


def _probe_args(parser):
    parser.add_argument("--settings", type=json_arg, required=True, help="the config's algebraic block (JSON)")
    parser.add_argument("--out", required=True, help="Parquet table: n_probe, rel_bias, rel_std, exact, ...")


@command("algebraic-probes", "bias and spread of the probe-estimated squared trace penalty", _probe_args)
def algebraic_probes(args):
    import torch

    from lostmid.algebraic.probes import loglog_slope, probe_study

    settings = _settings(args.settings)
    torch.set_num_threads(args.threads or 1)
    table = probe_study(settings)
    log.info("probe study:\n%s", table.round(4).to_string(index=False))
    if (table.rel_bias > 0).all():
        log.info("log-log slopes: rel_bias %.3f (expect -1), rel_std %.3f (expect -0.5)",
                 loglog_slope(table.n_probe, table.rel_bias), loglog_slope(table.n_probe, table.rel_std))
    io.write_parquet(table, args.out)


def _plot_args(parser):
    parser.add_argument("--table", default=None, help="algebraic table Parquet (with --profiles: the table figure)")
    parser.add_argument("--profiles", default=None, help="per-token profiles Parquet")
    parser.add_argument("--probes", default=None, help="probe study Parquet (the probe figure)")
    parser.add_argument("--out", required=True, help="PNG to write")


@command("plot-algebraic", "figure of the algebraic table (with profiles) or of the probe study", _plot_args)
def plot_algebraic(args):
    import pandas as pd

    from lostmid.plots import algebraic as plots_algebraic

    if args.probes and not args.table:
        plots_algebraic.probe_figure(pd.read_parquet(args.probes), args.out)
    elif args.table and args.profiles and not args.probes:
        plots_algebraic.table_figure(pd.read_parquet(args.table), pd.read_parquet(args.profiles), args.out)
    else:
        raise ConfigError("plot-algebraic: give either --probes, or --table together with --profiles")
