"""The command registry of the ``lostmid`` command line: a leaf that the stage modules import.

Each stage module (``lostmid.cli.training``, ``.influence``, ...) declares its subcommands with
``@command(name, help, arguments)``; ``lostmid.cli.main`` imports them all and builds the parser.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable

# name -> (help, arguments(parser), run(args))
COMMANDS: dict[str, tuple[str, Callable, Callable]] = {}


def command(name: str, help: str, arguments: Callable):
    """Register ``func`` as subcommand ``name``; ``arguments(parser)`` declares its options."""

    def wrap(func):
        COMMANDS[name] = (help, arguments, func)
        return func

    return wrap


def json_arg(text: str):
    """An argparse type: a JSON value (config blocks and run specs travel as JSON)."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise argparse.ArgumentTypeError(f"not valid JSON: {err}") from err


def spec_arg(parser: argparse.ArgumentParser) -> None:
    """The ``--spec`` option every per-run command takes."""
    parser.add_argument("--spec", type=json_arg, required=True, help="run spec (JSON), as built by lostmid.config.run_spec")


def figure_args(parser: argparse.ArgumentParser) -> None:
    """The options of a figure drawn from one kind of table: ``--out`` PNG and the tables."""
    parser.add_argument("--out", required=True, help="PNG file")
    parser.add_argument("inputs", nargs="+", help="Parquet files of the table to plot")
