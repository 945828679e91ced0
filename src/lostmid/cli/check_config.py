"""Commands that check config files: the line of a YAML error, then the schema and every cross-key
rule, as the Snakefile checks them; and Snakemake behind that check."""

from __future__ import annotations

import itertools
import logging
import os
import sys
from pathlib import Path

from lostmid.cli.registry import command
from lostmid.schema import SCHEMA

log = logging.getLogger(__name__)


def _args(parser):
    parser.add_argument(
        "files",
        nargs="+",
        help="config files, merged in this order as --configfile merges them; they stand "
        "alone, as in the Snakefile (to check config/config.yaml under them, name it first)",
    )
    parser.add_argument(
        "--schema",
        default=str(SCHEMA),
        help="JSON schema of the config (default: the one the package ships, %(default)s)",
    )
    parser.add_argument(
        "--base", default="", help="a config file merged first if present (default: none, as the Snakefile merges none)"
    )


@command("check-config", "check config files: YAML syntax (file and line), then the schema and cross-key rules", _args)
def check_config(args):
    from lostmid import config as cfg
    from lostmid import jobs

    files = ([args.base] if args.base and Path(args.base).is_file() else []) + list(args.files)
    config = cfg.load(*files, schema_path=args.schema)  # a missing schema: one error line (exit 2)
    jobs.check(config)
    log.info("%s: valid (%d runs)", " + ".join(files), len(cfg.runs(config)))


def snakemake_configfiles(argv: list[str]) -> list[str]:
    """The config files a Snakemake command line names: the words after its last ``--configfile`` (or
    ``--configfiles``) up to the next option, or the value of ``--configfile=FILE``, as Snakemake reads them."""
    files: list[str] = []
    for i, word in enumerate(argv):
        name, equals, value = word.partition("=")
        if name in ("--configfile", "--configfiles"):
            files = [value] if equals else list(itertools.takewhile(lambda w: not w.startswith("-"), argv[i + 1 :]))
    return files


def _snakemake_args(parser):
    parser.epilog = "every other argument goes to Snakemake unchanged"


@command(
    "snakemake",
    "check the config files of a Snakemake command line (a missing file, or the file and line of a YAML error, in "
    "one line), then run Snakemake with the same arguments",
    _snakemake_args,
    passes_on=True,
)
def snakemake(args):
    """Snakemake reads its --configfile before the workflow's code runs, so a missing or unparsable file
    ends there in its own traceback; this command checks them first, as the Snakefile would."""
    from lostmid import config as cfg
    from lostmid import jobs

    files = snakemake_configfiles(args.passed_on)
    if files:
        config = cfg.load(*files)
        jobs.check(config)
        log.info("%s: valid (%d runs); running Snakemake", " + ".join(files), len(cfg.runs(config)))
    sys.stdout.flush()
    sys.stderr.flush()
    os.execvp(sys.executable, [sys.executable, "-m", "snakemake", *args.passed_on])
