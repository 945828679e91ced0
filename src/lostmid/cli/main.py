"""The lostmid command line: the small interface the Snakemake rules call.

Each subcommand parses paths and a JSON run spec, sets threads and logging, and calls one
library function. Errors the user can fix (config, checkpoint, a folder that cannot be written,
a full disk) exit with status 2 and one clear line instead of a traceback. A damaged input (a
truncated checkpoint, another run's checkpoint, a table without its columns: lostmid.errors.InputError)
is moved aside, so that the workflow's next run rebuilds it rather than failing on it again.

The console entry (``run``) pins the numerics (lostmid.numerics) before any command imports numpy or
torch; importing lostmid does not. ``lostmid --help`` lists the commands by what a user does with
them (``GROUPS``): run a workflow and its jobs, inspect, write pages.
"""

from __future__ import annotations

import argparse
import gc
import logging
import os
import sys

from lostmid import numerics
from lostmid.cli import (  # noqa: F401  (they register commands)
    algebraic,
    architectures,
    channels,
    check_config,
    evidence,
    figures,
    fix,
    front,
    influence,
    joblog,
    length,
    pooled,
    remedies,
    results,
    retrieval,
    study,
    training,
)
from lostmid.cli.registry import COMMANDS, PASSES_ON
from lostmid.errors import InputError, LostmidError

log = logging.getLogger("lostmid")


# The commands by what a user does with them, as `lostmid --help` lists them (every command in one place:
# tests/test_cli.py): run a workflow (its jobs, one stage each, are what the rules call), inspect, write pages.
RUN = ("snakemake",)
JOBS = (
    "init",
    "train",
    "evaluate",
    "density-flow",
    "observability",
    "channels",
    "influence-baselines",
    "bias-fit",
    "bias-control",
    "remedies-table",
    "algebraic",
    "architectures",
    "architectures-flag",
    "architectures-pretrained",
    "retrieval-corpus",
    "retrieval",
    "retrieval-summary",
    "fix",
    "length-init",
    "length-fit",
    "evidence",
    "figures",
    "report-front",
)
INSPECT = ("check-config", "pooled")
PAGES = (
    "results-page",
    "findings",
    "study-record",
    "retrieval-page",
    "retrieval-tables",
    "fix-page",
    "architectures-summary",
    "length-report",
)
GROUPS = (
    ("run a workflow", RUN),
    ("its jobs, one stage each: the rules call them with --log LOG --attempt N (`lostmid @FILE` reruns one)", JOBS),
    ("inspect configs and runs", INSPECT),
    ("pages and records from a run", PAGES),
)


def grouped_commands(width: int) -> str:
    """The commands of ``GROUPS`` as `lostmid --help` shows them, wrapped at ``width``: each with its help, the
    jobs by name only."""
    import textwrap

    lines = []
    for title, names in GROUPS:
        lines += textwrap.wrap(f"{title}:", width, subsequent_indent="  ")
        if names is JOBS:
            lines += textwrap.wrap(
                ", ".join(names), width, initial_indent="  ", subsequent_indent="  ", break_on_hyphens=False
            )
            continue
        column = max(len(name) for name in names) + 4
        for name in names:
            lines += textwrap.wrap(
                COMMANDS[name][0], width, initial_indent=f"  {name:<{column - 2}}", subsequent_indent=" " * column
            )
    return "\n".join(lines)


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--threads", type=int, default=None, help="CPU threads for torch (Snakemake passes {threads})")
    parser.add_argument("--device", default="auto", help="auto (CUDA when present), cpu or cuda")


def build_parser() -> argparse.ArgumentParser:
    # `lostmid @FILE` reads arguments from FILE, one a line: how the rules pass theirs (lostmid.cli.argfile)
    import shutil
    import textwrap

    width = min(max(shutil.get_terminal_size().columns, 80), 120) - 2
    parser = argparse.ArgumentParser(
        prog="lostmid",
        usage="%(prog)s [-h] COMMAND ...",
        description="\n".join(
            textwrap.wrap(f"{__doc__.splitlines()[0]} `lostmid COMMAND --help`: a command's options.", width)
        ),
        epilog=grouped_commands(width),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        fromfile_prefix_chars="@",
    )
    # a job's options (the rules pass them; the jobs' heading names them): its log per attempt (lostmid.cli.joblog)
    parser.add_argument("--log", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--attempt", type=int, default=1, help=argparse.SUPPRESS)  # {resources.attempt}
    # the commands are listed by group in the epilog (GROUPS), not one by one in argparse's own list
    sub = parser.add_subparsers(
        dest="command", required=True, metavar="COMMAND", help=argparse.SUPPRESS, prog="lostmid"
    )
    for name, (help_text, arguments, func) in sorted(COMMANDS.items()):
        if name in PASSES_ON:  # no options of its own to mistake another program's for (no abbreviations)
            p = sub.add_parser(name, description=help_text, allow_abbrev=False, add_help=False)
        else:
            p = sub.add_parser(name, description=help_text)
            _common(p)
        arguments(p)
        p.set_defaults(func=func)
    return parser


def parse(argv) -> argparse.Namespace:
    """The parsed command line; only a command in PASSES_ON accepts arguments it does not declare."""
    parser = build_parser()
    args, rest = parser.parse_known_args(argv)
    if args.command in PASSES_ON:
        args.passed_on = rest
    elif rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    return args


def main(argv=None) -> int:
    return command(parse(argv))


def command(args: argparse.Namespace) -> int:
    """Run the parsed command; a user's error is one line (status 2), not a traceback."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    if getattr(args, "threads", None):
        limit_threads(args.threads)
    try:
        if getattr(args, "spec", None) is not None:  # every per-run command's --spec (lostmid.cli.registry.spec_arg)
            from lostmid.config import check_spec

            args.spec = check_spec(args.spec)
        args.func(args)
    except LostmidError as err:
        message = str(err) + (moved_aside(err.path) if isinstance(err, InputError) and err.path else "")
        log.error("%s", message)
        print(f"lostmid {args.command}: error: {message}", file=sys.stderr)
        return 2
    except OSError as err:  # the operating system's reasons (a file that cannot be read, ...): one line too
        message = (
            f"cannot access {err.filename}: {err.strerror}"
            if err.filename and err.strerror
            else f"{type(err).__name__}: {err}"
        )
        log.error("%s", message)
        print(f"lostmid {args.command}: error: {message}", file=sys.stderr)
        return 2
    return 0


def moved_aside(path) -> str:
    """Move the damaged input ``path`` aside (lostmid.io.move_aside); the end of the error line saying so."""
    from lostmid import io

    moved = io.move_aside(path)
    return f"; moved it aside to {moved}: the next run rebuilds it" if moved else ""


def limit_threads(n: int) -> None:
    """Cap the CPU thread pools at ``n`` (Snakemake's ``{threads}``); under the deterministic
    numerics (lostmid.numerics) at its one thread, whatever ``n``: threads enter reductions.

    torch's intra-op pool, OpenMP and the BLAS libraries read these variables when they start,
    so a command that never needs torch (the figures) does not import it (2.5 s) just to set
    its pool; a process that already has torch loaded sets the pool directly.
    """
    if os.environ.get(numerics.MODE_VARIABLE) == "deterministic":
        n = numerics.THREADS
    for variable in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[variable] = str(n)
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(n)


def run() -> None:
    """The console entry point: the numerics pinned (lostmid.numerics: ``$LOSTMID_NUMERICS``, which the Snakefile
    exports to every job, else deterministic) before anything imports numpy or torch, the command (with ``--log``,
    into its attempt log), its CPU time in the log, then an exit without the final garbage collection."""
    numerics.pin()
    args = parse(sys.argv[1:])
    with joblog.attempt_log(args.log, args.attempt) as outcome:
        outcome.status = command(args)
        log_usage()
    # At exit CPython traverses every object once more before it frees the modules: 0.8 s of
    # CPU with torch and pandas loaded, a fifth of a short analysis job, and the default pipeline
    # runs ~200 of them. Every output is written and closed by now, so move all objects to
    # the permanent generation, which the collector skips (gc.freeze; atexit still runs).
    gc.freeze()
    sys.exit(outcome.status)


def log_usage() -> None:
    """This process's CPU time and peak memory, one log line; benchmarks/bench_pipeline.py sums these
    lines over a run's logs (the job CPU of its start-up share)."""
    import resource

    usage = resource.getrusage(resource.RUSAGE_SELF)
    log.info(
        "job cpu %.2f s (user %.2f s, system %.2f s), peak memory %.0f MB",
        usage.ru_utime + usage.ru_stime,
        usage.ru_utime,
        usage.ru_stime,
        usage.ru_maxrss / 1024,
    )


if __name__ == "__main__":  # python -m lostmid.cli.main: the command alone, without the job's log and usage line
    numerics.pin()
    sys.exit(main())
