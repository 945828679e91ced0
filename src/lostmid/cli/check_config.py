"""Command that checks config files: the line of a YAML error, then the schema and every cross-key
rule, as the Snakefile checks them."""

from __future__ import annotations

import logging
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
    from lostmid import workflow

    files = ([args.base] if args.base and Path(args.base).is_file() else []) + list(args.files)
    config = cfg.load(*files, schema_path=args.schema)  # a missing schema: one error line (exit 2)
    workflow.check(config)
    log.info("%s: valid (%d runs)", " + ".join(files), len(cfg.runs(config)))
