"""The flag-recall task: one FLAG per sequence, the target is the token before it."""

import numpy as np
import pytest
import torch

from lostmid.core import task


def test_every_sequence_has_one_flag_and_the_target_is_the_token_before_it():
    law = task.flag_law(12)
    tokens, targets, flags = task.sample_batch(256, 12, law, torch.Generator().manual_seed(0))
    assert ((tokens == task.FLAG).sum(1) == 1).all()
    assert torch.equal(tokens.argmax(1) + 1, flags)  # FLAG is the largest token id
    assert torch.equal(targets, tokens[torch.arange(256), flags - 2])
    assert flags.min() >= 2 and flags.max() <= 12


def test_the_same_seed_gives_the_same_data():
    law = task.flag_law(10)
    a = task.sample_batch(32, 10, law, torch.Generator().manual_seed(7))
    b = task.sample_batch(32, 10, law, torch.Generator().manual_seed(7))
    c = task.sample_batch(32, 10, law, torch.Generator().manual_seed(8))
    assert all(torch.equal(x, y) for x, y in zip(a, b))
    assert not torch.equal(a[0], c[0])


def test_stratified_eval_set_has_the_same_count_at_every_flag_position():
    tokens, targets, flags = task.stratified_eval_set(L=9, per_position=5, seed=3)
    assert tokens.shape == (8 * 5, 9)
    counts = torch.bincount(flags, minlength=10)
    assert counts[:2].sum() == 0 and (counts[2:] == 5).all()
    again = task.stratified_eval_set(L=9, per_position=5, seed=3)
    assert torch.equal(tokens, again[0])


@pytest.mark.parametrize("law", ["uniform", "early", "late"])
def test_flag_laws_are_distributions_over_positions_2_to_L(law):
    pi = task.flag_law(16, law)
    assert pi.shape == (15,)
    assert torch.isclose(pi.sum(), torch.tensor(1.0, dtype=pi.dtype))
    assert (pi > 0).all()


def test_unknown_flag_law_is_an_error():
    with pytest.raises(ValueError, match="unknown flag law"):
        task.flag_law(8, "middle")


def test_wilson_interval_contains_the_rate_and_stays_in_0_1():
    low, high = task.wilson_interval(np.array([0, 3, 10]), np.array([10, 10, 10]))
    rate = np.array([0, 0.3, 1.0])
    assert (low <= rate).all() and (rate <= high).all()
    assert low[0] == pytest.approx(0, abs=1e-12) and high[2] == pytest.approx(1)
    assert 0 < low[1] < 0.3 < high[1] < 1
