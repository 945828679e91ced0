"""Commands of the training stage: init (step 0) and train (one segment), for a block of seeds."""

from __future__ import annotations

import logging

from lostmid import io
from lostmid.cli.registry import (
    attention_bias_arg,
    block_analysis_args,
    block_inputs,
    block_runs,
    command,
    json_arg,
    spec_arg,
)
from lostmid.errors import ConfigError

log = logging.getLogger(__name__)


def _init_args(parser):
    spec_arg(parser)
    attention_bias_arg(parser, "the runs start from it")
    parser.add_argument("--out", nargs="+", required=True, help="step-0 checkpoint to write, one per seed")


@command("init", "write the step-0 checkpoints of a block of runs", _init_args)
def init(args):
    from lostmid.core import devices
    from lostmid.training import checkpoint

    device = devices.resolve(args.device)
    bias = checkpoint.attention_bias_input(args.attention_bias, args.spec["L"])[0] if args.attention_bias else None
    for spec, out in block_runs(args, "out"):
        state = checkpoint.TrainingState.initial(spec, device, attention_bias=bias)
        state.save(out)
        log.info("wrote step-0 checkpoint %s (%d parameters)", out, sum(p.numel() for p in state.model.parameters()))


def _train_args(parser):
    spec_arg(parser)
    parser.add_argument("--checkpoint", nargs="+", required=True, help="checkpoint to continue from, one per seed")
    attention_bias_arg(parser, "the checkpoints must have been made from it (its digest is in their fingerprint)")
    parser.add_argument("--steps", type=int, required=True, help="optimizer steps in this segment")
    parser.add_argument("--out", nargs="+", required=True, help="checkpoint to write after the segment, one per seed")
    parser.add_argument(
        "--table", nargs="+", required=True, help="Parquet file of the segment's per-step log, one per seed"
    )


@command("train", "continue a block of runs from their checkpoints for one segment of steps", _train_args)
def train(args):
    from lostmid.config import train_value
    from lostmid.core import devices
    from lostmid.tables import keys as tables
    from lostmid.training import checkpoint
    from lostmid.training.seed_batch import seed_batches, train_seed_batch
    from lostmid.training.train import train_steps

    if args.steps < 1:
        raise ConfigError(f"--steps must be positive, got {args.steps}")
    runs = block_runs(args, "checkpoint", "out", "table")
    device = devices.resolve(args.device)
    seed_batch = train_value(args.spec["train"], "seed_batch")
    inputs = block_inputs(args)
    states = {spec["seed"]: checkpoint.TrainingState.load(path, spec, device, inputs) for spec, path, _, _ in runs}
    logs = {}
    # One after another, each seed's arithmetic is that of a job of its own (bitwise); with
    # train.seed_batch > 1, aligned groups of seeds train as vmapped batches (lostmid.training.seed_batch).
    for batch in seed_batches(list(states), seed_batch):
        log.info(
            "training %s seeds %s from step %d for %d steps on %s",
            args.spec["variant"],
            batch,
            states[batch[0]].step,
            args.steps,
            device,
        )
        if seed_batch > 1:
            logs.update(zip(batch, train_seed_batch([states[seed] for seed in batch], args.steps, device)))
        else:
            logs[batch[0]] = train_steps(states[batch[0]], args.steps, device)
    for spec, _, out, table in runs:
        states[spec["seed"]].save(out)
        io.write_parquet(tables.with_run_keys(logs[spec["seed"]], spec), table)
        log.info("wrote checkpoint %s at step %d", out, states[spec["seed"]].step)


def _evaluate_args(parser):
    block_analysis_args(parser)
    parser.add_argument("--evaluation", type=json_arg, required=True, help="the config's evaluation block (JSON)")
    parser.add_argument(
        "--influence", type=json_arg, required=True, help="the config's influence keys of this stage (JSON)"
    )
    parser.add_argument("--failure", nargs="+", required=True, help="Parquet: failure by flag position, one per seed")
    parser.add_argument(
        "--profiles",
        nargs="+",
        required=True,
        help="Parquet: influence energy and density per layer and position, one per seed",
    )
    parser.add_argument(
        "--metrics", nargs="+", required=True, help="Parquet: regional metrics and Z per delta, one per seed"
    )
    parser.add_argument(
        "--answer-influence",
        nargs="+",
        required=True,
        help="Parquet: the input energy at the answer's position f-1 over the sequences with their flag at f "
        "(the conditioned influence), one per seed",
    )


@command(
    "evaluate",
    "failure by flag position, influence profiles and metrics at every checkpoint of a block of runs",
    _evaluate_args,
)
def evaluate(args):
    from lostmid.analysis import influence, metrics
    from lostmid.analysis.settings import InfluenceSettings
    from lostmid.config import settings_from_section
    from lostmid.core import devices
    from lostmid.training import checkpoint
    from lostmid.training.evaluate import EvaluationSettings, failure_by_position

    settings = settings_from_section(InfluenceSettings, args.influence, "influence")
    evaluation = settings_from_section(EvaluationSettings, args.evaluation, "evaluation")
    device = devices.resolve(args.device)
    L = args.spec["L"]
    metrics.check_deltas(L, settings.deltas, "influence.deltas")  # an empty region is a config error
    tokens, targets = influence.evaluation_batch(L, settings, device)

    def analyze_seed(run_seed):
        def analyze(model, step):
            # Each run is evaluated on its own draw of the balanced set (evaluation.seed mixed with the run's seed).
            failure = failure_by_position(model, L, evaluation.per_position, evaluation.seed, run_seed, device)
            profile, metric, answers = influence.analyze(model, tokens, targets, settings.deltas, settings.chunk)
            last = metric.iloc[-1]
            log.info(
                "seed %d step %d: mean failure rate %.3f; delta %.2f Delta %.4f LIM %.4f E_inf %.4g Z %.4g",
                run_seed,
                step,
                failure.failure_rate.mean(),
                last.delta,
                last.Delta,
                last.LIM,
                last.E_inf,
                last.Z,
            )
            return failure, profile, metric, answers

        return analyze

    inputs = block_inputs(args)
    for spec, paths, failure_out, profiles_out, metrics_out, answers_out in block_runs(
        args, "checkpoints", "failure", "profiles", "metrics", "answer_influence"
    ):
        failure, profiles, metric_table, answers = checkpoint.analyze_run(
            paths, spec, device, analyze_seed(spec["seed"]), inputs
        )
        io.write_parquet(failure, failure_out)
        io.write_parquet(profiles, profiles_out)
        io.write_parquet(metric_table, metrics_out)
        io.write_parquet(answers, answers_out)
