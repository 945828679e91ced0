"""Algorithms 1-3 as training objectives: their gradients, weights and estimators, their
checkpointed state, the remedies table, and clear errors for bad remedy parameters."""

import copy

import numpy as np
import pandas as pd
import pytest
import torch

from lostmid import config as cfg
from lostmid.core import task
from lostmid.core.model import FlagTransformer, ModelConfig
from lostmid.errors import ConfigError
from lostmid.objectives import algorithm1_balance, algorithm2_reweight, algorithm3_observability
from lostmid.objectives.registry import make_objective
from lostmid.tables import remedies as remedy_tables
from lostmid.training.checkpoint import TrainingState
from lostmid.training.train import train_steps

from conftest import SCHEMA, model_config, tiny_spec


def with_remedy(spec, **remedy):
    return {**copy.deepcopy(spec), "remedy": remedy}


# ----------------------------------------------------------------------------- Algorithm 1


def test_balance_gradient_matches_a_finite_difference_of_the_penalized_loss():
    """The second-order gradient of loss + beta/2 E_inf equals d/dt of it along a direction."""
    torch.manual_seed(0)
    spec = with_remedy(tiny_spec(), kind="balance", beta=2.0, target="late")
    model = FlagTransformer(ModelConfig(**spec["model"])).double()
    objective = make_objective(spec)
    tokens, targets, flags = task.sample_batch(12, 8, task.flag_law(8), torch.Generator().manual_seed(1))
    params = [p for p in model.parameters()]
    direction = [torch.randn_like(p) for p in params]

    total, loss, e_inf, _ = objective.penalized(model, tokens, targets)
    assert e_inf.item() > 0.01  # the penalty really contributes
    grads = torch.autograd.grad(total, params, retain_graph=True)
    analytic = sum((g * v).sum() for g, v in zip(grads, direction)).item()
    plain = torch.autograd.grad(loss, params, allow_unused=True)
    plain_dir = sum((g * v).sum() for g, v in zip(plain, direction) if g is not None).item()

    def value(t):
        with torch.no_grad():
            for p, v in zip(params, direction):
                p.add_(t * v)
        out = objective.penalized(model, tokens, targets)[0].item()
        with torch.no_grad():
            for p, v in zip(params, direction):
                p.sub_(t * v)
        return out

    h = 1e-5
    numeric = (value(h) - value(-h)) / (2 * h)
    assert analytic == pytest.approx(numeric, rel=1e-5, abs=1e-8)
    # and it differs from the plain task-loss gradient: the penalty is differentiated through
    assert abs(plain_dir - analytic) > 1e-4


def test_target_densities_have_mean_one():
    for name in algorithm1_balance.TARGETS:
        assert algorithm1_balance.target_density(10, name).mean().item() == pytest.approx(1.0)
    late = algorithm1_balance.target_density(10, "late")
    assert late[-1] > late[0]


# ----------------------------------------------------------------------------- Algorithm 2


def test_reweighting_weights_average_to_one_under_pi_and_favour_risky_positions():
    law = task.flag_law(8, "early")  # a non-uniform pi
    risk = torch.tensor([0.1, 0.1, 0.2, 0.3, 0.5, 0.8, 1.2])  # positions 2..8, risk grows late
    for eta in (0.0, 0.5, 1.0, 3.0):
        w = algorithm2_reweight.reweighting_weights(risk, law, eta)
        assert (law.double() * w).sum().item() == pytest.approx(1.0)
    w = algorithm2_reweight.reweighting_weights(risk, law, 1.0)
    tau = law.double() * w
    assert tau[-1] > law[-1] and tau[0] < law[0]  # mass moved toward the high-risk end
    uniform = algorithm2_reweight.reweighting_weights(risk, task.flag_law(8), 0.0)
    assert torch.allclose(uniform, torch.ones(7, dtype=torch.float64))  # eta = 0: no reweighting


def test_reweight_objective_updates_every_k_steps_from_its_own_generator():
    spec = with_remedy(tiny_spec(), kind="reweight", eta=1.0, every=3, probe_per_position=4)
    state = TrainingState.initial(spec, "cpu")
    data_before = state.data_generator.get_state()
    objective = state.objective
    objective(state.model, *task.sample_batch(4, 8, task.flag_law(8), torch.Generator().manual_seed(0)), step=1)
    w1 = objective.weights.clone()
    assert (task.flag_law(8).double() * w1).sum().item() == pytest.approx(1.0)
    assert not torch.allclose(w1, torch.ones_like(w1))
    objective(state.model, *task.sample_batch(4, 8, task.flag_law(8), torch.Generator().manual_seed(0)), step=2)
    assert torch.equal(objective.weights, w1)  # no update between refreshes
    assert torch.equal(state.data_generator.get_state(), data_before)  # training stream untouched


# ----------------------------------------------------------------------------- Algorithm 3


def test_hutchinson_trace_estimate_is_unbiased_for_the_exact_gramian_trace():
    torch.manual_seed(0)
    model = FlagTransformer(model_config(seq_len=6, depth=1, d_model=4, heads=2, mlp_ratio=2)).double()
    tokens = torch.randint(0, 2, (1, 6))
    x0 = model.embed(tokens).detach()
    exact = algorithm3_observability.exact_traces(model, x0)  # (L,)
    n = 3000
    positions = torch.arange(6).repeat(n)
    probes = torch.randn(6 * n, 4, generator=torch.Generator().manual_seed(1), dtype=x0.dtype)
    with torch.no_grad():
        samples = algorithm3_observability.observability_traces(
            model, x0.expand(6 * n, -1, -1), positions, probes
        ).view(n, 6)
    estimate, se = samples.mean(0), samples.std(0) / n**0.5
    assert (exact > 0).all()
    assert ((estimate - exact).abs() < 4 * se + 1e-6).all(), (estimate, exact, se)
    assert torch.allclose(estimate, exact, rtol=0.1)


def test_stratified_monitored_positions_give_an_unbiased_total_and_the_exact_penalty_when_complete():
    L, size = 10, 3  # strata of sizes 3, 3, 4: unequal inclusion probabilities
    traces = torch.rand(L, dtype=torch.float64) + 0.1
    generator = torch.Generator().manual_seed(0)
    totals = []
    for _ in range(4000):
        positions, q = algorithm3_observability.sample_monitored(L, size, generator)
        assert len(set(positions.tolist())) == size
        totals.append((traces[positions] / q).sum().item())
    assert np.mean(totals) == pytest.approx(traces.sum().item(), rel=0.02)
    # every position monitored (q = 1): the exact imbalance (1/L) sum (tau - 1)^2
    tau = L * traces / traces.sum()
    exact = ((tau - 1) ** 2).mean()
    assert algorithm3_observability.trace_imbalance(
        traces, torch.ones(L, dtype=torch.float64), L
    ).item() == pytest.approx(exact.item())


def test_observability_objective_penalizes_and_backpropagates():
    spec = with_remedy(tiny_spec(), kind="observability", lam=1.0, probes=2, monitored=0.5)
    state = TrainingState.initial(spec, "cpu")
    tokens, targets, flags = task.sample_batch(8, 8, task.flag_law(8), torch.Generator().manual_seed(0))
    loss, logits = state.objective(state.model, tokens, targets, flags, step=1)
    plain = state.model.loss(state.model(tokens), targets)
    assert loss.item() > plain.item()
    loss.backward()
    assert state.model.steps[0].attn.qkv.weight.grad.abs().sum() > 0


# ----------------------------------------------------------------------------- chained == uninterrupted


@pytest.mark.parametrize(
    "remedy",
    [
        {"kind": "reweight", "eta": 1.0, "every": 2, "probe_per_position": 2},
        {"kind": "observability", "lam": 0.5, "probes": 1, "monitored": 3},
        {"kind": "balance", "beta": 0.5, "target": "uniform", "sequences": 4},
    ],
    ids=lambda r: r["kind"],
)
def test_chained_segments_equal_one_run_for_stateful_remedies(remedy, tmp_path):
    spec = with_remedy(tiny_spec(), **remedy)
    whole = TrainingState.initial(spec, "cpu")
    whole_log = train_steps(whole, 5, "cpu", progress=False)
    TrainingState.initial(spec, "cpu").save(tmp_path / "step0.pt")
    losses = []
    for start, end in [(0, 3), (3, 5)]:
        state = TrainingState.load(tmp_path / f"step{start}.pt", spec, "cpu")
        losses += list(train_steps(state, end - start, "cpu", progress=False)["loss"])
        state.save(tmp_path / f"step{end}.pt")
    chained = TrainingState.load(tmp_path / "step5.pt", spec, "cpu")
    assert losses == list(whole_log["loss"])
    for key, value in whole.model.state_dict().items():
        assert torch.equal(value, chained.model.state_dict()[key]), key
    for key, value in whole.objective.state_dict().items():
        assert torch.equal(value, chained.objective.state_dict()[key]), key


# ----------------------------------------------------------------------------- config errors


@pytest.mark.parametrize(
    "remedy, key",
    [
        ({"kind": "balance", "beta": -0.1}, "beta"),
        ({"kind": "reweight", "eta": -1.0}, "eta"),
        ({"kind": "observability", "lam": -2.0}, "lam"),
        ({"kind": "observability", "lam": 1.0, "probes": 0}, "probes"),
        ({"kind": "observability", "lam": 1.0, "monitored": 0}, "monitored"),
        ({"kind": "observability", "lam": 1.0, "monitored": 0.0}, "monitored"),
        ({"kind": "balance", "beta": 1.0, "target": "middle"}, "target"),
        ({"kind": "balance", "beta": 1.0, "eta": 1.0}, "eta"),  # a parameter of another kind
        ({"kind": "reweight", "eta": 1.0, "every": 0}, "every"),
        ({"kind": "balance"}, "beta"),  # the strength has no default
    ],
)
def test_bad_remedy_parameters_are_config_errors_naming_the_key(smoke_config, remedy, key):
    with pytest.raises(ConfigError, match=rf"^config key variants\.baseline\.remedy\.{key}\b"):
        make_objective(with_remedy(tiny_spec(), **remedy))  # library use: the objective builds the settings
    smoke_config["variants"]["bad"] = {"remedy": remedy}
    with pytest.raises(ConfigError, match=rf"^config key variants\.bad\.remedy\.{key}\b"):
        cfg.validate(smoke_config, SCHEMA)  # the Snakefile, before any job


def test_the_shipped_remedy_variants_are_valid_and_build_objectives(smoke_config):
    import yaml

    from conftest import REPO

    for name in ("config/config.yaml", "tests/smoke.yaml"):
        config = yaml.safe_load((REPO / name).read_text())
        cfg.validate(config, SCHEMA)
        kinds = set()
        for variant in config["variants"]:
            spec = cfg.run_spec(config, cfg.Run(variant, 8, 1, 0))
            make_objective(spec)
            kinds.add(spec["remedy"]["kind"])
        assert {"none", "bias", "balance", "reweight", "observability"} <= kinds, name


# ----------------------------------------------------------------------------- the remedies table


def test_remedy_table_joins_metrics_accuracy_and_overhead_against_the_baseline():
    keys = dict(L=8, depth=1, seed=0)
    metrics = pd.DataFrame(
        [
            {
                "variant": v,
                **keys,
                "step": s,
                "delta": d,
                "Delta": 0.1,
                "SC": 0.1,
                "LIM": 0.2,
                "E_inf": 1.0 + s,
                "Z": 3.0,
            }
            for v in ("baseline", "balance")
            for s in (0, 10)
            for d in (0.2, 0.3)
        ]
    )
    failure = pd.DataFrame(
        [
            {"variant": v, **keys, "step": s, "flag_pos": f, "n": 4, "failures": 2 if s == 0 else 0}
            for v in ("baseline", "balance")
            for s in (0, 10)
            for f in range(2, 9)
        ]
    )
    train = pd.DataFrame(
        [
            {
                "variant": v,
                **keys,
                "step": s,
                "loss": 0.1,
                "accuracy": min(1.0, s / 5),
                "seconds_per_step": 0.01 if v == "baseline" else 0.03,
            }
            for v in ("baseline", "balance")
            for s in range(1, 11)
        ]
    )
    variants = {"baseline": {}, "balance": {"remedy": {"kind": "balance", "beta": 0.5}}}
    settings = cfg.settings_from_section(remedy_tables.RemedyTableSettings, {"window": 2}, "remedies")
    table = remedy_tables.remedy_table(
        metrics, failure, train, pd.DataFrame(), {k: (v or {}).get("remedy") for k, v in variants.items()}, settings
    )
    assert len(table) == 4 and list(table.columns[:5]) == ["variant", "L", "depth", "seed", "step"]
    balance = table[table.variant == "balance"].set_index("step")
    assert balance.loc[10, "accuracy"] == 1.0 and balance.loc[0, "accuracy"] == 0.5
    assert balance.loc[0, "E_inf"] == 1.0 and balance.loc[0, "strength"] == 0.5
    assert balance.loc[0, "time_ratio"] == pytest.approx(3.0)
    assert balance.loc[0, "steps_to_99"] == 6  # rolling mean of 2 steps reaches 0.99 at step 6
    summary = remedy_tables.seed_summary(table)
    assert {"mean", "ci_low", "ci_high", "n_seeds"} <= set(summary.columns)
