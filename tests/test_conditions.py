"""Regional channel energies (docs/theory.md §5.2) and the soundness of the condition tests (5.3).

A sufficient condition may be conservative (fail while its conclusion holds) but never
unsound (hold while its conclusion fails); the exact channel comparison is an equivalence.
"""

import json
import logging

import numpy as np
import pandas as pd
import pytest
import torch

from lostmid.analysis import conditions, metrics
from lostmid.analysis.channels import CHANNELS, PAIRS, Profiles, channel_profiles
from lostmid.analysis.conditions import Regional, SoundnessError
from lostmid.analysis.settings import ChannelSettings
from lostmid.cli import main as cli
from lostmid.config import settings_from_section
from lostmid.core.model import FlagTransformer
from lostmid.errors import ConfigError
from lostmid.evidence.claims import CLAIMS_BY_NAME, Inputs, evidence_table
from lostmid.evidence.settings import EvidenceSettings
from lostmid.training.checkpoint import TrainingState
from lostmid.training.train import train_steps

from conftest import model_config, tiny_spec

SETTINGS = {
    "batch_per_position": 2,
    "seed": 5,
    "deltas": [0.1, 0.2, 0.3],
    "power_iterations": 30,
    "batch_size": 64,
    "float64": True,
}
CHANNEL_SETTINGS = settings_from_section(ChannelSettings, SETTINGS, "channels")
EV = settings_from_section(EvidenceSettings, {}, "evidence")  # the schema's defaults


def random_model(block, seed, scale=None, **overrides):
    torch.manual_seed(seed)
    model = FlagTransformer(
        model_config(**{**dict(seq_len=10, depth=2, d_model=8, heads=2, mlp_ratio=2, block=block), **overrides})
    )
    if scale is not None:
        with torch.no_grad():
            for p in model.parameters():
                p.normal_(0.0, scale)
            model.set_attention_bias(torch.randn(model.config.seq_len, model.config.seq_len))
    return model


def random_profiles(seed, L=10, n=6, d=3):
    """Profiles of random channels whose pairwise correlations have both signs."""
    g = torch.Generator().manual_seed(seed)
    base = torch.randn(n, L, d, generator=g, dtype=torch.float64)
    parts = {
        a: torch.randn(n, L, d, generator=g, dtype=torch.float64)
        * torch.rand(1, L, 1, generator=g, dtype=torch.float64)
        * 3
        for a in CHANNELS
    }
    parts["cone"] = parts["cone"] - 0.8 * parts["res"] + 0.3 * base  # strong negative correlation with res
    parts["loc"] = parts["loc"] + 0.5 * base
    return Profiles.from_channels(sum(parts.values()), parts)


@pytest.mark.parametrize("seed", range(5))
def test_the_channel_energies_and_cross_terms_add_up_to_the_regional_mean_density(seed):
    profiles = random_profiles(seed)
    for delta in (0.1, 0.25, 0.4):
        regional = Regional(profiles, delta)
        regional.check_identity()
        for region in conditions.REGIONS:
            expected = regional.m[region]
            assert sum(regional.J[region].values()) + regional.Xi(region) == pytest.approx(expected, rel=1e-12)


def test_the_regional_means_and_delta_are_those_of_the_influence_metrics():
    regional = Regional(random_profiles(0), 0.2)
    expected = metrics.regional_metrics(metrics.normalize(random_profiles(0).energy.numpy()), 0.2)
    for region in conditions.REGIONS:
        assert regional.m[region] == pytest.approx(expected[f"m_{region}"], rel=1e-14)
    assert regional.delta_gap == pytest.approx(expected["Delta"], rel=1e-14)


@pytest.mark.parametrize("seed", range(5))
def test_rho_is_a_correlation_and_the_two_bounds_bracket_the_regional_density(seed):
    regional = Regional(random_profiles(seed), 0.2)
    for region in conditions.REGIONS:
        for pair in PAIRS:
            rho = regional.rho(region, pair)
            assert -1 - 1e-12 <= rho <= 1 + 1e-12
            assert 2 * rho * np.sqrt(regional.J[region][pair[0]] * regional.J[region][pair[1]]) == pytest.approx(
                regional.xi[region][pair]
            )
        m = regional.m[region]
        assert regional.lower_universal(region) <= regional.lower(region) + 1e-12  # rho = 1 is the cruder bound
        assert regional.lower(region) <= m + 1e-12 <= regional.upper(region) + 2e-12
        assert regional.upper(region) <= regional.upper_universal(region) + 1e-12
    # The construction has a negatively correlated pair, so the measured bounds are not trivial.
    assert min(regional.rho(r, ("res", "cone")) for r in conditions.REGIONS) < -0.3


def test_the_identity_check_fails_loudly_when_the_energies_do_not_add_up():
    profiles = random_profiles(0)
    profiles.channel["loc"] = profiles.channel["loc"] * 1.01
    with pytest.raises(SoundnessError, match="identity"):
        Regional(profiles, 0.2).check_identity()


@pytest.mark.parametrize("block", ["sequential", "parallel"])
def test_no_condition_is_unsound_on_random_models(block):
    """Random weights at several scales, with a random attention bias: zero violations, and the
    sufficient tests do hold somewhere, so the check is not vacuous."""
    held = set()
    tables = []
    for seed, scale in [(0, None), (1, 0.05), (2, 0.3), (3, 1.0)]:
        model = random_model(block, seed, scale)
        *_, rows, diagnostics = conditions.checkpoint_tables(model, CHANNEL_SETTINGS, "cpu")
        assert diagnostics["split_error"] < 1e-12 and diagnostics["gronwall_ratio"] <= 1
        assert conditions.violations(rows).empty
        held |= set(rows.loc[rows["holds"], "test"])
        tables.append(rows)
    rows = pd.concat(tables)
    # The exact comparison agrees with the sign of Delta everywhere.
    exact = rows[rows["test"].isin(conditions.EQUIVALENCES)]
    assert (exact["holds"] == exact["conclusion_holds"]).all()
    assert "sufficient_measured" in held


def test_residual_persistence_holds_for_a_near_identity_model_and_is_then_right():
    """Without LayerNorm and with tiny weights the steps barely move the adjoint: c is small, and
    Prop. 3.5 certifies that the last position keeps its lead over the middle."""
    model = random_model("sequential", 0, scale=0.02, layernorm=False)
    *_, rows, diagnostics = conditions.checkpoint_tables(model, CHANNEL_SETTINGS, "cpu")
    assert diagnostics["c_max"] < 0.5
    persistence = rows[rows["test"] == "residual_persistence"]
    assert persistence["holds"].all() and persistence["conclusion_holds"].all()


def test_cone_primacy_certifies_a_cone_channel_that_decays_from_the_left():
    L = 10
    p = (np.arange(1, L + 1) - 0.5) / L
    cone = torch.tensor((1 - p) ** 4, dtype=torch.float64)[None, :, None] * 3  # Q(i) ~ (1 - p)^4
    zero = torch.zeros_like(cone)
    parts = {"res": zero, "cone": cone, "loc": zero + 0.1}
    regional = Regional(Profiles.from_channels(cone + 0.1, parts), 0.2)
    row = next(r for r in regional.tests() if r["test"] == "cone_primacy")
    assert row["holds"] and row["conclusion_holds"]
    # The same profile mirrored (the cone grows to the right) is not certified.
    mirrored = {a: v.flip(1) for a, v in parts.items()}
    regional = Regional(Profiles.from_channels(cone.flip(1) + 0.1, mirrored), 0.2)
    row = next(r for r in regional.tests() if r["test"] == "cone_primacy")
    assert not row["holds"] and not row["conclusion_holds"]


def test_a_condition_that_holds_while_its_conclusion_fails_is_named():
    rows = pd.DataFrame(
        [
            {
                "step": 10,
                "delta": 0.2,
                "test": "sufficient_universal",
                "holds": True,
                "conclusion_holds": True,
                "lhs": 2.0,
                "rhs": 1.0,
            },
            {
                "step": 20,
                "delta": 0.3,
                "test": "cone_primacy",
                "holds": True,
                "conclusion_holds": False,
                "lhs": 2.0,
                "rhs": 1.0,
            },
            {
                "step": 20,
                "delta": 0.3,
                "test": "exact",
                "holds": False,
                "conclusion_holds": True,
                "lhs": 1.0,
                "rhs": 1.0,
            },  # a tie: within tolerance
            {
                "step": 30,
                "delta": 0.1,
                "test": "exact_left",
                "holds": False,
                "conclusion_holds": True,
                "lhs": 0.5,
                "rhs": 1.0,
            },
        ]
    )
    assert list(conditions.violations(rows).index) == [1, 3]
    flagged = conditions.flag_violations(rows, conditions.TOLERANCE["float64"])
    assert list(flagged.index[flagged["violation"]]) == [1, 3] and (flagged["tolerance"] == 1e-9).all()


def test_settings_fill_defaults_and_errors_name_the_key():
    assert settings_from_section(ChannelSettings, {}, "channels").power_iterations == 30  # the schema's default
    with pytest.raises(ConfigError, match="channels.power_iteration is unknown"):
        settings_from_section(ChannelSettings, {"power_iteration": 3}, "channels")
    with pytest.raises(ConfigError, match="channels.batch_size"):
        settings_from_section(ChannelSettings, {"batch_size": 0}, "channels")
    with pytest.raises(ConfigError, match=r"channels.deltas\[0\]"):
        settings_from_section(ChannelSettings, {"deltas": [0.6]}, "channels")
    with pytest.raises(ConfigError, match="channels.deltas"):
        metrics.check_deltas(8, [0.05], "channels.deltas")  # no position with p < 0.05 when L = 8


# The command on trained checkpoints ---------------------------------------------------------


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory):
    """A tiny run's checkpoints at steps 0 and 40."""
    torch.set_num_threads(1)
    folder = tmp_path_factory.mktemp("run")
    spec = tiny_spec(seq_len=10)
    spec["L"] = 10
    state = TrainingState.initial(spec, "cpu")
    state.save(folder / "step0.pt")
    train_steps(state, 40, "cpu", progress=False)
    state.save(folder / "step40.pt")
    return spec, [folder / "step0.pt", folder / "step40.pt"]


def run_command(spec, checkpoints, out, settings=SETTINGS):
    argv = [
        "channels",
        "--spec",
        json.dumps(spec),
        "--settings",
        json.dumps(settings),
        "--device",
        "cpu",
        "--checkpoints",
        *map(str, checkpoints),
    ]
    argv += [
        "--channels",
        str(out / "channels.parquet"),
        "--cross-terms",
        str(out / "cross.parquet"),
        "--conditions",
        str(out / "conditions.parquet"),
    ]
    return cli.main(argv)


@pytest.fixture(scope="module")
def written(trained_run, tmp_path_factory):
    """The command's three tables for the trained run (written once for the module)."""
    spec, checkpoints = trained_run
    out = tmp_path_factory.mktemp("tables")
    assert run_command(spec, checkpoints, out) == 0
    return out


def test_the_command_writes_three_tidy_tables_for_every_checkpoint_without_violations(trained_run, written):
    spec, checkpoints = trained_run
    keys = ["variant", "L", "depth", "seed", "step"]
    channels = pd.read_parquet(written / "channels.parquet")
    cross = pd.read_parquet(written / "cross.parquet")
    rows = pd.read_parquet(written / "conditions.parquet")
    assert list(channels.columns) == keys + ["delta", "region", "channel", "J"]
    assert list(cross.columns) == keys + ["delta", "region", "pair", "xi", "rho"]
    assert list(rows.columns) == keys + [
        "delta",
        "test",
        "holds",
        "conclusion_holds",
        "lhs",
        "rhs",
        "tolerance",
        "violation",
    ]
    assert sorted(rows["step"].unique()) == [0, 40]
    assert len(channels) == 2 * 3 * 3 * 3 and len(cross) == 2 * 3 * 3 * 3 and len(rows) == 2 * 3 * len(conditions.TESTS)
    assert conditions.violations(rows).empty
    # The identity m_B = sum J + Xi, re-derived from the written tables against an independent P_0 density.
    from lostmid.core import adjoint, task
    from lostmid.training import checkpoint

    model, _ = checkpoint.load_model(checkpoints[1], spec, "cpu")
    tokens, targets, _ = task.stratified_eval_set(10, SETTINGS["batch_per_position"], SETTINGS["seed"])
    energy = adjoint.energy(adjoint.input_adjoint(model.double(), tokens, targets)).numpy()
    expected = metrics.regional_metrics(metrics.normalize(energy), 0.2)
    J = channels[(channels.step == 40) & np.isclose(channels.delta, 0.2)].groupby("region")["J"].sum()
    Xi = cross[(cross.step == 40) & np.isclose(cross.delta, 0.2)].groupby("region")["xi"].sum()
    for region in conditions.REGIONS:
        assert J[region] + Xi[region] == pytest.approx(expected[f"m_{region}"], rel=1e-9)


def test_the_figures_are_drawn_from_the_tables(written, tmp_path):
    assert (
        cli.main(
            [
                "figures",
                "--channels",
                str(written / "channels.parquet"),
                "--cross-terms",
                str(written / "cross.parquet"),
                "--conditions",
                str(written / "conditions.parquet"),
                "--figures",
                "channel_energies",
                "--delta",
                "0.2",
                "--out-dir",
                str(tmp_path),
                "--pages",
                "conditions",
                "--pages-dir",
                str(tmp_path),
            ]
        )
        == 0
    )
    # the condition tests are a table (the summary page), the channel energies a figure
    assert (tmp_path / "channel_energies.png").stat().st_size > 10_000
    assert "<table" in (tmp_path / "conditions.html").read_text()


def test_the_command_refuses_a_run_without_residual_path(trained_run, tmp_path, capsys):
    spec, checkpoints = trained_run
    spec = {**spec, "model": {**spec["model"], "residual": False}}
    assert run_command(spec, checkpoints, tmp_path) == 2
    assert "residual" in capsys.readouterr().err
    assert not (tmp_path / "channels.parquet").exists()


def test_a_planted_violation_is_written_flagged_logged_and_contradicts_the_evidence_row(
    trained_run, tmp_path, monkeypatch, caplog
):
    """A (deliberately) broken test: the table is still written, the violating row flagged and logged
    loudly, and the evidence row of the paper's sufficient conditions reads "contradicted"."""
    spec, checkpoints = trained_run
    original = conditions.Regional.tests

    def broken(self):
        return [{**row, "holds": True} if row["test"] == "sufficient_universal" else row for row in original(self)] + [
            {
                "delta": self.delta,
                "test": "cone_primacy",
                "holds": True,
                "conclusion_holds": False,
                "lhs": 1.0,
                "rhs": 0.0,
            }
        ]

    monkeypatch.setattr(conditions.Regional, "tests", broken)
    with caplog.at_level(logging.ERROR):
        assert run_command(spec, checkpoints[:1], tmp_path) == 0
    assert "SOUNDNESS VIOLATION" in caplog.text and "cone_primacy" in caplog.text
    table = pd.read_parquet(tmp_path / "conditions.parquet")
    planted = table[table["violation"]]
    assert len(planted) >= len(SETTINGS["deltas"]) and "cone_primacy" in set(planted["test"])

    inputs = Inputs(variants={name: {} for name in table["variant"].unique()}, model={}, conditions=table)
    row = evidence_table(inputs, EV, [CLAIMS_BY_NAME["sufficient_conditions_sound"]]).iloc[0]
    assert row["verdict"] == "contradicted" and row["estimate"] == len(planted)


def test_profiles_of_a_model_match_its_channel_split_average():
    model = random_model("parallel", 7, 0.3).double()
    from lostmid.core import task

    tokens, targets, _ = task.stratified_eval_set(10, 1, 0)
    profiles, _ = channel_profiles(model, tokens, targets, batch_size=4, power_iterations=0, seed=0)
    assert np.isnan(profiles.gronwall)
    regional = Regional(profiles, 0.2)
    regional.check_identity()
    assert "residual_persistence" not in {r["test"] for r in regional.tests()}  # skipped without operator norms


def test_a_conditions_table_written_before_the_violation_column_is_still_read(written, tmp_path):
    from lostmid.errors import TableError
    from lostmid.tables import keys

    old = pd.read_parquet(written / "conditions.parquet").drop(columns=["tolerance", "violation"])
    old.to_parquet(tmp_path / "old.parquet")
    assert list(keys.read_table(tmp_path / "old.parquet", "conditions").columns) == list(old.columns)
    old.drop(columns=["lhs"]).to_parquet(tmp_path / "broken.parquet")
    with pytest.raises(TableError, match=r"lacks the column\(s\) \['lhs'\]"):
        keys.read_table(tmp_path / "broken.parquet", "conditions")
