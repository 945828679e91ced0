"""The command registry of the ``lostmid`` command line: a leaf that the stage modules import.

Each stage module (``lostmid.cli.training``, ``.influence``, ...) declares its subcommands with
``@command(name, help, arguments)``; ``lostmid.cli.main`` imports them all and builds the parser.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable

# Every command of the `lostmid` command line: name -> (help, arguments(parser), run(args)).
COMMANDS: dict[str, tuple[str, Callable, Callable]] = {}
# The commands that pass every argument they do not declare on to another program (``args.passed_on``).
PASSES_ON: set[str] = set()


def command(name: str, help: str, arguments: Callable, passes_on: bool = False):
    """Register ``func`` as subcommand ``name``; ``arguments(parser)`` declares its options. A command that
    ``passes_on`` gets the arguments it does not declare, in order, as ``args.passed_on``."""

    def wrap(func):
        COMMANDS[name] = (help, arguments, func)
        if passes_on:
            PASSES_ON.add(name)
        return func

    return wrap


def json_arg(text: str):
    """An argparse type: a JSON value (config sections and run specs travel as JSON)."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise argparse.ArgumentTypeError(f"not valid JSON: {err}") from err


def spec_arg(parser: argparse.ArgumentParser) -> None:
    """The ``--spec`` and ``--seeds`` options every per-run command takes.

    One job processes a block of runs that differ only in their seed (lostmid.jobs): the
    spec of one of them, and the seeds of all; every per-run file option then names one file per
    seed (``--checkpoints``: the seeds' checkpoint lists one after another)."""
    parser.add_argument(
        "--spec", type=json_arg, required=True, help="run spec (JSON), as built by lostmid.config.run_spec"
    )
    parser.add_argument(
        "--seeds", type=int, nargs="+", default=None, help="the seeds of the block (default: the spec's seed)"
    )


def attention_bias_arg(parser: argparse.ArgumentParser, help: str) -> None:
    """``--attention-bias``: the fitted bias file a bias variant's runs start from (``help`` says its role)."""
    parser.add_argument(
        "--attention-bias",
        default=None,
        help=f"tensor file (.pt) of a fitted attention-logit bias (L x L, or one per attention step and head): {help}",
    )


def figure_args(parser: argparse.ArgumentParser, help: str) -> None:
    """--figure (a PNG drawn in the same process) and --viewer (that figure as a page for the report's viewer)."""
    parser.add_argument("--figure", default=None, help=help)
    parser.add_argument("--viewer", default=None, help="HTML: the figure as a page for the report's viewer")


def draw_figure(args, draw: Callable, *data) -> None:
    """``draw(*data, args.figure)`` where --figure is given, then its viewer page where --viewer is."""
    if args.figure:
        draw(*data, args.figure)
    if args.viewer:
        from lostmid.plots.style import write_viewer

        write_viewer(args.figure, args.viewer)


def block_inputs(args) -> list:
    """The input records (lostmid.training.checkpoint.RunInput) that the block's checkpoints must have
    been made from: the ``--attention-bias`` file's digest, if one is given."""
    from lostmid.training import checkpoint

    return checkpoint.run_inputs(args.attention_bias, args.spec["L"])


def block_analysis_args(parser: argparse.ArgumentParser) -> None:
    """``--spec``, ``--seeds``, the ``--checkpoints`` of a block and the ``--attention-bias`` they were made
    from: what every per-checkpoint analysis reads."""
    spec_arg(parser)
    parser.add_argument(
        "--checkpoints", nargs="+", required=True, help="every checkpoint of every seed, seed after seed"
    )
    attention_bias_arg(parser, "the checkpoints must have been made from it (its digest is in their fingerprint)")


def block_runs(args, *per_run: str) -> list[tuple]:
    """(spec, values of the ``per_run`` options) for every seed of ``args``, in seed order.

    Each option in ``per_run`` holds one file per seed, except ``checkpoints``, which holds the
    same number of checkpoints for every seed, one seed after another.
    """
    from lostmid.errors import ConfigError

    seeds = args.seeds or [args.spec["seed"]]
    if len(set(seeds)) != len(seeds):
        raise ConfigError(f"--seeds lists a seed twice: {seeds}")
    columns = []
    for option in per_run:
        values = getattr(args, option)
        if len(values) % len(seeds) or (option != "checkpoints" and len(values) != len(seeds)):
            raise ConfigError(f"--{option.replace('_', '-')} names {len(values)} files for {len(seeds)} seeds {seeds}")
        size = len(values) // len(seeds)
        columns.append(
            [values[i * size : (i + 1) * size] if option == "checkpoints" else values[i] for i in range(len(seeds))]
        )
    return [({**args.spec, "seed": seed}, *(column[i] for column in columns)) for i, seed in enumerate(seeds)]
