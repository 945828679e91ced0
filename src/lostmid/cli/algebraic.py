"""Command of the algebraic simulations (paper section 4): the remedy table (paper Table 1), its
per-token profiles, and the probe study of Algorithm 3, in one process."""

from __future__ import annotations

import logging

from lostmid import io
from lostmid.cli.registry import command, json_arg

log = logging.getLogger(__name__)


def _args(parser):
    parser.add_argument("--settings", type=json_arg, required=True, help="the config's algebraic block (JSON)")
    parser.add_argument("--table", required=True, help="Parquet: one row per method (baseline, alg1, alg2, alg3)")
    parser.add_argument("--profiles", required=True, help="Parquet: the per-token densities behind the table")
    parser.add_argument("--probes", required=True, help="Parquet: n_probe, rel_bias, rel_std, exact, ...")


@command("algebraic", "the algebraic controlled model: remedy table (paper Table 1), profiles and probe study", _args)
def algebraic(args):
    import torch

    from lostmid.algebraic.probes import loglog_slope, probe_study
    from lostmid.algebraic.remedies import remedy_table
    from lostmid.algebraic.settings import AlgebraicSettings
    from lostmid.config import settings_from_section

    settings = settings_from_section(AlgebraicSettings, args.settings, "algebraic")
    torch.set_num_threads(args.threads or 1)
    table, profiles = remedy_table(settings)
    for row in table.itertuples():
        if not row.converged:
            log.warning(
                "%s: optimizer stopped with max|grad| = %.3g > tol_grad = %g",
                row.method,
                row.grad_max,
                settings.tol_grad,
            )
    log.info("algebraic table:\n%s", table.round(4).to_string(index=False))
    io.write_parquet(table, args.table)
    io.write_parquet(profiles, args.profiles)
    probes = probe_study(settings)
    log.info("probe study:\n%s", probes.round(4).to_string(index=False))
    if (probes.rel_bias > 0).all():
        log.info(
            "log-log slopes: rel_bias %.3f (expect -1), rel_std %.3f (expect -0.5)",
            loglog_slope(probes.n_probe, probes.rel_bias),
            loglog_slope(probes.n_probe, probes.rel_std),
        )
    io.write_parquet(probes, args.probes)
