"""Density flow (eq. 69): one forward-over-reverse product predicts how one gradient step moves m."""

import pytest
import torch

from lostmid.analysis import density_flow
from lostmid.core import task
from lostmid.core.model import FlagTransformer

from conftest import model_config


@pytest.fixture(scope="module")
def flow():
    torch.manual_seed(0)
    model = FlagTransformer(model_config(seq_len=6, depth=1, d_model=8, heads=2, mlp_ratio=2))
    tokens, targets, _ = task.stratified_eval_set(6, 2, seed=7)
    return model, tokens, targets, density_flow.predicted_flow(model, tokens, targets)


def test_finite_difference_error_shrinks_with_the_step_size(flow):
    *_, predicted = flow
    errors = [
        density_flow.relative_error(density_flow.finite_difference(predicted, eta), predicted["predicted"])
        for eta in (1e-2, 1e-3, 1e-4)
    ]
    assert errors[0] > errors[1] > errors[2]
    assert errors[0] / errors[2] > 20  # O(eta): two decades of eta give about two decades of error
    assert errors[2] < 1e-2


def test_the_predicted_flow_conserves_the_mean_density(flow):
    *_, predicted = flow
    assert abs(predicted["density"].mean().item() - 1) < 1e-12
    assert abs(predicted["predicted"].mean().item()) < 1e-12  # mean(m) = 1 for every theta


def test_the_jvp_is_the_directional_derivative_of_the_energy(flow):
    *_, predicted = flow
    eta = 1e-5  # central difference along -g: O(eta^2), independent of the density formula
    energy_of, g = predicted["energy_of"], predicted["g"]
    plus = energy_of({n: p + eta * g[n] for n, p in predicted["params"].items()})
    minus = energy_of({n: p - eta * g[n] for n, p in predicted["params"].items()})
    torch.testing.assert_close((plus - minus) / (2 * eta), predicted["directional"], rtol=1e-6, atol=1e-12)


def test_the_flow_table_and_the_model_left_untouched(flow):
    model, tokens, targets, _ = flow
    before = {n: p.clone() for n, p in model.state_dict().items()}
    table = density_flow.flow_table(model, tokens, targets, 1e-4)
    assert list(table.columns) == ["position", "p", "eta", "predicted", "finite_difference", "rel_error"]
    assert len(table) == 6 and table.rel_error.nunique() == 1 and table.rel_error.iloc[0] < 1e-2
    several = density_flow.flow_table(model, tokens, targets, (1e-2, 1e-4))
    assert len(several) == 12 and several.eta.tolist() == [1e-2] * 6 + [1e-4] * 6
    errors = several.groupby("eta").rel_error.first()
    assert errors[1e-2] > errors[1e-4] == table.rel_error.iloc[0]  # one prediction, checked at every step size
    assert model.token_embedding.weight.dtype == torch.float32
    for name, value in model.state_dict().items():
        assert torch.equal(value, before[name]), name
