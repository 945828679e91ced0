"""Commands of the adjoint influence stage beyond the per-checkpoint evaluation (``lostmid
evaluate``): the density-flow check of a block of runs, and the two checks that need no training,
the initialization sweep and the structural baseline."""

from __future__ import annotations

import logging

from lostmid import io
from lostmid.cli.registry import block_analysis_args, block_inputs, block_runs, command, json_arg
from lostmid.errors import ConfigError

log = logging.getLogger(__name__)


def _flow_args(parser):
    block_analysis_args(parser)
    parser.add_argument(
        "--settings",
        type=json_arg,
        required=True,
        help="the config's influence keys of the flow check (JSON; lostmid.analysis.settings.FlowSettings)",
    )
    parser.add_argument(
        "--out",
        nargs="+",
        required=True,
        help="Parquet: predicted d_s m, finite difference and relative error per position, one per seed",
    )


@command(
    "density-flow",
    "predicted density flow (eq. 69) against one finite gradient step, at every checkpoint of a block of runs",
    _flow_args,
)
def density_flow(args):
    from lostmid.analysis import density_flow as flow
    from lostmid.analysis import influence
    from lostmid.analysis.settings import FlowSettings
    from lostmid.config import settings_from_section
    from lostmid.core import devices
    from lostmid.training import checkpoint

    settings = settings_from_section(FlowSettings, args.settings, "influence")
    device = devices.resolve(args.device)
    tokens, targets = influence.evaluation_batch(args.spec["L"], settings, device)

    def analyze(model, step):
        table = flow.flow_table(model, tokens, targets, settings.flow_step)
        for eta, error in table.groupby("eta", sort=False).rel_error.first().items():
            log.info("step %d: relative error of the predicted flow %.3g (eta %g)", step, error, eta)
        return (table,)

    inputs = block_inputs(args)
    for spec, paths, out in block_runs(args, "checkpoints", "out"):
        (flow_tables,) = checkpoint.analyze_run(paths, spec, device, analyze, inputs)
        io.write_parquet(flow_tables, out)


def _observability_args(parser):
    block_analysis_args(parser)
    parser.add_argument(
        "--settings", type=json_arg, required=True, help="the config's influence keys of the loss-free profiles (JSON)"
    )
    parser.add_argument(
        "--out",
        nargs="+",
        required=True,
        help="Parquet: observability traces and output-Jacobian norms per position, one per seed",
    )


@command(
    "observability",
    "loss-free profiles (exact observability traces of Algorithm 3, output-Jacobian norms) at every "
    "checkpoint of a block of runs",
    _observability_args,
)
def observability(args):
    from lostmid.analysis import influence
    from lostmid.analysis.settings import TraceSettings
    from lostmid.config import settings_from_section
    from lostmid.core import devices
    from lostmid.training import checkpoint

    settings = settings_from_section(TraceSettings, args.settings, "influence")
    device = devices.resolve(args.device)
    tokens, _ = influence.evaluation_batch(args.spec["L"], settings, device)

    def analyze(model, step):
        table = influence.observability_profile(model, tokens)
        log.info(
            "step %d: trace total %.4g, output-Jacobian total %.4g",
            step,
            table.trace.sum(),
            table.output_jacobian.sum(),
        )
        return (table,)

    inputs = block_inputs(args)
    for spec, paths, out in block_runs(args, "checkpoints", "out"):
        (tables,) = checkpoint.analyze_run(paths, spec, device, analyze, inputs)
        io.write_parquet(tables, out)


def _baselines_args(parser):
    parser.add_argument("--model", type=json_arg, required=True, help="the config's model block (JSON)")
    parser.add_argument(
        "--init-sweep", type=json_arg, required=True, help="the config's influence.init_sweep block (JSON)"
    )
    parser.add_argument(
        "--structural", type=json_arg, required=True, help="the config's influence.structural block (JSON)"
    )
    parser.add_argument(
        "--sweep-out", required=True, help="Parquet: input-influence density at init per residual, depth, seed"
    )
    parser.add_argument(
        "--structural-out", required=True, help="Parquet: measured and closed-form densities of the structural baseline"
    )


@command(
    "influence-baselines",
    "influence at initialization versus depth (with and without the residual path), and the "
    "structural baseline (uniform attention, identity maps) against its closed form",
    _baselines_args,
)
def influence_baselines(args):
    from lostmid.analysis import influence, structural
    from lostmid.analysis.settings import InitSweepSettings, StructuralSettings
    from lostmid.config import settings_from_section
    from lostmid.core import devices
    from lostmid.core.model import ModelConfig

    sweep_settings = settings_from_section(InitSweepSettings, args.init_sweep, "influence.init_sweep")
    structural_settings = settings_from_section(StructuralSettings, args.structural, "influence.structural")
    model_keys = {k: v for k, v in args.model.items() if k not in ("seq_len", "depth", "residual")}
    try:  # the sweep's models differ only in depth (>= 1) and residual, which no check of ModelConfig involves
        ModelConfig(**{**model_keys, "seq_len": sweep_settings.L, "depth": sweep_settings.depths[0], "residual": True})
    except (TypeError, ValueError) as err:  # a model block the ModelConfig rejects
        raise ConfigError(f"config key model: {err}") from err
    sweep = influence.init_sweep(model_keys, sweep_settings, devices.resolve(args.device))
    io.write_parquet(sweep, args.sweep_out)
    table = structural.structural_baseline(structural_settings)
    error = ((table.measured - table.closed_form).abs() / table.closed_form.abs().max()).max()
    log.info("structural baseline: max |measured - closed form| / max density = %.3g", error)
    io.write_parquet(table, args.structural_out)
