"""Commands of the sequence-length study (docs/length.md): the profiles at initialization at every L,
and the literal bias fit at every L with its held-out profiles and cost."""

from __future__ import annotations

from lostmid import io
from lostmid.cli.registry import command, json_arg


def _common_args(parser):
    parser.add_argument("--model", type=json_arg, required=True, help="the config's model block (JSON)")
    parser.add_argument(
        "--settings", type=json_arg, required=True, help="the config's length block (JSON; LengthSettings)"
    )


def _settings(args):
    from lostmid.analysis.settings import LengthSettings
    from lostmid.config import settings_from_block

    return settings_from_block(LengthSettings, args.settings, "length")


def _init_args(parser):
    _common_args(parser)
    parser.add_argument(
        "--out", required=True, help="Parquet: profiles at init per L, residual path, seed and position"
    )


@command(
    "length-init",
    "influence profiles at initialization at every L of the length study, with and without the residual path",
    _init_args,
)
def length_init(args):
    from lostmid.analysis import length
    from lostmid.core import devices

    io.write_parquet(length.init_profiles(args.model, _settings(args), devices.resolve(args.device)), args.out)


def _fit_args(parser):
    _common_args(parser)
    parser.add_argument(
        "--fit", type=json_arg, required=True, help="the study's fit block (JSON; length_fit_block: FitSettings)"
    )
    parser.add_argument("--out", required=True, help="Parquet: held-out profiles per L, residual path and bias")
    parser.add_argument("--fits", required=True, help="Parquet: one row per fit, its held-out check and its cost")


@command(
    "length-fit",
    "the literal attention bias fitted at every L of the length study (full and distance forms, the "
    "short-L distance form carried over), with its held-out profiles and cost",
    _fit_args,
)
def length_fit(args):
    from lostmid.analysis import length
    from lostmid.analysis.settings import FitSettings
    from lostmid.config import settings_from_block

    fit = settings_from_block(FitSettings, args.fit, "bias_fit")  # the keys of a fit
    profiles, fits = length.fit_profiles(args.model, _settings(args), fit)
    io.write_parquet(fits, args.fits)
    io.write_parquet(profiles, args.out)
