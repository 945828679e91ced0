"""Commands of the training stage: init, train (one segment), failure (evaluation), and their plots."""

from __future__ import annotations

import logging

from lostmid import io
from lostmid.cli.registry import command, figure_args, spec_arg
from lostmid.errors import ConfigError

log = logging.getLogger(__name__)


def _init_args(parser):
    spec_arg(parser)
    parser.add_argument("--attention-bias", default=None, help="tensor file (.pt) of a fitted L x L attention-logit bias")
    parser.add_argument("--out", required=True, help="checkpoint to write (step 0)")


@command("init", "write the step-0 checkpoint of a run", _init_args)
def init(args):
    import torch

    from lostmid.training import checkpoint
    from lostmid.core import devices

    device = devices.resolve(args.device)
    bias = None
    if args.attention_bias:
        bias = torch.load(args.attention_bias, map_location="cpu", weights_only=True)
    state = checkpoint.TrainingState.initial(args.spec, device, attention_bias=bias)
    state.save(args.out)
    log.info("wrote step-0 checkpoint %s (%d parameters)", args.out, sum(p.numel() for p in state.model.parameters()))


def _train_args(parser):
    spec_arg(parser)
    parser.add_argument("--seeds", type=int, nargs="+", default=None,
                        help="train these seeds of the spec's run as one seed batch (lostmid.training.seed_batch); "
                             "then --checkpoint, --out and --table name one file per seed, in this order")
    parser.add_argument("--checkpoint", nargs="+", required=True, help="checkpoint to continue from")
    parser.add_argument("--steps", type=int, required=True, help="optimizer steps in this segment")
    parser.add_argument("--out", nargs="+", required=True, help="checkpoint to write after the segment")
    parser.add_argument("--table", nargs="+", required=True, help="Parquet file of the segment's per-step log")


@command("train", "continue a run (or a seed batch of runs) from a checkpoint for one segment of steps", _train_args)
def train(args):
    from lostmid.training import checkpoint
    from lostmid.core import devices
    from lostmid.tables import keys as tables
    from lostmid.training.seed_batch import train_seed_batch
    from lostmid.training.train import train_steps

    if args.steps < 1:
        raise ConfigError(f"--steps must be positive, got {args.steps}")
    specs = [{**args.spec, "seed": seed} for seed in args.seeds] if args.seeds else [args.spec]
    for option in ("checkpoint", "out", "table"):
        if len(getattr(args, option)) != len(specs):
            raise ConfigError(f"--{option} names {len(getattr(args, option))} files for {len(specs)} runs (seeds {args.seeds})")
    seed_batch = args.spec["train"].get("seed_batch", 1)
    if seed_batch == 1 and len(specs) > 1:
        raise ConfigError(f"--seeds trains {len(specs)} runs as one batch, but the spec's train.seed_batch is 1")
    device = devices.resolve(args.device)
    states = [checkpoint.TrainingState.load(path, spec, device) for path, spec in zip(args.checkpoint, specs)]
    log.info("training %s seeds %s from step %d for %d steps on %s%s", args.spec["variant"], [s["seed"] for s in specs],
             states[0].step, args.steps, device, f" (seed batches of {seed_batch})" if seed_batch > 1 else "")
    logs = train_seed_batch(states, args.steps, device) if seed_batch > 1 else [train_steps(states[0], args.steps, device)]
    for state, spec, log_table, out, table in zip(states, specs, logs, args.out, args.table):
        state.save(out)
        io.write_parquet(tables.with_run_keys(log_table, spec), table)
        log.info("wrote checkpoint %s at step %d", out, state.step)


def _failure_args(parser):
    spec_arg(parser)
    parser.add_argument("--checkpoints", nargs="+", required=True, help="the run's checkpoints to evaluate")
    parser.add_argument("--per-position", type=int, required=True, help="evaluation sequences per flag position (even: half target 0, half 1)")
    parser.add_argument("--eval-seed", type=int, required=True, help="evaluation.seed; each run draws its set with eval_seed_for_run(eval-seed, run seed)")
    parser.add_argument("--out", required=True, help="Parquet table of failure by flag position")


@command("failure", "failure rate by flag position at each checkpoint of a run", _failure_args)
def failure(args):
    from lostmid.training import checkpoint
    from lostmid.core import devices
    from lostmid.training import evaluate

    def analyze(model, step):
        table = evaluate.failure_by_position(model, args.spec["L"], args.per_position, args.eval_seed, args.spec["seed"], device)
        log.info("step %d: mean failure rate %.3f", step, table.failure_rate.mean())
        return (table,)

    device = devices.resolve(args.device)
    (failure_table,) = checkpoint.analyze_run(args.checkpoints, args.spec, device, analyze)
    io.write_parquet(failure_table, args.out)


@command("plot-failure", "figure: failure rate by flag position at each checkpoint", figure_args)
def plot_failure(args):
    from lostmid.plots import training as plots
    from lostmid.tables import keys as tables

    plots.failure_by_position(tables.read(args.inputs), args.out)


@command("plot-training", "figure: training loss and accuracy curves", figure_args)
def plot_training(args):
    from lostmid.plots import training as plots
    from lostmid.tables import keys as tables

    plots.training_curves(tables.read(args.inputs), args.out)
