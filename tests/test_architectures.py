"""The architectures stage: measured profiles, hooks, rollout theories, metrics, models, the rule.

Tiny models (width 16, one or two layers, n <= 16) so each test takes seconds.
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
import yaml  # noqa: E402
from scipy import stats as scipy_stats  # noqa: E402

from lostmid.analysis.metrics import cesaro_matrix  # noqa: E402
from lostmid.architectures import measure, models, sweep, theory  # noqa: E402
from lostmid.architectures.settings import ArchSettings  # noqa: E402
from lostmid.config import settings_from_section  # noqa: E402
from lostmid.errors import ConfigError  # noqa: E402

from conftest import REPO, tiny_spec  # noqa: E402

TINY = dict(depth=2, d_model=16, heads=2, vocab=32, max_length=16)


def tiny(family, encoding, seed=0, **overrides):
    return models.build(family, encoding, seed=seed, **{**TINY, **overrides})


def loop_profile(arch, ids, target, power, probe_seed):
    """Reference: one forward and backward pass per sequence AND per position, only x_j a leaf."""
    embedding = arch.model.get_input_embeddings()
    probe = measure.probes(ids.shape[0], embedding.weight.shape[1], probe_seed, ids.device)
    out = np.zeros(ids.shape[1])
    for s in range(ids.shape[0]):
        x = embedding(ids[s : s + 1]).detach()  # (1, n, d)
        for j in range(ids.shape[1]):
            leaf = x[:, j].clone().requires_grad_(True)  # (1, d)
            inputs = torch.cat([x[:, :j], leaf[:, None], x[:, j + 1 :]], dim=1)
            result = arch.model(inputs_embeds=inputs, use_cache=False, output_hidden_states=True)
            value = measure.target_sum(
                target,
                result.logits[:, -1],
                logits=result.logits,
                next_ids=ids[s : s + 1, 1:],
                hidden_last=result.hidden_states[-1][:, -1],
                probe=probe[s : s + 1],
            )
            (grad,) = torch.autograd.grad(value, leaf)
            out[j] += float(grad.double().norm()) ** power
    return out / ids.shape[0]


@pytest.mark.parametrize("family,encoding", [("gpt2", "learned"), ("llama", "rope"), ("qwen2", "none")])
@pytest.mark.parametrize("target", measure.TARGETS)
def test_the_measured_profile_equals_a_per_position_loop(family, encoding, target):
    arch = tiny(family, encoding)
    ids = sweep.token_ids(arch.vocab, 3, 8, seed=1)
    batched, _ = measure.measure_hf(arch, ids, target, powers=(1, 2), chunk=2, probe_seed=7)  # chunks of 2 and 1
    for power in (1, 2):
        expected = loop_profile(arch, ids, target, power, probe_seed=7)
        assert expected[:-1].min() > 0  # the loss has no term predicting from position n: its last entry is 0
        np.testing.assert_allclose(batched[power], expected, rtol=1e-4, atol=1e-12)


def test_the_flag_model_profile_equals_a_per_position_loop():
    from lostmid.core import task
    from lostmid.core.model import FlagTransformer, ModelConfig

    torch.manual_seed(0)
    model = FlagTransformer(ModelConfig(**tiny_spec(depth=2)["model"])).eval()
    tokens, answers, _ = task.stratified_eval_set(8, 1, seed=3)
    batched, _ = measure.measure_flag(model, tokens, answers, "loss", powers=(2,), chunk=3)
    expected = np.zeros(8)
    for s in range(tokens.shape[0]):
        for j in range(8):
            leaf = torch.zeros(1, 8, 16 // 2, requires_grad=True)
            logits = model(tokens[s : s + 1], taps=[leaf])
            (grad,) = torch.autograd.grad(torch.nn.functional.cross_entropy(logits, answers[s : s + 1]), leaf)
            expected[j] += float(grad[0, j].double().square().sum())
    np.testing.assert_allclose(batched[2], expected / tokens.shape[0], rtol=1e-4)


def test_the_hooks_record_lambda_and_attention_of_the_flag_model():
    from lostmid.core import task
    from lostmid.core.model import FlagTransformer, ModelConfig

    torch.manual_seed(1)
    model = FlagTransformer(ModelConfig(**tiny_spec(depth=2)["model"])).eval()
    tokens, answers, _ = task.stratified_eval_set(8, 2, seed=4)
    _, stats = measure.measure_flag(model, tokens, answers, "top1", chunk=5)
    lam, attention = [], []
    with torch.no_grad():
        x, mask = model.embed(tokens), model.logit_bias()
        for k, step in enumerate(model.steps):
            if hasattr(step, "attn"):
                a = model.step_size(k) * step.attn(step.norm(x), mask, explicit=True)
                lam.append(float((a.norm(dim=-1) / (a.norm(dim=-1) + x.norm(dim=-1))).mean()))
                attention.append(step.attn.attention_weights(step.norm(x), mask).mean((0, 1)).double().numpy())
            x = model.advance(k, x, mask, explicit=True)
    np.testing.assert_allclose(stats.lambdas(), lam, rtol=1e-5)
    np.testing.assert_allclose(stats.attention(), np.stack(attention), atol=1e-6)
    np.testing.assert_allclose(stats.attention().sum(-1), 1.0, atol=1e-6)  # row-stochastic


def test_the_rollout_equals_its_closed_form_for_constant_lambda():
    n, alpha = 12, 0.3
    C = cesaro_matrix(n)
    N = (1 - alpha) * np.eye(n) + alpha * C
    for H in (1, 2, 5):
        closed = np.linalg.matrix_power(N, H)[-1]
        np.testing.assert_allclose(theory.cesaro(alpha, H, n), closed, atol=1e-13)
        np.testing.assert_allclose(theory.rollout(np.full(H, alpha), np.stack([C] * H)), closed, atol=1e-13)
        assert theory.cesaro(alpha, H, n)[-1] == pytest.approx(
            ((1 - alpha) + alpha / n) ** H, rel=1e-12
        )  # triangular N
        assert theory.cesaro(alpha, H, n).sum() == pytest.approx(1.0)
    one_layer = (1 - alpha) * np.eye(n)[-1] + alpha / n  # H = 1 by hand
    np.testing.assert_allclose(theory.cesaro(alpha, 1, n), one_layer, atol=1e-15)
    # With constant lambda and uniform attention all three theories coincide.
    same = theory.theory_profiles(np.full(4, alpha), np.stack([C] * 4))
    for name in theory.THEORIES:
        np.testing.assert_allclose(same[name], np.linalg.matrix_power(N, 4)[-1], atol=1e-13)
    # A varying lambda: the product order matters only through lambda_t, and the uniform rollout matches the matrices.
    lambdas = np.array([0.1, 0.5, 0.9])
    product = np.eye(n)
    for lam in lambdas:  # M_3 M_2 M_1: later layers multiply on the left
        product = ((1 - lam) * np.eye(n) + lam * C) @ product
    np.testing.assert_allclose(theory.rollout(lambdas, n=n), product[-1], atol=1e-13)
    rng = np.random.default_rng(0)
    A = np.tril(rng.random((3, n, n)))
    A /= A.sum(-1, keepdims=True)
    product = np.eye(n)
    for lam, a in zip(lambdas, A):
        product = ((1 - lam) * np.eye(n) + lam * a) @ product
    np.testing.assert_allclose(theory.rollout(lambdas, A), product[-1], atol=1e-13)


def test_spearman_and_w1_agree_with_scipy():
    rng = np.random.default_rng(1)
    for n in (5, 17, 64):
        p, q = rng.random(n), rng.random(n)
        q[: n // 3] = q[0]  # ties
        assert theory.spearman(p, q) == pytest.approx(scipy_stats.spearmanr(p, q).statistic, abs=1e-12)
        positions = np.arange(1, n + 1)
        expected = scipy_stats.wasserstein_distance(positions, positions, p, q) / (n - 1)
        assert theory.w1(p, q) == pytest.approx(expected, abs=1e-12)
    e1, en = np.eye(9)[0], np.eye(9)[-1]
    assert theory.w1(e1, en) == pytest.approx(1.0)  # all mass moved across the whole sequence
    metrics = theory.shape_metrics(np.array([4.0, 1, 1, 1, 1, 1, 1, 1, 2]))
    assert metrics["first"] == pytest.approx(4 / 13) and metrics["last"] == pytest.approx(2 / 13)
    assert metrics["middle_depth"] == pytest.approx(1 / 3)  # middle third (positions 4..6) 1/13 vs ends 3/13


def test_the_pretrained_path_loads_a_saved_model_with_the_same_profile(tmp_path):
    for family, encoding in (("llama", "rope"), ("gpt2", "learned")):
        arch = tiny(family, encoding, seed=3)
        arch.model.save_pretrained(tmp_path / family)
        loaded, _ = models.load_pretrained(tmp_path / family, attention="eager")
        assert (loaded.family, loaded.encoding, loaded.depth) == (family, encoding, 2)
        ids = sweep.token_ids(arch.vocab, 2, 12, seed=5)
        here, stats_here = measure.measure_hf(arch, ids, "top1", (1,), 2, 0, models.layers(arch))
        there, stats_there = measure.measure_hf(loaded, ids, "top1", (1,), 2, 0, models.layers(loaded))
        np.testing.assert_allclose(there[1], here[1], rtol=1e-6)
        np.testing.assert_allclose(stats_there.lambdas(), stats_here.lambdas(), rtol=1e-6)
    with pytest.raises(ConfigError, match="architectures.pretrained.path"):
        models.load_pretrained(tmp_path / "missing")


@pytest.mark.parametrize("family,native", [("gpt2", "learned"), ("llama", "rope"), ("qwen2", "rope")])
def test_no_positions_make_attention_over_repeated_tokens_uniform(family, native):
    ids = torch.full((1, 10), 3)  # every key equal: only positions can tilt the first layer's attention
    uniform = cesaro_matrix(10)
    for encoding in (native, "none"):
        arch = tiny(family, encoding, seed=2, d_model=32, heads=2)
        with torch.no_grad():  # at init (std 0.02) logits are tiny; enlarge what carries positions so it shows
            if family == "gpt2":
                arch.model.transformer.wpe.weight.mul_(50)
                arch.model.transformer.h[0].attn.c_attn.weight.mul_(30)
            else:
                attention = arch.model.model.layers[0].self_attn
                attention.q_proj.weight.mul_(30)
                attention.k_proj.weight.mul_(30)
        _, stats = measure.measure_hf(arch, ids, "top1", (1,), 1, 0, models.layers(arch))
        gap = np.abs(stats.attention()[0] - uniform).max()
        if encoding == "none":
            assert gap < 1e-6
        else:
            assert gap > 1e-2
    if family == "gpt2":
        assert not arch.model.transformer.wpe.weight.any() and not arch.model.transformer.wpe.weight.requires_grad


def test_a_bad_family_or_encoding_is_one_config_error(capsys):
    def arch(**values):
        return settings_from_section(ArchSettings, values, "architectures")

    with pytest.raises(ConfigError, match=r"^config key architectures.families.gpt3 is unknown$"):
        arch(families={"gpt3": ["learned"]})
    with pytest.raises(
        ConfigError, match=r"architectures.families.gpt2\[0\]: 'rope' is not one of \['learned', 'none'\]"
    ):
        arch(families={"gpt2": ["rope"]})
    with pytest.raises(ConfigError, match=r"architectures.targets\[0\]: 'nll' is not one of"):
        arch(targets=["nll"])
    with pytest.raises(ConfigError, match=r"^config key architectures.depth is unknown$"):
        arch(depth=[2])
    with pytest.raises(ConfigError, match=r"architectures.d_model=6 is not divisible by architectures.heads=4"):
        arch(d_model=6)  # the block's own rule (ArchSettings.check)
    from lostmid import config as lostmid_config

    config = yaml.safe_load((REPO / "tests" / "smoke.yaml").read_text())
    for families, message in (
        ({"gpt3": ["learned"]}, r"\.gpt3 is unknown"),
        ({"llama": ["learned"]}, "'learned' is not one of"),
    ):
        config["architectures"]["families"] = families
        with pytest.raises(ConfigError, match=rf"config key architectures.families.*{message}"):  # before any job
            lostmid_config.validate(config)
    from lostmid.cli import main as cli

    code = cli.main(
        [
            "architectures",
            "--settings",
            '{"families": {"llama": ["alibi"]}}',
            "--profiles",
            "p",
            "--layers",
            "l",
            "--comparison",
            "c",
        ]
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert err[-1] == (
        "lostmid architectures: error: config key architectures.families.llama[0]: 'alibi' is not one of "
        "['rope', 'none']"
    )


def test_the_sweep_tables_have_every_configuration():
    settings = settings_from_section(
        ArchSettings,
        {
            "families": {"qwen2": ["rope", "none"]},
            "depths": [1, 2],
            "lengths": [6, 10],
            "d_model": 16,
            "heads": 2,
            "vocab": 16,
            "sequences": 2,
            "targets": ["top1", "loss"],
            "powers": [1, 2],
        },
        "architectures",
    )
    profiles, layers, comparison = sweep.random_sweep(settings, "cpu")
    assert len(comparison) == 2 * 2 * 2 * 2 * 2 * 3  # encodings x depths x lengths x targets x powers x theories
    assert set(profiles.profile) == {"measured", *theory.THEORIES}
    sums = profiles.groupby(["encoding", "depth", "n", "target", "power", "profile"]).mass.sum()
    np.testing.assert_allclose(sums, 1.0, atol=1e-9)
    assert (
        layers.groupby(["encoding", "depth", "n"])
        .layer.max()
        .eq(layers.groupby(["encoding", "depth", "n"]).depth.first())
        .all()
    )
    assert (
        (comparison.spearman >= -1) & (comparison.spearman <= 1) & (comparison.w1 >= 0) & (comparison.w1 <= 1)
    ).all()
    assert list(comparison.columns[:7]) == list(sweep.KEYS)


@pytest.mark.slow
def test_the_smoke_config_builds_the_stage(smoke_run):
    workdir, config = smoke_run  # the session's run of the whole smoke DAG (conftest), read only
    targets = [
        f"results/architectures_{table}/{part}.parquet"
        for table in ("profiles", "layers", "comparison")
        for part in ("sweep", "flag")
    ]
    targets += ["results/figures/architectures_sweep.png", "results/figures/architectures_flag.png"]
    assert all((workdir / target).is_file() for target in targets)
    comparison = pd.read_parquet(workdir / "results" / "architectures_comparison")
    profiles = pd.read_parquet(workdir / "results" / "architectures_profiles")
    layers = pd.read_parquet(workdir / "results" / "architectures_layers")
    assert set(comparison.family) == {"gpt2", "llama", "qwen2", "flag"}
    assert set(comparison.theory) == set(theory.THEORIES)
    assert set(profiles.profile) == {"measured", *theory.THEORIES}
    flag = comparison.query("family == 'flag'")
    assert set(flag.step) == {0, config["train"]["steps"]} and set(flag.seed) == {0, 1}
    assert set(layers.family) == {"gpt2", "llama", "qwen2", "flag"}
    assert (workdir / "results" / "logs" / "architectures" / "sweep.log").read_text().count(
        "rollout_attention rho"
    ) == 5 * 2 * 2
    assert (workdir / "results" / "figures" / "architectures_sweep.png").stat().st_size > 10_000
    from lostmid.architectures import summary

    text = summary.markdown(comparison.query("family != 'flag'"))
    fit = summary.fit_table(summary.select(comparison)[0])
    assert len(fit) == 5 + 1 and list(fit.columns[3:5]) == ["rho cesaro", "W1 cesaro"]  # 5 family/encoding pairs + flag
    assert "| qwen2 | rope | init |" in text and "flag" not in text
