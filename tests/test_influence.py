"""The influence stage: one backward pass, the regional metrics, the structural baseline, the tables."""

import json

import numpy as np
import pandas as pd
import pytest
import torch
from torch.func import jacrev

from lostmid import config as cfg
from lostmid.analysis import influence, metrics, structural
from lostmid.analysis.settings import InfluenceSettings, InitSweepSettings, StructuralSettings
from lostmid.cli import main as cli
from lostmid.core import adjoint, density, task
from lostmid.core.model import FlagTransformer, ModelConfig
from lostmid.errors import ConfigError
from lostmid.training import checkpoint

from conftest import SCHEMA, model_config, tiny_spec

# --- one backward pass equals per-position Jacobians ---------------------------------------------


def _states(model, tokens):
    """X_0 .. X_M of a forward pass (explicit attention)."""
    x = model.embed(tokens)
    states = [x]
    for k in range(len(model.steps)):
        x = model.advance(k, x, model.logit_bias(), explicit=True)
        states.append(x)
    return states


@pytest.mark.parametrize("block", ["sequential", "parallel"])
def test_energy_from_one_backward_pass_equals_per_position_jacobians_at_every_step(block):
    torch.manual_seed(0)
    L = 5
    model = FlagTransformer(model_config(seq_len=L, depth=1, d_model=8, heads=2, mlp_ratio=2, block=block)).double()
    tokens = torch.randint(0, 3, (2, L))
    targets = torch.tensor([0, 1])

    measured = influence.energies(model, tokens, targets)  # (M'+1, L) from one backward pass

    assert measured.shape == (model.config.n_steps + 1, L)
    expected = torch.zeros_like(measured)
    for b in range(tokens.shape[0]):
        states = [s.detach() for s in _states(model, tokens[b : b + 1])]
        for k, state in enumerate(states):
            for i in range(L):  # the slow reference: one Jacobian per position (explicit attention: jacrev vmaps)

                def loss_of_row(row, k=k, i=i, state=state):
                    x = torch.cat([state[:, :i], row[None, None], state[:, i + 1 :]], dim=1)
                    for step in range(k, len(model.steps)):
                        x = model.advance(step, x, model.logit_bias(), explicit=True)
                    return model.loss(model.read_out(x), targets[b : b + 1])

                expected[k, i] += jacrev(loss_of_row)(state[0, i]).square().sum() / tokens.shape[0]
    torch.testing.assert_close(measured, expected)


def test_chunking_the_batch_changes_nothing():
    torch.manual_seed(1)
    model = FlagTransformer(model_config(seq_len=6, depth=1, d_model=8, heads=2, mlp_ratio=2)).double()
    tokens, targets, _ = task.stratified_eval_set(6, 3, seed=5)
    torch.testing.assert_close(
        influence.energies(model, tokens, targets, chunk=4), influence.energies(model, tokens, targets)
    )


# --- regional metrics ----------------------------------------------------------------------------


def test_regional_metrics_reproduce_the_paper_row():
    # L = 10, delta = 0.2: left = positions 1-2 (p < 0.2), middle = 3-8, right = 9-10 (p >= 0.8).
    profile = np.array([3.2269] * 2 + [0.1417] * 6 + [1.3479] * 2)
    out = metrics.regional_metrics(profile, delta=0.2)
    assert (
        out["m_left"] == pytest.approx(3.2269)
        and out["m_middle"] == pytest.approx(0.1417)
        and out["m_right"] == pytest.approx(1.3479)
    )
    assert out["Delta"] == pytest.approx(1.2062, abs=5e-5)
    assert out["SC"] == pytest.approx(0.8097, abs=5e-5)
    assert out["LIM"] == pytest.approx(0.8949, abs=5e-5)
    assert set(out) == {"m_left", "m_middle", "m_right", "Delta", "SC", "LIM", "E_inf"}


def test_a_flat_profile_is_balanced_and_a_recency_ramp_is_not_lost_in_the_middle():
    flat = metrics.regional_metrics(np.ones(20))
    assert flat["Delta"] == 0 and flat["SC"] == 0 and flat["E_inf"] == 0 and abs(flat["LIM"]) < 1e-7

    ramp = metrics.normalize(np.arange(1.0, 21.0))  # influence grows towards the end: no primacy
    out = metrics.regional_metrics(ramp)
    assert out["Delta"] < 0 and out["LIM"] < 0  # the weaker edge (left) is below the middle

    u = metrics.normalize(np.array([4.0, 3, 1, 1, 1, 1, 1, 1, 2, 5]))
    out = metrics.regional_metrics(u, delta=0.2)
    expected_edge = min(u[:2].mean(), u[8:].mean())
    assert out["Delta"] == pytest.approx(expected_edge - u[2:8].mean())
    assert out["LIM"] > 0 and 0 < out["SC"] < 1
    assert out["E_inf"] == pytest.approx(np.mean((u - 1) ** 2))


def test_E_inf_against_a_target_density():
    m = metrics.normalize(np.array([3.0, 1, 1, 1, 1, 1, 1, 1, 1, 3]))
    assert metrics.regional_metrics(m, target=m)["E_inf"] == 0
    with pytest.raises(ValueError, match="shape"):
        metrics.regional_metrics(m, target=np.ones(4))


def test_the_density_and_E_inf_are_one_formula_for_numpy_and_torch():
    # lostmid.core.density serves the reported metrics (numpy) and the differentiable penalties
    # (torch) alike; each input keeps its own library's arithmetic (their sums round differently).
    energy = np.random.default_rng(0).random((3, 17))
    nu = 2 * density.positions(17)  # the 'late' target of Algorithm 1
    m_numpy, m_torch = density.density(energy), density.density(torch.from_numpy(energy))
    np.testing.assert_allclose(m_numpy.mean(-1), 1)
    np.testing.assert_allclose(m_numpy, m_torch.numpy(), rtol=1e-14)
    e_numpy, e_torch = density.imbalance(m_numpy, nu), density.imbalance(m_torch, torch.from_numpy(nu))
    np.testing.assert_allclose(e_numpy, e_torch.numpy(), rtol=1e-14)
    assert metrics.influence_imbalance(m_numpy[0], nu) == e_numpy[0]  # the reported metric is the same function
    # The stabilized normalizer of the algebraic Algorithm 1: a flat profile keeps E_inf = (eps / (mean I + eps))^2.
    assert density.imbalance(density.density(np.full(5, 0.5), eps=0.5)) == pytest.approx(0.25)


def test_region_boundaries_follow_p_i():
    # L = 10, delta = 0.1: p = 0.05 (left), 0.15 .. 0.85 (middle), 0.95 (right, p >= 0.9).
    masks = metrics.region_masks(10, 0.1)
    assert masks["left"].nonzero()[0].tolist() == [0] and masks["right"].nonzero()[0].tolist() == [9]
    with pytest.raises(ValueError, match="empty"):
        metrics.region_masks(4, 0.1)  # p = 0.125 is the first position: no left region


@pytest.mark.parametrize("delta", [0.0, 0.5, -0.1, 0.7])
def test_delta_outside_the_open_interval_is_a_clear_error(delta, smoke_config):
    with pytest.raises(ValueError, match=r"delta must lie in \(0, 0.5\)"):
        metrics.regional_metrics(np.ones(10), delta=delta)
    with pytest.raises(ConfigError, match=r"config key influence\.deltas\[1\]"):
        cfg.settings_from_section(InfluenceSettings, {"deltas": [0.2, delta]}, "influence")
    smoke_config["influence"]["deltas"] = [0.2, delta]
    with pytest.raises(ConfigError, match=r"config key influence\.deltas\[1\]"):
        cfg.validate(smoke_config, SCHEMA)


# --- the structural baseline ---------------------------------------------------------------------


@pytest.mark.parametrize("residual", [True, False])
@pytest.mark.parametrize("L", [5, 12])
@pytest.mark.parametrize("depth", [1, 3, 6])
def test_structural_baseline_matches_its_closed_form(residual, L, depth):
    model = structural.structural_model(L, depth, residual, epsilon=0.5).double()
    tokens, targets, _ = task.stratified_eval_set(L, 1, seed=3)

    measured = influence.profile_table(influence.energies(model, tokens, targets))

    for layer in range(depth + 1):
        closed = structural.structural_density(L, depth, residual, epsilon=0.5, layer=layer)
        np.testing.assert_allclose(measured[measured.layer == layer].density, closed, rtol=1e-10, atol=1e-12)


def test_the_structural_model_is_the_linear_recursion_N_X():
    L = 6
    x = torch.randn(2, L, 4, dtype=torch.float64)
    C = torch.from_numpy(metrics.cesaro_matrix(L))
    assert torch.allclose(C.sum(1), torch.ones(L, dtype=torch.float64))  # rows average
    for residual, N in [(True, torch.eye(L, dtype=torch.float64) + 0.5 * C), (False, C)]:
        model = structural.structural_model(L, 2, residual, epsilon=0.5).double()
        torch.testing.assert_close(model.advance(0, x, None), N @ x)


def test_structural_table_overlays_measurement_and_closed_form():
    table = structural.structural_baseline(
        cfg.settings_from_section(StructuralSettings, {"L": [6], "depths": [1, 2]}, "influence.structural")
    )
    assert list(table.columns) == ["residual", "L", "depth", "layer", "position", "p", "measured", "closed_form"]
    np.testing.assert_allclose(table.measured, table.closed_form, rtol=1e-10, atol=1e-12)
    with pytest.raises(ConfigError, match=r"^config key influence\.structural\.depth is unknown$"):
        cfg.settings_from_section(StructuralSettings, {"depth": [1]}, "influence.structural")
    with pytest.raises(
        ConfigError, match=r"influence\.structural\.d_model=4 is not divisible by influence\.structural\.heads=3"
    ):
        cfg.settings_from_section(
            StructuralSettings, {"heads": 3}, "influence.structural"
        )  # the block's own rule (check)


# --- the initialization sweep of the blog post ---------------------------------------------------


def test_init_sweep_first_token_dominates_without_residual_and_a_u_shape_forms_with_it():
    settings = cfg.settings_from_section(
        InitSweepSettings, {"L": 16, "depths": [1, 8], "seeds": [0, 1], "batch_per_position": 2}, "influence.init_sweep"
    )
    model = {"d_model": 32, "heads": 4, "mlp_ratio": 2, "block": "sequential", "epsilon": 1.0, "readout": "last"}
    sweep = influence.init_sweep(model, settings)
    assert list(sweep.columns) == ["residual", "depth", "seed", "position", "p", "energy", "density", "output_jacobian"]
    m = sweep.groupby(["residual", "depth", "position"]).density.mean()

    plain = m.loc[False]
    ratio = {depth: plain.loc[depth, 1] / plain.loc[depth, 16] for depth in (1, 8)}
    assert ratio[8] > 1e3 * ratio[1] and ratio[8] > 1e3  # orders of magnitude, growing with depth

    deep = m.loc[True, 8]
    assert deep.idxmax() == 16  # the last token carries the anchor
    assert deep.loc[1] > 3 * deep.loc[6:11].mean()  # early tokens rise above the middle: a U


def _baselines_argv(tmp_path, model: dict) -> list[str]:
    """The command on the tiny spec's model block with ``model`` changed (the rule passes the config's whole block)."""
    return [
        "influence-baselines",
        "--device",
        "cpu",
        "--model",
        json.dumps({**tiny_spec()["model"], **model}),
        "--init-sweep",
        json.dumps({"L": 4, "depths": [1], "seeds": [0], "batch_per_position": 1}),
        "--structural",
        json.dumps({"L": [4], "depths": [1]}),
        "--sweep-out",
        str(tmp_path / "sweep.parquet"),
        "--structural-out",
        str(tmp_path / "structural.parquet"),
    ]


def test_influence_baselines_calls_a_bad_model_block_a_config_error_and_nothing_else(tmp_path, capsys, monkeypatch):
    assert cli.main(_baselines_argv(tmp_path, {"d_model": 8, "heads": 3})) == 2
    assert (
        capsys.readouterr().err.strip().splitlines()[-1]
        == "lostmid influence-baselines: error: config key model: model.d_model=8 is not divisible by model.heads=3"
    )

    def failing_sweep(*args, **kwargs):
        raise ValueError("a failure of the computation")

    monkeypatch.setattr(influence, "init_sweep", failing_sweep)
    with pytest.raises(ValueError, match="a failure of the computation"):  # not relabelled as a config error
        cli.main(_baselines_argv(tmp_path, {"d_model": 8, "heads": 2}))


# --- the command and its tables ------------------------------------------------------------------


EVALUATION = json.dumps({"per_position": 2, "seed": 1000})


def test_the_evaluate_command_writes_tidy_influence_tables_with_the_documented_columns(tmp_path):
    spec = tiny_spec()
    path = tmp_path / "step0.pt"
    checkpoint.TrainingState.initial(spec, "cpu").save(path)
    settings = {"batch_per_position": 2, "seed": 2000, "deltas": [0.1, 0.2]}
    profiles, table, answers = tmp_path / "influence.parquet", tmp_path / "metrics.parquet", tmp_path / "answer.parquet"
    argv = [
        "evaluate",
        "--device",
        "cpu",
        "--spec",
        json.dumps(spec),
        "--checkpoints",
        str(path),
        "--evaluation",
        EVALUATION,
        "--influence",
        json.dumps(settings),
        "--failure",
        str(tmp_path / "failure.parquet"),
        "--profiles",
        str(profiles),
        "--metrics",
        str(table),
        "--answer-influence",
        str(answers),
    ]
    assert cli.main(argv) == 0

    prof, met = pd.read_parquet(profiles), pd.read_parquet(table)
    keys = ["variant", "L", "depth", "seed", "step"]
    assert list(prof.columns) == keys + ["layer", "position", "p", "energy", "density"]
    assert list(met.columns) == keys + ["delta", "m_left", "m_middle", "m_right", "Delta", "SC", "LIM", "E_inf", "Z"]
    n_layers = ModelConfig(**spec["model"]).n_steps + 1
    assert sorted(prof.layer.unique()) == list(range(n_layers)) and len(prof) == n_layers * spec["L"]
    assert np.allclose(prof.groupby("layer").density.mean(), 1.0)
    assert met.delta.tolist() == [0.1, 0.2]
    assert met.Z.iloc[0] == pytest.approx(prof[prof.layer == 0].energy.sum())
    input_density = prof[prof.layer == 0].density.to_numpy()
    assert met.LIM.iloc[1] == pytest.approx(metrics.regional_metrics(input_density, 0.2)["LIM"])
    # The conditioned influence: one row per flag position f = 2..L, at the answer's position f - 1,
    # on the averaged density's scale (the same divisor, mean_j I^(0)(j)).
    ans = pd.read_parquet(answers)
    assert list(ans.columns) == keys + ["flag_pos", "position", "sequences", "energy", "density"]
    assert ans.flag_pos.tolist() == list(range(2, spec["L"] + 1)) and (ans.position == ans.flag_pos - 1).all()
    assert (ans.sequences == 2).all()
    input_energy = prof[prof.layer == 0].energy
    assert np.allclose(ans.density, ans.energy / input_energy.mean())


def test_the_conditioned_influence_is_the_answer_energy_of_the_sequences_that_ask_for_it():
    """E[||P_0(f-1)||^2 | flag at f], computed per sequence from the input adjoint, equals what the
    same pass as the averaged energies gives (in chunks too), and the averaged energies are unchanged."""
    torch.manual_seed(0)
    L = 6
    model = FlagTransformer(model_config(seq_len=L, depth=2, d_model=8, heads=2)).double()
    tokens, targets, flags = task.stratified_eval_set(L, 3, 11)
    per_sequence = adjoint.input_adjoint(model, tokens, targets).detach().square().sum(-1)  # (N, L)
    expected = torch.stack([per_sequence[flags == f, f - 2].mean() for f in range(2, L + 1)]).double()

    for chunk in (1024, 4):
        energy, conditioned, sequences = influence.answer_energies(model, tokens, targets, chunk)
        torch.testing.assert_close(conditioned, expected)
        assert sequences.tolist() == [3] * (L - 1)
        torch.testing.assert_close(energy, influence.energies(model, tokens, targets, chunk))
    # Conditioning matters: the answer's energy where it is asked for is not the position's average.
    assert not torch.allclose(conditioned, energy[0, : L - 1])


def test_a_batch_without_a_flag_position_has_no_conditioned_influence():
    L = 5
    model = FlagTransformer(model_config(seq_len=L, depth=1, d_model=8, heads=2)).double()
    tokens, targets, flags = task.stratified_eval_set(L, 2, 0)
    keep = flags != 3
    with pytest.raises(ValueError, match=r"no sequence with its flag at positions \[3\]"):
        influence.answer_energies(model, tokens[keep], targets[keep])


def test_a_delta_that_empties_a_region_at_this_L_exits_with_a_config_error(tmp_path, capsys):
    spec = tiny_spec(seq_len=4)
    path = tmp_path / "step0.pt"
    checkpoint.TrainingState.initial(spec, "cpu").save(path)
    argv = [
        "evaluate",
        "--device",
        "cpu",
        "--spec",
        json.dumps(spec),
        "--checkpoints",
        str(path),
        "--evaluation",
        EVALUATION,
        "--influence",
        json.dumps({"deltas": [0.1]}),
        "--failure",
        str(tmp_path / "f.parquet"),
        "--profiles",
        str(tmp_path / "a.parquet"),
        "--metrics",
        str(tmp_path / "b.parquet"),
        "--answer-influence",
        str(tmp_path / "c.parquet"),
    ]
    assert cli.main(argv) == 2
    assert "influence.deltas" in capsys.readouterr().err
