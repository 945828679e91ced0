"""The algebraic controlled simulations (paper section 4, docs/theory.md §7), as documentation.

The model: free positionwise gains u on a linear causal model with Cesàro mixing; three
remedies; and the Hutchinson probe study of Algorithm 3's trace estimate.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import yaml

from lostmid.algebraic import linear_model, remedies, settings
from lostmid.algebraic import probes as probe_study_module
from lostmid.config import settings_from_section
from lostmid.errors import ConfigError

from conftest import REPO

torch.set_num_threads(1)


def algebraic(**values) -> settings.AlgebraicSettings:
    """The settings of an ``algebraic`` block that sets ``values``; the other keys take the schema's defaults."""
    return settings_from_section(settings.AlgebraicSettings, values, "algebraic")


S = algebraic()  # the defaults, which are also config/config.yaml's algebraic block


@pytest.fixture(scope="module")
def table():
    tab, profiles = remedies.remedy_table(S)
    return tab.set_index("method"), profiles


# ---- the model ----------------------------------------------------------------------------


def test_cesaro_matrix_averages_the_prefix():
    c = linear_model.cesaro_matrix(4).numpy()
    expected = np.array([[1, 0, 0, 0], [1 / 2, 1 / 2, 0, 0], [1 / 3, 1 / 3, 1 / 3, 0], [1 / 4] * 4])
    np.testing.assert_allclose(c, expected)
    # row-stochastic and causal: token i reads only tokens j <= i
    np.testing.assert_allclose(c.sum(1), 1)
    assert np.all(np.triu(c, 1) == 0)


def test_propagator_mixes_identity_and_cesaro():
    s = algebraic(length=6, step=0.25, mixing=2.0)  # eps * kappa = 0.5
    b = linear_model.propagator(s).numpy()
    np.testing.assert_allclose(b, 0.5 * np.eye(6) + 0.5 * linear_model.cesaro_matrix(6).numpy())
    np.testing.assert_allclose(b.sum(1), 1)  # still a causal average


def test_input_adjoint_is_backward_recursion():
    s = algebraic(length=8, depth=3, features=2)
    u = torch.linspace(-0.5, 0.5, 8, dtype=linear_model.DTYPE)
    b = linear_model.propagator(s)
    p_t = linear_model.terminal_covector(s)
    expected = torch.exp(u)[:, None] * (torch.linalg.matrix_power(b, 3).T @ p_t)
    torch.testing.assert_close(linear_model.input_adjoint(s, u), expected)
    # the covector: final-token part 1 - 0.15, supervised part 0.15 spread uniformly
    a = p_t[:, 0] / p_t[0, 0] * (0.15 / 8)
    torch.testing.assert_close(a.sum(), torch.tensor(1.0, dtype=linear_model.DTYPE))


def test_gramian_matches_direct_kronecker_formula():
    """G_i(u) = e^{2u_i} sum_k eps E_i^T (B^k)^T C_out^T C_out B^k E_i with explicit (Ld x Ld) matrices."""
    s = algebraic(length=6, depth=4, step=0.2, mixing=1.5, features=3, obs_decay=0.7)
    L, d = s.length, s.features
    u = torch.tensor([0.3, -0.2, 0.0, 0.5, -0.4, 0.1], dtype=linear_model.DTYPE)
    big_b = torch.kron(
        linear_model.propagator(s), torch.eye(d, dtype=linear_model.DTYPE)
    )  # acts on vec(X), X row-major (L, d)
    c_out = torch.kron(
        torch.nn.functional.one_hot(torch.tensor(L - 1), L).to(linear_model.DTYPE)[None, :], linear_model.feature_map(s)
    )
    got = linear_model.gramians(s, u)
    for i in range(L):
        e_i = torch.zeros(L * d, d, dtype=linear_model.DTYPE)
        e_i[i * d : (i + 1) * d] = torch.eye(d, dtype=linear_model.DTYPE)
        direct = sum(
            s.step
            * e_i.T
            @ torch.linalg.matrix_power(big_b, k).T
            @ c_out.T
            @ c_out
            @ torch.linalg.matrix_power(big_b, k)
            @ e_i
            for k in range(s.depth)
        )
        torch.testing.assert_close(got[i], torch.exp(2 * u[i]) * direct)
    torch.testing.assert_close(linear_model.gramian_traces(s, u), torch.diagonal(got, dim1=-2, dim2=-1).sum(-1))


# ---- the remedy table: the paper's qualitative findings ------------------------------------


def test_table_has_the_required_rows_and_columns(table):
    tab, profiles = table
    assert list(tab.index) == ["baseline", "alg1", "alg2", "alg3"]
    assert set(remedies.TABLE_COLUMNS[1:]) <= set(tab.columns)
    assert tab["converged"].all(), tab[["iterations", "grad_max"]]
    # the regional columns are the metrics module's, recomputed from the stored profile
    from lostmid.analysis.metrics import regional_metrics

    base = regional_metrics(profiles[profiles.method == "baseline"].influence_density.to_numpy(), 0.2)
    assert tab.loc["baseline", "LIM"] == pytest.approx(base["LIM"])


def test_baseline_is_lost_in_the_middle(table):
    base = table[0].loc["baseline"]
    assert base.left > base.right > base.middle
    assert base.LIM > 0.5 and base.Delta > 0


def test_alg1_flattens_influence_while_Z_grows(table):
    tab = table[0]
    assert tab.loc["alg1", "E_inf"] < 1e-3 < tab.loc["baseline", "E_inf"]
    assert abs(tab.loc["alg1", "LIM"]) < 0.01
    assert tab.loc["alg1", "Z"] > 1.5 * tab.loc["baseline", "Z"]


def test_alg1_without_stabilizer_cannot_grow_Z():
    """With eps_inf = 0, E_inf is scale invariant: mean(u) = 0 at the optimum and Z = Z_0 * geomean(m) < Z_0."""
    s = algebraic(eps_inf=0.0)
    res = remedies.algorithm1(s)
    assert abs(float(res.gains.mean())) < 1e-6
    z0 = linear_model.influence_energy(s, torch.zeros(s.length, dtype=linear_model.DTYPE))
    z1 = linear_model.influence_energy(s, res.gains)
    m0 = z0 / z0.mean()
    assert float(z1.sum()) == pytest.approx(float(z0.sum() * torch.exp(torch.log(m0).mean())), rel=1e-2)


def test_alg2_moves_the_profile_only_a_little(table):
    tab = table[0]
    base, a2 = tab.loc["baseline"], tab.loc["alg2"]
    assert a2.E_inf < base.E_inf  # the right direction ...
    assert a2.E_inf > 0.8 * base.E_inf  # ... but a small step: only mass 0.15 is adjustable
    assert abs(a2.LIM - base.LIM) < 0.05
    assert a2.left > a2.right > a2.middle


def test_alg3_balances_traces_but_not_influence_or_conditioning(table):
    tab, profiles = table
    base, a3 = tab.loc["baseline"], tab.loc["alg3"]
    assert a3.obs_imbalance < base.obs_imbalance / 10  # more than an order of magnitude
    # directional condition numbers: a scalar gain cannot change them (paper eq. 182)
    assert a3.cond_min == pytest.approx(base.cond_min) and a3.cond_max == pytest.approx(base.cond_max)
    g0 = linear_model.gramians(S, torch.zeros(S.length, dtype=linear_model.DTYPE))
    g3 = linear_model.gramians(S, torch.as_tensor(profiles[profiles.method == "alg3"].gain.to_numpy().copy()))
    torch.testing.assert_close(linear_model.condition_numbers(g3), linear_model.condition_numbers(g0))
    assert a3.cond_max > 1.5  # and they are not trivially 1
    # trace balancing pushes the right region below the middle: LIM < 0
    assert a3.right < a3.middle and a3.LIM < 0


# ---- probe study ----------------------------------------------------------------------------


def test_probe_estimate_is_unbiased_for_each_trace():
    gram = linear_model.gramians(S, torch.zeros(S.length, dtype=linear_model.DTYPE))
    probes = torch.randn(20000, 1, S.features, generator=torch.Generator().manual_seed(1), dtype=linear_model.DTYPE)
    est = probe_study_module.probe_traces(gram, probes).mean(0)
    exact = torch.diagonal(gram, dim1=-2, dim2=-1).sum(-1)
    torch.testing.assert_close(est, exact, rtol=0.05, atol=0)


def test_probe_bias_falls_like_1_over_n_and_std_like_1_over_sqrt_n():
    s = algebraic(repetitions=20000, seed=3)
    pr = probe_study_module.probe_study(s)
    assert list(pr.columns[:4]) == probe_study_module.PROBE_COLUMNS
    assert (pr.rel_bias > 0).all()  # upward bias: the penalty is quadratic in the estimates
    assert probe_study_module.loglog_slope(pr.n_probe, pr.rel_bias) == pytest.approx(-1.0, abs=0.15)
    # The std of one batch's estimate goes like sqrt(4 v / N + 2 v^2 / N^2) (linear plus quadratic
    # term of the trace errors): -1/2 asymptotically, a little steeper over N = 1..32 (the
    # paper's 216.3% -> 24.4% is a slope of -0.63 too).
    assert -0.7 < probe_study_module.loglog_slope(pr.n_probe, pr.rel_std) < -0.5
    large = pr[pr.n_probe >= 8]
    assert probe_study_module.loglog_slope(large.n_probe, large.rel_std) == pytest.approx(-0.5, abs=0.07)
    # the Monte Carlo bias agrees with the exact bias within 4 standard errors
    assert np.all(np.abs(pr.rel_bias - pr.rel_bias_theory) < 4 * pr.rel_se_bias)


def test_loglog_slope_rejects_nonpositive_values():
    with pytest.raises(ValueError):
        probe_study_module.loglog_slope([1, 2], [0.1, -0.1])


# ---- settings -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "raw, key",
    [
        ({"lenght": 40}, "lenght"),
        ({"length": 2}, "length"),
        ({"length": 40.5}, "length"),
        ({"step": 0.5, "mixing": 3.0}, "mixing"),
        ({"uniform_mass": 1.0}, "uniform_mass"),
        ({"probe_counts": [4]}, "probe_counts"),
        ({"probe_counts": "1,2"}, "probe_counts"),
        ({"gamma1": "big"}, "gamma1"),
        ({"delta": 0.6}, "delta"),
        ({"length": 5, "delta": 0.05}, "delta"),  # no position with p < 0.05 when L = 5
        ({"repetitions": True}, "repetitions"),
    ],
)
def test_bad_settings_raise_config_error_naming_the_key(raw, key):
    with pytest.raises(ConfigError, match=rf"^config key algebraic\.{key}"):
        algebraic(**raw)


def test_the_defaults_are_the_default_config_and_the_cli_rejects_bad_settings(tmp_path):
    assert algebraic(**yaml.safe_load((REPO / "config" / "config.yaml").read_text())["algebraic"]) == S
    from lostmid.cli.main import main

    outputs = [
        "--table",
        str(tmp_path / "t.parquet"),
        "--profiles",
        str(tmp_path / "p.parquet"),
        "--probes",
        str(tmp_path / "q.parquet"),
    ]
    assert main(["algebraic", "--settings", '{"features": 0}', *outputs]) == 2
    assert not (tmp_path / "t.parquet").exists()
