"""Training as a chain of checkpoints: exact resumption, determinism, and clear checkpoint errors."""

import re

import pytest
import torch

from lostmid.errors import CheckpointError
from lostmid.training import checkpoint
from lostmid.training.checkpoint import TrainingState
from lostmid.training.train import train_steps


def weights(state):
    return {k: v.clone() for k, v in state.model.state_dict().items()}


def trained_weights(spec, n_steps):
    state = TrainingState.initial(spec, "cpu")
    train_steps(state, n_steps, "cpu", progress=False)
    return weights(state)


def assert_bitwise_equal(a, b):
    assert a.keys() == b.keys()
    for key in a:
        assert torch.equal(a[key], b[key]), key


@pytest.mark.parametrize("reading", ["plain", "warm-up", "no positions"])
def test_chained_segments_give_bitwise_the_weights_of_one_uninterrupted_run(spec, tmp_path, reading):
    if reading == "warm-up":  # a segment boundary (5, 9) falls inside the warm-up
        spec = {**spec, "train": {**spec["train"], "warmup": 7}}
    if reading == "no positions":
        spec = {**spec, "model": {**spec["model"], "positions": "none"}}
    whole = TrainingState.initial(spec, "cpu")
    whole_log = train_steps(whole, 12, "cpu", progress=False)

    TrainingState.initial(spec, "cpu").save(tmp_path / "step0.pt")
    logs = []
    for start, end in [(0, 5), (5, 9), (9, 12)]:
        state = TrainingState.load(tmp_path / f"step{start}.pt", spec, "cpu")
        logs.append(train_steps(state, end - start, "cpu", progress=False))
        state.save(tmp_path / f"step{end}.pt")
    chained = TrainingState.load(tmp_path / "step12.pt", spec, "cpu")

    assert chained.step == whole.step == 12
    assert_bitwise_equal(weights(chained), weights(whole))
    assert_bitwise_equal(chained.optimizer.state_dict()["state"][0], whole.optimizer.state_dict()["state"][0])
    chained_losses = [loss for log in logs for loss in log["loss"]]
    assert chained_losses == list(whole_log["loss"])


def test_the_same_seed_trains_the_same_weights_and_another_seed_does_not(spec):
    runs = [trained_weights({**spec, "seed": seed}, 3) for seed in (0, 0, 1)]
    assert_bitwise_equal(runs[0], runs[1])
    assert not torch.equal(runs[0]["head.weight"], runs[2]["head.weight"])


def test_training_log_has_one_row_per_step(spec):
    state = TrainingState.initial(spec, "cpu")
    log = train_steps(state, 4, "cpu", progress=False)
    assert list(log.columns) == ["step", "loss", "accuracy", "seconds_per_step", "peak_mem_mb", "cpu_seconds_per_step"]
    assert list(log["step"]) == [1, 2, 3, 4]
    assert log["accuracy"].between(0, 1).all() and (log["seconds_per_step"] > 0).all()


def test_a_checkpoint_of_another_run_is_refused_and_the_message_names_the_key(spec, tmp_path):
    TrainingState.initial(spec, "cpu").save(tmp_path / "step0.pt")
    other = {**spec, "train": {**spec["train"], "lr": 0.1}}
    with pytest.raises(CheckpointError, match=r"train\.lr: requested 0\.1, checkpoint has 0\.003"):
        TrainingState.load(tmp_path / "step0.pt", other, "cpu")


def test_a_truncated_checkpoint_is_a_clear_error(spec, tmp_path):
    path = tmp_path / "step0.pt"
    TrainingState.initial(spec, "cpu").save(path)
    path.write_bytes(path.read_bytes()[:500])
    with pytest.raises(CheckpointError, match="corrupt or truncated"):
        checkpoint.read(path)


def test_a_missing_or_foreign_file_is_a_clear_error(tmp_path):
    with pytest.raises(CheckpointError, match="does not exist"):
        checkpoint.read(tmp_path / "nope.pt")
    torch.save({"weights": torch.zeros(2)}, tmp_path / "other.pt")
    with pytest.raises(CheckpointError, match="not a lostmid checkpoint"):
        checkpoint.read(tmp_path / "other.pt")


def test_checkpoints_are_written_atomically(spec, tmp_path, monkeypatch):
    path = tmp_path / "step0.pt"
    state = TrainingState.initial(spec, "cpu")
    state.save(path)
    before = path.read_bytes()

    def killed(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(torch, "save", killed)
    with pytest.raises(KeyboardInterrupt):
        state.save(path)
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["step0.pt"]


def test_a_block_of_seeds_in_one_job_gives_bitwise_the_weights_of_one_job_per_seed(spec, tmp_path):
    """One `lostmid train` process for seeds 0, 1 and 2 (one after another) against a process each."""
    import json

    from lostmid.cli.main import main

    seeds = (0, 1, 2)
    for seed in seeds:
        TrainingState.initial({**spec, "seed": seed}, "cpu").save(tmp_path / f"seed{seed}_step0.pt")
    common = ["train", "--spec", json.dumps(spec), "--device", "cpu", "--threads", "1", "--steps", "4"]
    assert (
        main(
            [
                *common,
                "--seeds",
                *map(str, seeds),
                "--checkpoint",
                *(str(tmp_path / f"seed{s}_step0.pt") for s in seeds),
                "--out",
                *(str(tmp_path / f"block{s}.pt") for s in seeds),
                "--table",
                *(str(tmp_path / f"block{s}.parquet") for s in seeds),
            ]
        )
        == 0
    )
    for seed in reversed(seeds):  # another order, another process state: still the same numbers
        assert (
            main(
                [
                    *common,
                    "--seeds",
                    str(seed),
                    "--checkpoint",
                    str(tmp_path / f"seed{seed}_step0.pt"),
                    "--out",
                    str(tmp_path / f"alone{seed}.pt"),
                    "--table",
                    str(tmp_path / f"alone{seed}.parquet"),
                ]
            )
            == 0
        )
    for seed in seeds:
        block = TrainingState.load(tmp_path / f"block{seed}.pt", {**spec, "seed": seed}, "cpu")
        alone = TrainingState.load(tmp_path / f"alone{seed}.pt", {**spec, "seed": seed}, "cpu")
        assert_bitwise_equal(weights(block), weights(alone))


def test_a_checkpoint_of_another_step_of_the_same_run_is_refused_naming_both_steps(spec, tmp_path, capsys):
    import json
    import shutil

    from lostmid.cli import main as cli

    state = TrainingState.initial(spec, "cpu")
    state.save(tmp_path / "step0.pt")
    train_steps(state, 2, "cpu", progress=False)
    state.save(tmp_path / "step2.pt")
    shutil.copy(tmp_path / "step0.pt", tmp_path / "step4.pt")  # step 0 copied over step 4
    message = rf"checkpoint {tmp_path / 'step4.pt'} holds step 0, expected step 4"
    with pytest.raises(CheckpointError, match=re.escape(message)):
        checkpoint.read(tmp_path / "step4.pt", spec)
    with pytest.raises(CheckpointError, match=re.escape(message)):
        TrainingState.load(tmp_path / "step4.pt", spec, "cpu")
    with pytest.raises(CheckpointError, match="would hold step 2, expected step 4"):
        state.save(tmp_path / "step4.pt")
    # every reader: the analysis commands go through checkpoint.analyze_run
    argv = [
        "evaluate",
        "--spec",
        json.dumps(spec),
        "--device",
        "cpu",
        "--evaluation",
        '{"per_position": 2, "seed": 0}',
        "--influence",
        "{}",
        "--checkpoints",
        str(tmp_path / "step2.pt"),
        str(tmp_path / "step4.pt"),
        "--failure",
        str(tmp_path / "failure.parquet"),
        "--profiles",
        str(tmp_path / "p.parquet"),
        "--metrics",
        str(tmp_path / "m.parquet"),
        "--answer-influence",
        str(tmp_path / "a.parquet"),
    ]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    aside = tmp_path / ".step4.pt.damaged"  # moved aside, so that the workflow's next run rebuilds it
    assert err[-1] == f"lostmid evaluate: error: {message}; moved it aside to {aside}: the next run rebuilds it"
    assert not (tmp_path / "failure.parquet").exists() and not (tmp_path / "step4.pt").exists() and aside.is_file()


class Foreign:
    """Stands for any object a malicious or foreign pickle may carry."""


@pytest.mark.parametrize("kind", ["truncated", "foreign object", "raw pickle"])
def test_the_corrupt_checkpoint_message_never_advises_disabling_weights_only(spec, tmp_path, kind):
    import pickle

    path = tmp_path / "step0.pt"
    if kind == "truncated":
        TrainingState.initial(spec, "cpu").save(path)
        path.write_bytes(path.read_bytes()[:500])
    elif kind == "foreign object":
        torch.save({"format": checkpoint.FORMAT, "model": Foreign()}, path)
    else:
        path.write_bytes(pickle.dumps(Foreign()))
    with pytest.raises(CheckpointError) as caught:
        checkpoint.read(path)
    message = str(caught.value)
    assert str(path) in message and "\n" not in message
    for advice in ("weights_only", "trust", "safe_globals", "arbitrary code"):
        assert advice not in message, message
    if kind == "truncated":
        assert "corrupt or truncated (RuntimeError: PytorchStreamReader failed reading zip archive" in message
    else:
        assert "is not a lostmid checkpoint: it holds Python objects other than tensors" in message
        assert ("Foreign" in message) == (kind == "foreign object")


def test_warm_up_ramps_the_learning_rate_linearly_and_zero_steps_is_the_plain_run(spec):
    from lostmid.core.optim import warmup_lr

    assert [warmup_lr(0.01, step, 4) for step in (1, 2, 4, 9)] == [0.0025, 0.005, 0.01, 0.01]
    assert warmup_lr(0.003, 1, 0) == 0.003
    trains = [spec["train"], {**spec["train"], "warmup": 0}, {**spec["train"], "warmup": 3}]
    runs = [trained_weights({**spec, "train": train}, 4) for train in trains]
    assert_bitwise_equal(runs[0], runs[1])
    assert not torch.equal(runs[0]["head.weight"], runs[2]["head.weight"])


def test_without_positions_the_model_has_no_position_embedding_and_order_still_matters(spec):
    from lostmid.core.model import FlagTransformer, ModelConfig

    torch.manual_seed(0)
    model = FlagTransformer(ModelConfig(**{**spec["model"], "depth": 2, "positions": "none"}))
    assert not any("position" in name for name, _ in model.named_parameters())
    tokens = torch.tensor([[1, 0, 0, 1, 2, 1, 0, 1]])
    swapped = tokens[:, [1, 0, 2, 3, 4, 5, 6, 7]]
    # The last position sees every token, but through the causal mask earlier states see different
    # prefixes: the causal mask alone carries position (at depth >= 2).
    assert not torch.allclose(model(tokens), model(swapped))


def test_a_checkpoint_made_from_another_attention_bias_is_refused_naming_both_digests(tmp_path, capsys):
    """The fitted B is an input of a bias variant's runs: its digest is in the checkpoint's fingerprint,
    and a segment continued with another B refuses the checkpoint (a step-0 checkpoint
    initialized from another fit was trained on, 10 tables differed)."""
    import json

    from lostmid import config as cfg
    from lostmid.cli import main as cli

    from conftest import tiny_spec

    spec = {**tiny_spec(), "variant": "debiased", "remedy": {"kind": "bias"}}
    ours, other = tmp_path / "ours.pt", tmp_path / "other.pt"
    torch.save(torch.linspace(-1, 1, 64).reshape(8, 8), ours)
    torch.save(torch.linspace(-1, 1, 64).reshape(8, 8).T.contiguous(), other)
    digest = {path: checkpoint.tensor_sha256(torch.load(path)) for path in (ours, other)}
    common = ["--spec", json.dumps(spec), "--device", "cpu"]
    assert cli.main(["init", *common, "--attention-bias", str(other), "--out", str(tmp_path / "step0.pt")]) == 0
    raw = checkpoint.read(tmp_path / "step0.pt", spec)
    assert raw["inputs"] == {"attention_bias": digest[other]} and raw["fingerprint"] != cfg.fingerprint(spec)
    train = [
        "train",
        *common,
        "--checkpoint",
        str(tmp_path / "step0.pt"),
        "--steps",
        "2",
        "--out",
        str(tmp_path / "step2.pt"),
        "--table",
        str(tmp_path / "train.parquet"),
    ]
    assert cli.main([*train, "--attention-bias", str(ours)]) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        f"lostmid train: error: checkpoint {tmp_path / 'step0.pt'} was made with attention bias sha256 "
        f"{digest[other][:12]}… "
        f"but {ours} has {digest[ours][:12]}…; moved it aside to {tmp_path / '.step0.pt.damaged'}: the next run "
        "rebuilds it"
    )
    assert not (tmp_path / "step2.pt").exists()
    # made from the right B, the segment trains, and its checkpoint keeps the record
    assert cli.main(["init", *common, "--attention-bias", str(ours), "--out", str(tmp_path / "step0.pt")]) == 0
    assert cli.main([*train, "--attention-bias", str(ours)]) == 0
    assert checkpoint.read(tmp_path / "step2.pt", spec)["inputs"] == {"attention_bias": digest[ours]}
    assert checkpoint.read(tmp_path / "step2.pt", spec, [checkpoint.attention_bias_input(ours, 8)[1]])["step"] == 2


def test_a_run_without_input_files_keeps_the_fingerprint_of_its_spec(spec, tmp_path):
    TrainingState.initial(spec, "cpu").save(tmp_path / "step0.pt")
    from lostmid import config as cfg

    raw = checkpoint.read(tmp_path / "step0.pt", spec)
    assert raw["inputs"] == {} and raw["fingerprint"] == cfg.fingerprint(spec)


def test_the_digest_of_a_tensor_covers_its_values_shape_and_dtype():
    b = torch.arange(16.0).reshape(4, 4)
    digests = {checkpoint.tensor_sha256(t) for t in (b, b.clone(), b.reshape(2, 8), b.double(), b + 1e-7)}
    assert len(digests) == 4 and checkpoint.tensor_sha256(b) == checkpoint.tensor_sha256(b.clone())


def test_random_bytes_are_not_a_torch_file(tmp_path):
    path = tmp_path / "step0.pt"
    path.write_bytes(bytes(range(7, 250)) * 10)
    with pytest.raises(CheckpointError) as caught:
        checkpoint.read(path)
    assert (
        str(caught.value)
        == f"checkpoint {path} is not a torch file (neither a zip archive, as torch.save writes, nor a pickle)"
    )
    assert caught.value.path == path


def test_every_analysis_of_a_bias_variant_checks_the_attention_bias_its_checkpoints_were_made_from(tmp_path, capsys):
    """Not only training: an analysis job given the block's fitted B refuses a checkpoint made from another
    one (a hand-copied final checkpoint would otherwise be analyzed as if it were this run's)."""
    import json

    from lostmid.cli import main as cli

    from conftest import tiny_spec

    spec = {**tiny_spec(), "variant": "debiased", "remedy": {"kind": "bias"}}
    ours, other = tmp_path / "ours.pt", tmp_path / "other.pt"
    torch.save(torch.linspace(-1, 1, 64).reshape(8, 8), ours)
    torch.save(torch.linspace(-1, 1, 64).reshape(8, 8).T.contiguous(), other)
    common = ["--spec", json.dumps(spec), "--device", "cpu"]
    step0 = tmp_path / "step0.pt"
    evaluate = [
        "evaluate",
        *common,
        "--checkpoints",
        str(step0),
        "--evaluation",
        json.dumps({"per_position": 2, "seed": 1000}),
        "--influence",
        json.dumps({"batch_per_position": 2, "seed": 2000, "deltas": [0.2]}),
        "--failure",
        str(tmp_path / "failure.parquet"),
        "--profiles",
        str(tmp_path / "profiles.parquet"),
        "--metrics",
        str(tmp_path / "metrics.parquet"),
        "--answer-influence",
        str(tmp_path / "answer_influence.parquet"),
    ]
    assert cli.main(["init", *common, "--attention-bias", str(other), "--out", str(step0)]) == 0
    assert cli.main([*evaluate, "--attention-bias", str(ours)]) == 2
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert line.startswith(f"lostmid evaluate: error: checkpoint {step0} was made with attention bias sha256 ")
    assert not (tmp_path / "failure.parquet").exists()
    assert cli.main(["init", *common, "--attention-bias", str(ours), "--out", str(step0)]) == 0
    assert cli.main([*evaluate, "--attention-bias", str(ours)]) == 0
    assert (tmp_path / "failure.parquet").exists()
