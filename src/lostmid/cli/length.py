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
    from lostmid.config import settings_from_section

    return settings_from_section(LengthSettings, args.settings, "length")


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
        "--fit", type=json_arg, required=True, help="the study's fit section (JSON; length_fit_section: FitSettings)"
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
    from lostmid.config import settings_from_section

    fit = settings_from_section(FitSettings, args.fit, "bias_fit")  # the keys of a fit
    profiles, fits = length.fit_profiles(args.model, _settings(args), fit)
    io.write_parquet(fits, args.fits)
    io.write_parquet(profiles, args.out)


def _report_args(parser):
    parser.add_argument("--results", required=True, help="a length run's results folder")
    parser.add_argument("--into", default=None, help="a docs page: write the tables between its length markers")


PAGE_MARKERS = ("<!-- length tables: begin -->", "<!-- length tables: end -->")


@command(
    "length-report",
    "the length study's tables (statistics at init by L, each fit's check, cost and held-out profiles) as Markdown",
    _report_args,
)
def length_report(args):
    from pathlib import Path

    import pandas as pd

    from lostmid.tables.length import fit_summary, init_summary

    folder = Path(args.results, "length")
    init = init_summary(pd.read_parquet(folder / "init.parquet"))
    fits = fit_summary(pd.read_parquet(folder / "fits.parquet"), pd.read_parquet(folder / "fit_profiles.parquet"))
    text = (
        "\nAt initialization, no fix: mean over init seeds [95% t interval] of each statistic by L "
        "(`lostmid.tables.length`).\n\n"
        + init.to_markdown(index=False)
        + "\n\nThe literal B fitted at each L: the fit's cost (one thread), its held-out check, and the "
        "output-Jacobian profile on its held-out initializations (mean [95% t interval]).\n\n"
        + fits.set_index(["L", "B"]).T.to_markdown()
        + "\n\n"
    )
    if args.into:
        io.write_between_markers(args.into, *PAGE_MARKERS, text)
    else:
        print(text)
