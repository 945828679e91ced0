"""The sequence-length study (docs/length.md): its statistics' nulls, its growth claims on planted
profiles (growth: supported; none: contradicted), the carried bias and the one-line refusal of a length."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from lostmid.analysis.length import carried_bias, check_lengths
from lostmid.analysis.settings import FitSettings, LengthSettings
from lostmid.config import settings_from_section
from lostmid.errors import ConfigError
from lostmid.evidence import length_claims as lc
from lostmid.evidence.claims import CLAIMS_BY_NAME
from lostmid.evidence.decisions import CONTRADICTED, SUPPORTED, verdict_by
from lostmid.evidence.estimators import made_by
from lostmid.evidence.inputs import Inputs
from lostmid.evidence.length_claims import arm
from lostmid.evidence.settings import EvidenceSettings
from lostmid.tables.length import profile_statistics, slope_per_doubling

LENGTHS = (8, 16, 32, 64)
EV = settings_from_section(EvidenceSettings, None, "evidence")


def fixed_shape(L: int, seed: int) -> np.ndarray:
    """A profile of one shape in p at every L (falling from 10 to 1), with a little seed noise."""
    p = (np.arange(1, L + 1) - 0.5) / L
    return 10.0 ** (1 - p) * (1 + 0.01 * np.random.default_rng(seed * 1000 + L).standard_normal(L))


def growing(L: int, seed: int) -> np.ndarray:
    """First/last grows like L^2 (0.6 orders of magnitude per doubling: above the margin log10 2)."""
    return fixed_shape(L, seed) * ((L / 8.0) ** 2) ** (1 - (np.arange(1, L + 1) - 0.5) / L)


def init_table(profile) -> pd.DataFrame:
    rows = []
    for L in LENGTHS:
        for seed in range(4):
            values = profile(L, seed)
            rows.append(
                pd.DataFrame(
                    {
                        "L": L,
                        "residual": False,
                        "depth": 4,
                        "seed": seed,
                        "position": np.arange(1, L + 1),
                        "density": values**2,
                        "output_jacobian": values,
                    }
                )
            )
    return pd.concat(rows, ignore_index=True)


def decide(claim, inputs) -> str:
    (setting,) = [s for s in claim.settings(inputs, EV) if s.residual is False][:1]
    return verdict_by(claim.rule, made_by(claim, inputs, EV, setting).interval, EV)


def inputs_with(**tables) -> Inputs:
    return Inputs(variants={"baseline": {}}, model={}, **tables)


def test_a_fixed_shape_has_null_slope_zero_and_a_last_position_spike_does_not_for_e_inf():
    lengths = (64, 128, 256, 512)  # 0 up to p's grid (1/L): 0.06 at L 8-64, far below the margins
    fixed = [profile_statistics(10.0 ** (1 - (np.arange(1, L + 1) - 0.5) / L)) for L in lengths]
    for statistic in ("log10_first_last", "log2_E_inf", "log2_L_last_share"):
        assert slope_per_doubling(lengths, [s[statistic] for s in fixed]) == pytest.approx(0.0, abs=0.01)
    spike = [profile_statistics(np.r_[np.full(L - 1, 1e-12), 1.0]) for L in LENGTHS]
    assert [2 ** s["log2_E_inf"] for s in spike] == pytest.approx([L - 1 for L in LENGTHS], rel=1e-6)
    assert slope_per_doubling(LENGTHS, [s["log2_L_last_share"] for s in spike]) == pytest.approx(1.0, abs=1e-6)


@pytest.mark.parametrize(
    ("profile", "expected"), [(growing, SUPPORTED), (fixed_shape, CONTRADICTED)], ids=["growth", "fixed shape"]
)
def test_the_init_growth_claims_are_decided_on_planted_profiles(profile, expected):
    inputs = inputs_with(length_init=init_table(profile))
    by_name = CLAIMS_BY_NAME
    assert decide(by_name["length_first_last_jacobian_grows"], inputs) == expected
    assert decide(by_name["length_first_last_density_grows"], inputs) == expected


def fit_tables(profile) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Held-out profiles: B = 0 grows; the fitted ('full') B follows ``profile``."""
    rows = []
    for L in LENGTHS:
        for init in range(4):
            for bias, values in (("none", growing(L, init)), ("full", profile(L, init))):
                rows.append(
                    pd.DataFrame(
                        {
                            "L": L,
                            "depth": 4,
                            "residual": False,
                            "bias": bias,
                            "fitted_at": np.nan if bias == "none" else L,
                            "heldout_init": init,
                            "position": np.arange(1, L + 1),
                            "output_jacobian": values,
                        }
                    )
                )
    fits = pd.DataFrame(
        {
            "L": LENGTHS,
            "param": "full",
            "seconds": 1.0,
            "accepted": True,
            "imbalance_before": 1.0,
            "imbalance_after": 0.1,
        }
    )
    return pd.concat(rows, ignore_index=True), fits


@pytest.mark.parametrize(
    ("profile", "expected"), [(fixed_shape, SUPPORTED), (growing, CONTRADICTED)], ids=["bounded", "still growing"]
)
def test_the_fitted_bias_claim_is_decided_on_planted_profiles(profile, expected):
    profiles, fits = fit_tables(profile)
    inputs = inputs_with(length_fit=profiles, length_fits=fits)
    claim = CLAIMS_BY_NAME["length_fitted_bias_bounds_first_last"]
    assert decide(claim, inputs) == expected


def test_a_fit_that_failed_its_check_leaves_the_fitted_bias_claim_without_a_verdict():
    profiles, fits = fit_tables(fixed_shape)
    fits.loc[fits.L == 32, "accepted"] = False
    settings = lc.fit_settings(inputs_with(length_fit=profiles, length_fits=fits), EV)
    assert all("L [32]" in s.not_evaluable for s in settings)


def test_a_carried_distance_bias_keeps_its_lags_and_holds_the_farthest_one():
    c = torch.tensor([3.0, 2.0, 1.0, 0.5])
    lag = (torch.arange(4)[:, None] - torch.arange(4)[None, :]).clamp_min(0)
    short = c[lag].tril()
    long = carried_bias(short, 7)
    by_lag = long[6].flip(0)  # the last query's bias by lag 0..6
    assert torch.allclose(by_lag[:4] - by_lag[0], c - c[0])
    assert torch.allclose(by_lag[4:], by_lag[3].expand(3))
    assert torch.equal(long.triu(1), torch.zeros(7, 7))


def test_a_length_the_fit_cannot_hold_is_refused_in_one_line():
    model = {"d_model": 16, "heads": 4, "mlp_ratio": 4, "block": "sequential", "epsilon": 1.0, "readout": "last"}
    settings = settings_from_section(
        LengthSettings, {"L": [8, 16, 4096], "full_max_L": 16, "fit_max_L": 16, "max_memory_mb": 8000}, "length"
    )
    fit = settings_from_section(FitSettings, {"batch": 16}, "bias_fit")
    with pytest.raises(ConfigError, match=r"^config key length.L=4096: the bias fit would hold ~\d+ MB") as err:
        check_lengths(model, settings, fit)
    assert "\n" not in str(err.value)


def test_the_arm_of_a_length_variant_drops_its_suffix():
    assert [arm(v) for v in ("baseline", "baseline_L32", "debiased_literal_L128")] == [
        "baseline",
        "baseline",
        "debiased_literal",
    ]


def test_the_study_measures_every_length_and_fits_and_carries_b_where_the_config_says():
    from lostmid.analysis.length import fit_profiles, init_profiles

    model = {"d_model": 8, "heads": 2, "mlp_ratio": 2, "block": "sequential", "epsilon": 1.0, "readout": "last"}
    settings = settings_from_section(
        LengthSettings,
        {
            "L": [4, 6, 8],
            "depth": 1,
            "seeds": [0, 1],
            "batch_per_position": 1,
            "full_max_L": 4,
            "fit_max_L": 6,
            "carry_from": 4,
        },
        "length",
    )
    init = init_profiles(model, settings)
    assert init.groupby(["L", "residual"]).seed.nunique().to_dict() == {
        (L, r): 2 for L in (4, 6, 8) for r in (False, True)
    }
    fit = settings_from_section(
        FitSettings, {"target": "output_jacobian", "heldout": 2, "inits": 1, "batch": 4, "max_iter": 2}, "bias_fit"
    )
    profiles, fits = fit_profiles(model, settings, fit)
    assert list(zip(fits.L, fits.param)) == [(4, "full"), (4, "distance"), (6, "distance")]
    biases = profiles.groupby("L").bias.unique().map(sorted).to_dict()
    assert biases == {4: ["distance", "full", "none"], 6: ["carried", "distance", "none"], 8: ["carried", "none"]}
    assert set(profiles.fitted_at[profiles.bias == "carried"]) == {4}
