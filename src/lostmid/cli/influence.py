"""Commands of the adjoint influence stage: per-run influence and metrics, the density-flow check,
the initialization sweep, the structural baseline, and their figures."""

from __future__ import annotations

import logging

from lostmid import io
from lostmid.cli.registry import command, figure_args, json_arg, spec_arg
from lostmid.errors import ConfigError

log = logging.getLogger(__name__)


def _settings(parser, what: str):
    parser.add_argument("--settings", type=json_arg, required=True, help=f"the config's {what} (JSON); keys left out take the library defaults")


def _run_args(parser):
    spec_arg(parser)
    parser.add_argument("--checkpoints", nargs="+", required=True, help="the run's checkpoints")
    _settings(parser, "influence block")


def _influence_args(parser):
    _run_args(parser)
    parser.add_argument("--profiles", required=True, help="Parquet: influence energy and density per layer and position")
    parser.add_argument("--metrics", required=True, help="Parquet: regional metrics and Z per delta")


def _influence_settings(raw):
    from lostmid.analysis.influence import InfluenceSettings

    return InfluenceSettings.from_dict(raw)


@command("influence", "adjoint influence profiles and regional metrics at every checkpoint of a run", _influence_args)
def influence(args):
    from lostmid.training import checkpoint
    from lostmid.core import devices
    from lostmid.analysis import metrics
    from lostmid.analysis import influence as inf

    settings = _influence_settings(args.settings)
    device = devices.resolve(args.device)
    metrics.check_deltas(args.spec["L"], settings.deltas, "influence.deltas")  # an empty region is a config error
    tokens, targets = inf.evaluation_batch(args.spec["L"], settings, device)

    def analyze(model, step):
        profile, metric = inf.analyze(model, tokens, targets, settings.deltas, settings.chunk)
        last = metric.iloc[-1]
        log.info("step %d: delta %.2f Delta %.4f LIM %.4f E_inf %.4g Z %.4g", step, last.delta, last.Delta, last.LIM, last.E_inf, last.Z)
        return profile, metric

    profiles, metric_table = checkpoint.analyze_run(args.checkpoints, args.spec, device, analyze)
    io.write_parquet(profiles, args.profiles)
    io.write_parquet(metric_table, args.metrics)


def _flow_args(parser):
    _run_args(parser)
    parser.add_argument("--out", required=True, help="Parquet: predicted d_s m, finite difference and relative error per position")


@command("density-flow", "predicted density flow (eq. 69) against one finite gradient step, at every checkpoint", _flow_args)
def density_flow(args):
    from lostmid.training import checkpoint
    from lostmid.core import devices
    from lostmid.analysis import density_flow as flow
    from lostmid.analysis import influence as inf

    settings = _influence_settings(args.settings)
    device = devices.resolve(args.device)
    tokens, targets = inf.evaluation_batch(args.spec["L"], settings, device, flow=True)

    def analyze(model, step):
        table = flow.flow_table(model, tokens, targets, settings.flow_step)
        log.info("step %d: relative error of the predicted flow %.3g (eta %g)", step, table.rel_error.iloc[0], settings.flow_step)
        return (table,)

    (flow_tables,) = checkpoint.analyze_run(args.checkpoints, args.spec, device, analyze)
    io.write_parquet(flow_tables, args.out)


def _sweep_args(parser):
    parser.add_argument("--model", type=json_arg, required=True, help="the config's model block (JSON)")
    _settings(parser, "influence.init_sweep block")
    parser.add_argument("--out", required=True, help="Parquet: input-influence density at init per residual, depth, seed")


@command("influence-init-sweep", "influence profile at initialization versus depth, with and without residual path", _sweep_args)
def influence_init_sweep(args):
    from lostmid.core import devices
    from lostmid.analysis import influence as inf

    settings = inf.InitSweepSettings.from_dict(args.settings)
    model_block = {k: v for k, v in args.model.items() if k not in ("seq_len", "depth", "residual")}
    try:
        table = inf.init_sweep(model_block, settings, devices.resolve(args.device))
    except (TypeError, ValueError) as err:  # a model block the ModelConfig rejects
        raise ConfigError(f"config key model: {err}") from err
    io.write_parquet(table, args.out)


def _structural_args(parser):
    _settings(parser, "influence.structural block")
    parser.add_argument("--out", required=True, help="Parquet: measured and closed-form densities of the structural baseline")


@command("structural-baseline", "structural baseline (uniform attention, identity maps): measured versus closed form", _structural_args)
def structural_baseline(args):
    from lostmid.analysis import structural

    table = structural.structural_baseline(structural.StructuralSettings.from_dict(args.settings))
    error = ((table.measured - table.closed_form).abs() / table.closed_form.abs().max()).max()
    log.info("structural baseline: max |measured - closed form| / max density = %.3g", error)
    io.write_parquet(table, args.out)


KINDS = ("profiles", "metrics", "depth", "init-sweep", "structural", "flow")


def _plot_args(parser):
    parser.add_argument("--kind", choices=KINDS, required=True, help="which figure")
    parser.add_argument("--delta", type=float, default=0.2, help="region scale shown in the metrics figure")
    figure_args(parser)


@command("plot-influence", "figures of the influence stage", _plot_args)
def plot_influence(args):
    from lostmid.plots import influence as plots_influence
    from lostmid.tables import keys as tables

    table = tables.read(args.inputs)
    if args.kind == "metrics":
        plots_influence.metrics_over_training(table, args.out, args.delta)
    else:
        plot = {
            "profiles": plots_influence.profiles_over_training,
            "depth": plots_influence.depth_profiles,
            "init-sweep": plots_influence.init_sweep,
            "structural": plots_influence.structural_baseline,
            "flow": plots_influence.density_flow,
        }[args.kind]
        plot(table, args.out)
