"""Commands of the remedies stage: the attention-bias fit and the remedies table."""

from __future__ import annotations

import logging

from lostmid import io
from lostmid.cli.registry import command, json_arg
from lostmid.errors import ConfigError

log = logging.getLogger(__name__)


def _bias_fit_args(parser):
    parser.add_argument("--variant", required=True, help="the bias variant the fit is for (a key column of its tables)")
    parser.add_argument(
        "--model",
        type=json_arg,
        required=True,
        help="the variant's model config (JSON) with seq_len and depth: B is inserted into it",
    )
    parser.add_argument(
        "--fit-model", default=None, help="the variant whose model the fit runs on (default: --variant)"
    )
    parser.add_argument(
        "--fit-model-spec", type=json_arg, default=None, help="that variant's model config (JSON; default: --model)"
    )
    parser.add_argument(
        "--settings", type=json_arg, required=True, help="the variant's fit block: bias_fit under remedy.fit (JSON)"
    )
    parser.add_argument(
        "--training-seeds", type=int, nargs="*", default=[], help="seeds of the training runs (the fit must avoid them)"
    )
    parser.add_argument(
        "--out-tensor", required=True, help="tensor file (.pt) of B that `lostmid init --attention-bias` loads"
    )
    parser.add_argument("--out-matrix", required=True, help="Parquet: B in long format")
    parser.add_argument("--out-iterations", required=True, help="Parquet: the objective per iteration of every start")
    parser.add_argument("--out-profiles", required=True, help="Parquet: density profile before and after")
    parser.add_argument("--out-summary", required=True, help="Parquet: one row per held-out initialization")


def _model_config(block: dict, key: str):
    from lostmid.core.model import ModelConfig

    try:
        return ModelConfig(**block)
    except (TypeError, ValueError) as err:
        raise ConfigError(f"config key {key}: {err}") from err


def _fit_inputs(args, whose: str):
    """The fit's settings (checked disjoint from the training seeds), the variant's model and the model the
    fit runs on (``whose``: how the error names it), which must have the variant's seq_len and depth."""
    from lostmid.analysis.settings import FitSettings, check_disjoint_from_training
    from lostmid.config import settings_from_section

    settings = settings_from_section(FitSettings, args.settings, "bias_fit")
    check_disjoint_from_training(settings, args.training_seeds)
    config = _model_config(args.model, "model")
    fit_config = config if args.fit_model_spec is None else _model_config(args.fit_model_spec, "fit_model")
    if (fit_config.seq_len, fit_config.depth) != (config.seq_len, config.depth):
        raise ConfigError(f"config key fit_model: {whose} must have the variant's seq_len and depth")
    return settings, config, fit_config


@command("bias-fit", "fit the attention-logit bias that flattens the influence profile at init", _bias_fit_args)
def bias_fit(args):
    from lostmid.analysis.bias_fit import bias_long, fit_bias
    from lostmid.errors import FitRejected
    from lostmid.tables import keys as tables

    settings, config, fit_config = _fit_inputs(args, "the fit's model")
    fit = fit_bias(fit_config, settings, inserted=config)
    if not fit.converged:
        log.warning("bias fit stopped at max_iter=%d before the tolerance %g was met", settings.max_iter, settings.tol)
    if not fit.accepted:
        raise FitRejected(
            f"bias fit of variant {args.variant} rejected: held-out imbalance {fit.before:.4g} at B = 0, "
            f"{fit.after:.4g} "
            f"with the fitted B (change {fit.change[0]:+.3g}, {settings.level:.0%} interval [{fit.change[1]:+.3g}, "
            f"{fit.change[2]:+.3g}] over {settings.heldout} held-out inits, not below 0)"
        )
    keys = {"variant": args.variant, "L": config.seq_len, "depth": config.depth, "block": config.block}
    reading = {
        "target": settings.target,
        "positions": settings.positions,
        "fit_model": args.fit_model or args.variant,
        "param": settings.param,
    }
    io.save_torch(fit.bias.contiguous(), args.out_tensor)
    io.write_parquet(tables.with_keys(bias_long(fit.bias), **keys), args.out_matrix)
    io.write_parquet(tables.with_keys(fit.trace_table(), **keys), args.out_iterations)
    io.write_parquet(tables.with_keys(fit.profiles, **keys), args.out_profiles)
    io.write_parquet(tables.with_keys(fit.summary, **keys, **reading), args.out_summary)
    log.info(
        "held-out imbalance of the fitted positions %.4g -> %.4g (change %+.3g [%+.3g, %+.3g]) in %d iterations",
        fit.before,
        fit.after,
        *fit.change,
        len(fit.iterations) - 1,
    )


def _bias_control_args(parser):
    _bias_fit_args(parser)
    parser.add_argument(
        "--rule", required=True, help="the control's rule (lostmid.analysis.bias_controls.CONTROL_RULES)"
    )
    parser.add_argument("--seed", type=int, default=0, help="the seed of a seeded rule (row_shuffle)")
    parser.add_argument("--source", required=True, help="tensor file (.pt) of the fitted B the control is built from")


@command("bias-control", "build a control attention bias from a fitted one (docs/remedies.md)", _bias_control_args)
def bias_control(args):
    """A control B (lostmid.analysis.bias_controls) from the source's fitted B, with the bias fit's tables:
    the source's fit section (--settings) and fit model (--fit-model-spec) say where its held-out effect is measured."""
    from lostmid.analysis.bias_controls import control_bias, control_report
    from lostmid.analysis.bias_fit import bias_long
    from lostmid.tables import keys as tables
    from lostmid.training.checkpoint import read_attention_bias

    settings, config, fit_config = _fit_inputs(args, "the source's fit model")
    L = config.seq_len
    source = read_attention_bias(args.source, L, per_step=False)  # a control is built from one (L, L) table
    bias = control_bias(source, args.rule, args.seed, L, f"the source bias {args.source} of control {args.variant}")
    iterations, profiles, summary = control_report(fit_config, settings, bias, config)
    keys = {"variant": args.variant, "L": L, "depth": config.depth, "block": config.block}
    reading = {
        "target": settings.target,
        "positions": settings.positions,
        "fit_model": args.fit_model or args.variant,
        "param": f"control {args.rule}",
    }
    io.save_torch(bias.contiguous(), args.out_tensor)
    io.write_parquet(tables.with_keys(bias_long(bias), **keys), args.out_matrix)
    io.write_parquet(tables.with_keys(iterations, **keys), args.out_iterations)
    io.write_parquet(tables.with_keys(profiles, **keys), args.out_profiles)
    io.write_parquet(tables.with_keys(summary, **keys, **reading), args.out_summary)
    log.info(
        "control %s of %s: held-out imbalance %.4g -> %.4g on the fit model, %.4g -> %.4g in the model it trains",
        args.rule,
        args.source,
        summary.imbalance_before.mean(),
        summary.imbalance_after.mean(),
        summary.inserted_imbalance_before.mean(),
        summary.inserted_imbalance_after.mean(),
    )


def _table_args(parser):
    parser.add_argument("--variants", type=json_arg, required=True, help="variant name -> remedy block (JSON)")
    parser.add_argument("--settings", type=json_arg, required=True, help="the config's remedies block (JSON)")
    parser.add_argument("--metrics", nargs="+", required=True, help="results/metrics Parquet files")
    parser.add_argument("--failure", nargs="+", required=True, help="results/failure Parquet files")
    parser.add_argument("--train", nargs="+", required=True, help="results/train Parquet files")
    parser.add_argument("--benchmarks", nargs="*", default=[], help="Snakemake benchmark TSVs of the training segments")
    parser.add_argument("--out", required=True, help="Parquet: one row per run and checkpoint")
    parser.add_argument("--summary", required=True, help="Parquet: mean and 95%% interval over seeds")


@command("remedies-table", "remedies table: accuracy, influence metrics and overhead of every run", _table_args)
def remedies_table(args):
    from lostmid.config import settings_from_section
    from lostmid.tables import keys as tables
    from lostmid.tables import remedies as remedy_tables

    table = remedy_tables.remedy_table(
        tables.read(args.metrics, "metrics"),
        tables.read(args.failure, "failure"),
        tables.read(args.train, "train"),
        remedy_tables.read_benchmarks(args.benchmarks),
        args.variants,
        settings_from_section(remedy_tables.RemedyTableSettings, args.settings, "remedies"),
    )
    summary = remedy_tables.seed_summary(table)
    io.write_parquet(table, args.out)
    io.write_parquet(summary, args.summary)
    final = table[table.step == table.step.max()]
    cols = ["final_accuracy", "steps_to_99", "LIM", "E_inf", "time_ratio"]
    log.info(
        "final checkpoint, mean over seeds:\n%s", final.groupby(["variant", "L"])[cols].mean().round(3).to_string()
    )
