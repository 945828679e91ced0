"""Commands of the remedies stage: the attention-bias fit and the remedies table."""

from __future__ import annotations

import logging

from lostmid import io
from lostmid.cli.registry import command, json_arg
from lostmid.errors import ConfigError

log = logging.getLogger(__name__)


def _bias_fit_args(parser):
    parser.add_argument("--variant", required=True, help="the bias variant the fit is for (a key column of its tables)")
    parser.add_argument("--model", type=json_arg, required=True, help="the variant's model config (JSON) with seq_len and depth")
    parser.add_argument("--settings", type=json_arg, required=True, help="the config's bias_fit block (JSON)")
    parser.add_argument("--training-seeds", type=int, nargs="*", default=[], help="seeds of the training runs (the fit must avoid them)")
    parser.add_argument("--out-tensor", required=True, help="tensor file (.pt) of B that `lostmid init --attention-bias` loads")
    parser.add_argument("--out-matrix", required=True, help="Parquet: B in long format")
    parser.add_argument("--out-iterations", required=True, help="Parquet: E_inf per iteration")
    parser.add_argument("--out-profiles", required=True, help="Parquet: density profile before and after")


@command("bias-fit", "fit the attention-logit bias that flattens the influence profile at init", _bias_fit_args)
def bias_fit(args):
    from lostmid.tables import keys as tables
    from lostmid.analysis.bias_fit import bias_long, fit_bias
    from lostmid.analysis.settings import FitSettings, check_disjoint_from_training
    from lostmid.config import settings_from_block
    from lostmid.core.model import ModelConfig

    settings = settings_from_block(FitSettings, args.settings, "bias_fit")
    check_disjoint_from_training(settings, args.training_seeds)
    try:
        config = ModelConfig(**args.model)
    except (TypeError, ValueError) as err:
        raise ConfigError(f"config key model: {err}") from err
    fit = fit_bias(config, settings)
    if not fit.converged:
        log.warning("bias fit stopped at max_iter=%d before the tolerance %g was met", settings.max_iter, settings.tol)
    keys = {"variant": args.variant, "L": config.seq_len, "depth": config.depth, "block": config.block}
    io.save_torch(fit.bias.contiguous(), args.out_tensor)
    io.write_parquet(tables.with_keys(bias_long(fit.bias), **keys), args.out_matrix)
    io.write_parquet(tables.with_keys(fit.iterations.assign(converged=fit.converged), **keys), args.out_iterations)
    io.write_parquet(tables.with_keys(fit.profiles, **keys), args.out_profiles)
    log.info("E_inf (fitted positions, held-out inits) %.4g -> %.4g in %d iterations", fit.before, fit.after, len(fit.iterations) - 1)


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
    from lostmid.config import settings_from_block
    from lostmid.tables import remedies as remedy_tables
    from lostmid.tables import keys as tables

    table = remedy_tables.remedy_table(
        tables.read(args.metrics, "metrics"),
        tables.read(args.failure, "failure"),
        tables.read(args.train, "train"),
        remedy_tables.read_benchmarks(args.benchmarks),
        args.variants,
        settings_from_block(remedy_tables.RemedyTableSettings, args.settings, "remedies"),
    )
    summary = remedy_tables.seed_summary(table)
    io.write_parquet(table, args.out)
    io.write_parquet(summary, args.summary)
    final = table[table.step == table.step.max()]
    cols = ["final_accuracy", "steps_to_99", "LIM", "E_inf", "time_ratio"]
    log.info("final checkpoint, mean over seeds:\n%s", final.groupby(["variant", "L"])[cols].mean().round(3).to_string())
