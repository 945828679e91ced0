"""Seed batches: several seeds of a run trained by one vmapped step (lostmid.training.seed_batch)."""

import pytest
import torch

from lostmid.training import checkpoint
from lostmid.training.checkpoint import TrainingState
from lostmid.training.seed_batch import check_batch, train_seed_batch
from lostmid.training.train import train_steps

from conftest import tiny_spec
from test_training import assert_bitwise_equal, weights

SEEDS = (0, 1, 2)
REMEDIES = {
    "task loss": {"kind": "none"},
    "Algorithm 1": {"kind": "balance", "beta": 0.1, "target": "uniform"},
    "Algorithm 2": {"kind": "reweight", "eta": 1.0, "every": 5, "probe_per_position": 2},
}


def batch_spec(remedy=None, seed_batch=3):
    spec = tiny_spec()
    spec["train"]["seed_batch"] = seed_batch
    spec["remedy"] = remedy or {"kind": "none"}
    return spec


def initial_states(spec, seeds=SEEDS):
    return [TrainingState.initial({**spec, "seed": seed}, "cpu") for seed in seeds]


@pytest.mark.parametrize("remedy", REMEDIES.values(), ids=REMEDIES.keys())
def test_a_seed_batch_trains_each_seed_as_it_would_train_alone_up_to_float_rounding(remedy):
    batch = initial_states(batch_spec(remedy))
    batch_logs = train_seed_batch(batch, 10, "cpu", progress=False)
    for state, batch_log in zip(batch, batch_logs):
        alone = TrainingState.initial(state.spec, "cpu")
        alone_log = train_steps(alone, 10, "cpu", progress=False)
        assert state.step == alone.step == 10
        assert list(batch_log["step"]) == list(alone_log["step"])
        torch.testing.assert_close(
            torch.tensor(batch_log["loss"].values), torch.tensor(alone_log["loss"].values), rtol=0, atol=1e-5
        )
        batch_weights, alone_weights = weights(state), weights(alone)
        for name in alone_weights:  # Adam divides by sqrt(v): rounding grows to ~1e-5 in ten steps
            torch.testing.assert_close(batch_weights[name], alone_weights[name], rtol=0, atol=2e-4, msg=name)
    assert not torch.equal(weights(batch[0])["head.weight"], weights(batch[1])["head.weight"])


def test_chained_batch_segments_give_bitwise_one_uninterrupted_batch(tmp_path):
    spec = batch_spec(REMEDIES["Algorithm 2"])
    whole = initial_states(spec)
    whole_logs = train_seed_batch(whole, 12, "cpu", progress=False)

    paths = {seed: tmp_path / f"seed{seed}_step0.pt" for seed in SEEDS}
    for state in initial_states(spec):
        state.save(paths[state.spec["seed"]])
    losses = {seed: [] for seed in SEEDS}
    for start, end in [(0, 5), (5, 12)]:
        states = [
            TrainingState.load(tmp_path / f"seed{seed}_step{start}.pt", {**spec, "seed": seed}, "cpu") for seed in SEEDS
        ]
        for seed, log in zip(SEEDS, train_seed_batch(states, end - start, "cpu", progress=False)):
            losses[seed] += list(log["loss"])
        for seed, state in zip(SEEDS, states):
            state.save(tmp_path / f"seed{seed}_step{end}.pt")

    for seed, state, whole_log in zip(SEEDS, whole, whole_logs):
        chained = TrainingState.load(tmp_path / f"seed{seed}_step12.pt", state.spec, "cpu")
        assert_bitwise_equal(weights(chained), weights(state))
        assert_bitwise_equal(chained.optimizer.state_dict()["state"][3], state.optimizer.state_dict()["state"][3])
        assert losses[seed] == list(whole_log["loss"])


def test_a_batch_checkpoint_is_an_ordinary_run_checkpoint_that_owns_its_weights(tmp_path):
    states = initial_states(batch_spec())
    train_seed_batch(states, 3, "cpu", progress=False)
    for p in states[1].model.parameters():  # not a view of the stacked tensors: saving writes one seed
        assert p.untyped_storage().nbytes() == p.numel() * p.element_size()
    states[1].save(tmp_path / "step3.pt")
    resumed = TrainingState.load(tmp_path / "step3.pt", states[1].spec, "cpu")
    train_steps(resumed, 2, "cpu", progress=False)
    assert resumed.step == 5


def test_an_objective_without_a_functional_form_trains_its_seeds_one_by_one_bitwise():
    spec = batch_spec({"kind": "observability", "lam": 0.1, "probes": 1, "monitored": 4})
    batch = initial_states(spec, seeds=(0, 1))
    train_seed_batch(batch, 4, "cpu", progress=False)
    for state in batch:
        alone = TrainingState.initial(state.spec, "cpu")
        train_steps(alone, 4, "cpu", progress=False)
        assert_bitwise_equal(weights(state), weights(alone))


def test_only_runs_that_differ_in_their_seed_at_one_step_form_a_batch():
    states = initial_states(batch_spec(), seeds=(0, 1))
    other = TrainingState.initial({**batch_spec(), "seed": 2, "train": {**batch_spec()["train"], "lr": 0.01}}, "cpu")
    with pytest.raises(ValueError, match="another spec"):
        check_batch([*states, other])
    train_steps(states[1], 1, "cpu", progress=False)
    with pytest.raises(ValueError, match="is at step 1"):
        check_batch(states)


def test_the_train_command_trains_a_seed_batch_into_per_run_files(tmp_path, capsys):
    import json

    import pandas as pd

    from lostmid.cli.main import main

    spec = batch_spec(seed_batch=2)
    for state in initial_states(spec, seeds=(4, 5)):
        state.save(tmp_path / f"seed{state.spec['seed']}_step0.pt")
    files = {
        kind: [str(tmp_path / f"seed{seed}_{kind}") for seed in (4, 5)]
        for kind in ("step0.pt", "step3.pt", "log.parquet")
    }
    main(
        [
            "train",
            "--spec",
            json.dumps(spec),
            "--seeds",
            "4",
            "5",
            "--device",
            "cpu",
            "--steps",
            "3",
            "--checkpoint",
            *files["step0.pt"],
            "--out",
            *files["step3.pt"],
            "--table",
            *files["log.parquet"],
        ]
    )
    for seed, path, table in zip((4, 5), files["step3.pt"], files["log.parquet"]):
        assert checkpoint.TrainingState.load(path, {**spec, "seed": seed}, "cpu").step == 3
        assert list(pd.read_parquet(table)["seed"]) == [seed] * 3

    assert (
        main(
            [
                "train",
                "--spec",
                json.dumps(spec),
                "--seeds",
                "4",
                "5",
                "--device",
                "cpu",
                "--steps",
                "3",
                "--checkpoint",
                files["step0.pt"][0],
                "--out",
                *files["step3.pt"],
                "--table",
                *files["log.parquet"],
            ]
        )
        == 2
    )
    assert "--checkpoint names 1 files for 2 seeds [4, 5]" in capsys.readouterr().err


def test_a_seed_batch_benchmark_record_stands_for_each_of_its_seeds(tmp_path):
    from lostmid.tables.remedies import read_benchmarks

    record = "s\th:m:s\tmax_rss\n12.5\t0:00:12\t300.0\n"
    paths = [tmp_path / "baseline" / "L8_M1_seeds0-1-2_step10.tsv", tmp_path / "balance" / "L8_M1_seed4_step10.tsv"]
    for path in paths:
        path.parent.mkdir()
        path.write_text(record)
    table = read_benchmarks(paths)
    assert list(zip(table["variant"], table["seed"])) == [
        ("baseline", 0),
        ("baseline", 1),
        ("baseline", 2),
        ("balance", 4),
    ]
    assert (table["step"] == 10).all() and (table["max_rss_mb"] == 300.0).all()
