"""Commands of the architectures stage: the random-init sweep, the pretrained models on real text, the
flag-recall comparison (each drawing its figure in the same process) and the Markdown summary
(docs/architectures.md)."""

from __future__ import annotations

import logging

from lostmid import io
from lostmid.cli.registry import command, draw_figure, figure_args, json_arg
from lostmid.errors import ConfigError

log = logging.getLogger(__name__)


def _tables(parser):
    parser.add_argument("--settings", type=json_arg, required=True, help="the config's architectures block (JSON)")
    parser.add_argument("--profiles", required=True, help="Parquet: measured and theory profiles")
    parser.add_argument("--layers", required=True, help="Parquet: lambda_t and attention statistics per layer")
    parser.add_argument("--comparison", required=True, help="Parquet: Spearman, W1/(n-1), endpoint masses per theory")
    figure_args(parser, "PNG: measured profiles against the theories (drawn in the same process)")


def _write(args, tables, draw) -> None:
    for table, path in zip(tables, (args.profiles, args.layers, args.comparison)):
        io.write_parquet(table, path)
    draw_figure(args, draw, tables[0])


@command(
    "architectures",
    "influence profiles of random-init (and pretrained) Hugging Face causal LMs against the rollout theories",
    _tables,
)
def architectures(args):
    from lostmid.architectures import sweep
    from lostmid.architectures.settings import ArchSettings
    from lostmid.config import settings_from_section
    from lostmid.core import devices

    settings = settings_from_section(ArchSettings, args.settings, "architectures")
    device = devices.resolve(args.device)
    log.info(
        "sweep: %s, depths %s, lengths %s, seeds %s, targets %s, powers %s",
        settings.families,
        settings.depths,
        settings.lengths,
        settings.seeds,
        settings.targets,
        settings.powers,
    )
    from lostmid.plots.architectures import sweep_profiles

    _write(args, sweep.random_sweep(settings, device), sweep_profiles)


@command(
    "architectures-pretrained",
    "pretrained causal LMs on real text and their random-init twins, with intervals",
    _tables,
)
def architectures_pretrained(args):
    from lostmid.architectures import pretrained
    from lostmid.architectures.settings import TextSettings
    from lostmid.config import settings_from_section
    from lostmid.core import devices

    settings = settings_from_section(TextSettings, args.settings.get("text"), "architectures.text")
    entries = args.settings.get("pretrained") or []
    if not entries:
        raise ConfigError("config key architectures.pretrained: no pretrained model is listed")
    device = devices.resolve(args.device)
    log.info(
        "pretrained: %d entries, lengths %s, sequences %s, corpus %s, twin seed %s",
        len(entries),
        settings.lengths,
        settings.sequences,
        settings.corpus,
        settings.twin_seed,
    )
    from lostmid.plots.architectures import pretrained_profiles

    _write(args, pretrained.pretrained_tables(entries, settings, device), pretrained_profiles)


def _flag_args(parser):
    _tables(parser)
    parser.add_argument(
        "--runs",
        type=json_arg,
        required=True,
        help="JSON list of [run spec, [checkpoint paths], attention bias file or null]",
    )


@command("architectures-flag", "influence profiles of flag-recall checkpoints against the rollout theories", _flag_args)
def architectures_flag(args):
    from lostmid.architectures import sweep
    from lostmid.architectures.settings import FlagSettings
    from lostmid.config import settings_from_section
    from lostmid.core import devices

    settings = settings_from_section(FlagSettings, args.settings.get("flag"), "architectures.flag")
    device = devices.resolve(args.device)
    from lostmid.training import checkpoint

    checkpoints = []
    for spec, paths, bias in args.runs:
        inputs = checkpoint.run_inputs(bias, spec["L"])  # the bias file read once per run, not per checkpoint
        checkpoints += [(path, spec, inputs) for path in paths]
    log.info("flag-recall comparison: %d checkpoints, targets %s", len(checkpoints), settings.targets)
    from lostmid.plots.architectures import flag_profiles

    _write(args, sweep.flag_comparison(checkpoints, settings, device), flag_profiles)


def _summary_args(parser):
    parser.add_argument("--markdown", required=True, help="comparison table (Parquet file or folder)")
    parser.add_argument("--target", default=None, help="target summarized (default: that of the table's first row)")
    parser.add_argument(
        "--power", type=int, default=None, help="norm power summarized (default: that of the first row)"
    )
    parser.add_argument("--n", type=int, default=None, help="length of the endpoint table (default: the largest)")
    parser.add_argument("--query", default=None, help="pandas query selecting rows first, e.g. \"family != 'flag'\"")
    parser.add_argument("--out", default=None, help="write the Markdown here (default: print it)")


@command("architectures-summary", "Markdown tables of the architectures comparison (means over seeds)", _summary_args)
def architectures_summary(args):
    import pandas as pd

    from lostmid.architectures import summary

    comparison = pd.read_parquet(args.markdown)
    if args.query:
        comparison = comparison.query(args.query)
    text = summary.markdown(comparison, args.target, args.power, args.n)
    if args.out:
        io.write_text(text, args.out)
    else:
        print(text, end="")
