"""The retrieval stage on a tiny random Llama with a word-level tokenizer (seconds each; never the real model).

What is checked: the examples are what docs/retrieval.md defines (exactly n tokens, the needle at
round(q H), keys and values absent from their window, seeded), prefix reuse changes no result, the influence
shares are shares and do not depend on checkpointing, bad input is one line, and each claim can come out
supported, contradicted or not evaluable on planted examples.
"""

from __future__ import annotations

import json
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import numpy as np
import pandas as pd
import pytest
import torch
from scipy import stats

from lostmid.architectures import models, retrieval, retrieval_summary
from lostmid.errors import ConfigError
from lostmid.evidence import claims
from lostmid.evidence.settings import EvidenceSettings
from lostmid.plots import retrieval as plots_retrieval

FILLER = [f"x{a}{b}" for a in "abcde" for b in "abcdef"]  # no digits: the digit pre-tokenizer would split them
TEMPLATE_WORDS = "The code word for is . special magic number".split()
DIGITS = [str(d) for d in range(10)]
KEYWORDS = list(retrieval.WORDS[:24])
# The retrieval stage's rows of the evidence table.
RETRIEVAL_CLAIMS = [c for c in claims.CLAIMS if c.name.endswith("_predicts_retrieval")]
VOCAB = ["[UNK]", "[BOS]", *TEMPLATE_WORDS, *DIGITS, *KEYWORDS, *FILLER]


def tokenizer(bos="[BOS]"):
    """A word-level tokenizer that writes every digit as its own token (as SmolLM2's does), with a BOS token."""
    from tokenizers import Tokenizer, pre_tokenizers
    from tokenizers import models as tokenizer_models

    core = Tokenizer(tokenizer_models.WordLevel({w: i for i, w in enumerate(VOCAB)}, unk_token="[UNK]"))
    core.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Whitespace(), pre_tokenizers.Digits(True)])
    return models.transformers().PreTrainedTokenizerFast(tokenizer_object=core, unk_token="[UNK]", bos_token=bos)


def tiny_model(dtype=torch.float64, positions=96):
    tf = models.transformers()
    config = tf.LlamaConfig(
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=positions,
        vocab_size=len(VOCAB),
    )
    torch.manual_seed(0)
    return tf.AutoModelForCausalLM.from_config(config, attn_implementation="sdpa").to(dtype).eval()


def stream(tokens=1200, seed=0):
    """Filler text with a few key words in it, so that the draw has to avoid them."""
    rng = np.random.default_rng(seed)
    words = list(rng.choice(FILLER, size=tokens)) + KEYWORDS[:3]
    tok = tokenizer()
    return np.asarray(tok(" ".join(words), add_special_tokens=False)["input_ids"], dtype=np.int64)


def saved_tiny(folder):
    """The tiny model and its tokenizer saved under folder/tiny, and a corpus of 400 filler words (8 windows of
    48 tokens) at folder/corpus.txt, which it returns: what the stage's jobs load."""
    tiny_model(torch.float32).save_pretrained(folder / "tiny")
    tokenizer().save_pretrained(folder / "tiny")
    corpus = folder / "corpus.txt"
    corpus.write_text(" ".join(np.random.default_rng(0).choice(FILLER, size=400)))
    return corpus


def run(n=64, **kwargs):
    return retrieval.retrieval_examples(
        tiny_model(), tokenizer(), stream=stream(), n=n, windows=3, keys=3, digits=3, **kwargs
    )


def test_examples_are_exactly_n_tokens_with_the_needle_at_q_and_keys_absent_from_their_window():
    tok, data = tokenizer(), stream()
    vocabulary = retrieval.single_token_words(tok)
    assert set(vocabulary) == set(KEYWORDS)
    window = data[64:128]
    examples = retrieval.window_examples(tok, window, 1, retrieval.TASKS, retrieval.FRACTIONS, 3, 3, 5, vocabulary)
    assert len(examples) == len(retrieval.TASKS) * len(retrieval.FRACTIONS)
    for e in examples:
        assert e.tokens.shape == (64,)
        needle = e.tokens[e.start : e.stop].tolist()
        query = e.tokens[e.query_start :].tolist()
        words = tok.convert_ids_to_tokens(needle)
        if e.task == "flag":
            assert len(words) == 2 and query[0] == needle[0] and e.answer == needle[1:]
        else:
            assert (
                words[-1] == "."
                and needle[: e.query_start and len(needle) - 1 - len(e.answer)]
                == (needle[: len(needle) - 1 - len(e.answer)])
            )
            assert needle[len(needle) - 1 - len(e.answer) : -1] == e.answer  # the value sits before the period
        haystack = 64 - (e.tokens.shape[0] - e.query_start) - (e.stop - e.start)
        if e.task != "multikey":
            assert e.start == round(e.q * haystack) and e.prefix == e.start
            assert torch.equal(e.tokens[: e.start], torch.from_numpy(window[: e.start]))
        for word in set(tok.convert_ids_to_tokens(needle)) & set(KEYWORDS):
            assert vocabulary[word].isdisjoint(window.tolist())  # keys and values do not occur in their window
    again = retrieval.window_examples(tok, window, 1, retrieval.TASKS, retrieval.FRACTIONS, 3, 3, 5, vocabulary)
    assert all(torch.equal(a.tokens, b.tokens) for a, b in zip(examples, again))


def test_with_bos_the_input_starts_with_it_and_q_0_is_the_first_token_of_text():
    tok, window = tokenizer(), stream()[64:128]
    vocabulary, bos = retrieval.single_token_words(tok), tok.bos_token_id
    lead = retrieval.leading_ids(tok, bos=True)
    assert lead == [bos] and retrieval.leading_ids(tok, bos=False) == []
    plain, with_bos = (
        retrieval.window_examples(tok, window, 1, ("single",), (0.0, 0.5), 3, 3, 5, vocabulary, lead=ids)
        for ids in ([], lead)
    )
    for old, new in zip(plain, with_bos):
        assert new.tokens.shape == (64,) and new.tokens[0] == bos and bos not in old.tokens.tolist()
        assert new.prefix == 1 + round(new.q * (new.query_start - 1 - (new.stop - new.start)))
        assert new.tokens[new.start : new.stop].tolist() == old.tokens[old.start : old.stop].tolist()
    assert with_bos[0].start == 1 and plain[0].start == 0  # q = 0: right after BOS / the very first token
    with pytest.raises(ConfigError, match="^config key retrieval.bos is true but the tokenizer has no BOS token"):
        retrieval.leading_ids(tokenizer(bos=None), bos=True)


def test_more_windows_keep_the_earlier_ones_and_a_window_job_is_the_same_window_of_the_whole_run():
    assert retrieval.window_order(1200, 64, 5)[:3].tolist() == retrieval.window_order(1200, 64, 5).tolist()[:3]
    assert sorted(retrieval.window_order(1200, 64, 5)) == list(range(18))
    whole = run(gradient_windows=1, tasks=("single",), fractions=(0.0, 1.0))
    second = run(gradient_windows=1, tasks=("single",), fractions=(0.0, 1.0), first=1, limit=1)
    pd.testing.assert_frame_equal(whole.iloc[2:4].reset_index(drop=True), second)
    assert whole.influence_free.notna().sum() == 2 and (whole.bos & (whole.start == whole.prefix)).all()


def test_prefix_reuse_changes_no_result_and_the_shares_are_shares_with_or_without_checkpointing():
    reused = run(prefix_reuse=True, gradient_windows=1)
    plain = run(prefix_reuse=False, gradient_windows=1, checkpoint=True, measures=("task",))
    assert len(reused) == 3 * len(retrieval.TASKS) * len(retrieval.FRACTIONS) and (reused.prefix > 0).any()
    np.testing.assert_allclose(reused.logprob, plain.logprob, rtol=1e-10)
    assert (reused.success == plain.success).all()
    shares = reused[["influence_task", "influence_free"]]
    assert shares.iloc[: 4 * 9].notna().all().all() and shares.iloc[4 * 9 :].isna().all().all()  # one gradient window
    assert ((shares.dropna() > 0) & (shares.dropna() < 1)).all().all()
    np.testing.assert_allclose(plain.influence_task.dropna(), reused.influence_task.dropna(), rtol=1e-8)
    assert plain.influence_free.isna().all()  # a measure not asked for is not taken
    assert reused.window.nunique() == 3 and (reused.groupby("window").n.first() == 64).all()


def test_gradients_on_a_subset_of_the_tasks_leave_the_others_forward_only():
    subset = run(gradient_windows=1, gradient_tasks=("single",), tasks=("single", "flag"), fractions=(0.0, 1.0))
    measured = subset.influence_task.notna()
    assert (measured == ((subset.window == subset.window.iloc[0]) & (subset.task == "single"))).all()
    assert measured.sum() == 2 and (subset.influence_free.notna() == measured).all()


def test_gradient_tasks_are_one_entry_per_length_naming_configured_tasks():
    from lostmid.architectures.settings import RetrievalSettings
    from lostmid.config import settings_from_section

    def settings(**block):
        return settings_from_section(RetrievalSettings, {"lengths": [256, 4096], **block}, "retrieval")

    assert settings(gradient_tasks=[None, ["multikey"]]).gradient_tasks_at(4096) == ("multikey",)
    assert settings(gradient_tasks=[None, ["multikey"]]).gradient_tasks_at(256) == retrieval.TASKS
    assert settings().gradient_tasks_at(4096) == retrieval.TASKS  # empty: every task at every n
    with pytest.raises(ConfigError, match="^config key retrieval.gradient_tasks has 1 entries for 2 lengths"):
        settings(gradient_tasks=[["single"]])
    with pytest.raises(ConfigError, match=r"^config key retrieval.gradient_tasks at n = 4096 names \['flag'\], not"):
        settings(tasks=["single"], gradient_tasks=[None, ["flag"]])


def test_the_record_hash_follows_what_decides_a_windows_rows_not_the_counts():
    from lostmid.architectures.settings import RetrievalSettings
    from lostmid.config import settings_from_section

    def digest(**block):
        return settings_from_section(RetrievalSettings, {"lengths": [256, 4096], **block}, "retrieval").record_hash()

    assert digest() == digest(windows=[9, 3], gradient_windows=[1, 0], resamples=50, record="elsewhere")
    assert digest() != digest(bos=False) and digest() != digest(seed=1) and digest() != digest(measures=["free"])
    block = {"lengths": [256], "windows": [2], "gradient_windows": [0], "twin_windows": [1]}
    jobs = settings_from_section(RetrievalSettings, block, "retrieval")
    assert jobs.window_jobs() == [("pretrained", 256, 0), ("pretrained", 256, 1), ("twin", 256, 0)]


def test_the_task_conditioned_share_is_the_needles_share_of_the_answers_input_gradient():
    model, tok = tiny_model(), tokenizer()
    arch = retrieval.arch_of(model)
    window = stream()[:64]
    example = retrieval.window_examples(
        tok, window, 0, ("single",), (0.5,), 3, 3, 1, retrieval.single_token_words(tok)
    )[0]
    x = model.get_input_embeddings()(example.tokens[None]).detach().requires_grad_(True)
    logp = model(inputs_embeds=x).logits[0, -1].log_softmax(-1)[example.answer[0]]
    (g,) = torch.autograd.grad(logp, x)
    norms = g[0].norm(dim=-1)
    expected = float(norms[example.start : example.stop].sum() / norms.sum())
    assert retrieval.influence_shares(arch, example, checkpoint=False)[0] == pytest.approx(
        expected, rel=1e-6
    )  # its log-softmax in float32


def test_the_bare_share_is_the_needles_positions_share_of_the_top1_gradient_on_the_window_without_it():
    """One backward pass per task gives every q's share; the window's cache comes from the same pass and
    changes no answer; with checkpointing (its own cache pass) the shares are the same."""
    rows = run(gradient_windows=1, measures=("bare",), tasks=("single", "number"))
    again = run(gradient_windows=1, measures=("bare",), tasks=("single", "number"), checkpoint=True)
    plain = run(gradient_windows=1, measures=("task",), tasks=("single", "number"), prefix_reuse=False)
    assert (rows.success == plain.success).all() and np.array_equal(rows.logprob, plain.logprob)
    np.testing.assert_allclose(rows.influence_bare, again.influence_bare, rtol=1e-10)
    first = rows[rows.window == rows.window.iloc[0]]
    assert first.influence_bare.notna().all() and rows[rows.window != rows.window.iloc[0]].influence_bare.isna().all()
    assert rows.influence_free.isna().all() and rows.influence_task.isna().all()  # measures not asked for
    model, tok = tiny_model(), tokenizer()
    order = retrieval.window_order(len(stream()), 64, 7000 + 64)
    window = stream()[order[0] * 64 : (order[0] + 1) * 64]
    lead = [tok.bos_token_id]
    for row in first.itertuples():
        bare = torch.tensor([*lead, *window[: row.query_start - len(lead)]])[None]  # the text, no needle
        x = model.get_input_embeddings()(bare).detach().requires_grad_(True)
        top1 = model(inputs_embeds=x).logits[0, -1].float().softmax(-1).max()
        (g,) = torch.autograd.grad(top1, x)
        norms = g[0].double().norm(dim=-1)
        assert row.influence_bare == pytest.approx(float(norms[row.start : row.stop].sum() / norms.sum()), rel=1e-9)


def test_a_model_the_stage_cannot_use_is_one_line():
    model, tok = tiny_model(positions=64), tokenizer()
    with pytest.raises(ConfigError, match="^retrieval: the model has no tokenizer"):
        retrieval.retrieval_examples(model, None, stream=stream())
    with pytest.raises(
        ConfigError, match="^config key retrieval.lengths: length 128 exceeds the model's 64 positions$"
    ):
        retrieval.retrieval_examples(model, tok, stream=stream(), n=128)
    with pytest.raises(ConfigError, match=r"^retrieval: the number needles, query and answer take \d+ tokens, more "):
        retrieval.retrieval_examples(model, tok, stream=stream(), n=16, tasks=("number",), digits=9)
    with pytest.raises(
        ConfigError, match="^retrieval: the corpus holds 18 disjoint windows of n = 64 tokens, fewer than the 40"
    ):
        retrieval.retrieval_examples(model, tok, stream=stream(), n=64, windows=40)


def planted(separation: float, windows=12, seed=0, twin=True) -> pd.DataFrame:
    """Examples whose success follows the influence share with log-odds slope ``separation`` (0: unrelated)."""
    rng = np.random.default_rng(seed)
    rows = []
    for weights in ("pretrained", "twin") if twin else ("pretrained",):
        for window in range(windows):
            for q in retrieval.FRACTIONS:
                share = rng.uniform(0.01, 0.2)
                success = rng.uniform() < 1 / (1 + np.exp(-separation * (share - 0.1) * 40))
                known = weights == "pretrained"
                rows.append(
                    dict(
                        model="tiny",
                        weights=weights,
                        n=64,
                        positions=96,
                        share=64 / 96,
                        task="single",
                        q=q,
                        window=window,
                        success=bool(success),
                        logprob=-1.0,
                        influence_task=share if known else np.nan,
                        influence_free=share if known else np.nan,
                    )
                )
    return pd.DataFrame(rows)


def evidence_rows(examples: pd.DataFrame) -> pd.DataFrame:
    inputs = claims.Inputs(variants={"baseline": {}}, model={}, retrieval=examples)
    from lostmid.config import settings_from_section

    table = claims.evidence_table(inputs, settings_from_section(EvidenceSettings, None, "evidence"), RETRIEVAL_CLAIMS)
    return table


def test_each_claim_comes_out_supported_contradicted_or_not_evaluable_on_planted_examples():
    strong = evidence_rows(planted(separation=3.0))
    assert set(strong.claim) == {"task_influence_predicts_retrieval", "free_influence_predicts_retrieval"}
    pretrained = strong[strong.setting.str.contains("pretrained")]
    assert (pretrained.verdict == "supported").all() and (pretrained.adjusted_verdict == "supported").all()
    assert (pretrained.n_seeds == 12).all() and (pretrained.family_size == 2).all()
    twin = strong[strong.setting.str.contains("twin")]
    assert (twin.verdict == "inconclusive").all() and twin.method.str.startswith(
        "not evaluable: random-init twin"
    ).all()
    unrelated = evidence_rows(planted(separation=0.0, windows=80, seed=1, twin=False))
    assert (unrelated.verdict == "contradicted").all(), unrelated[["estimate", "ci_low", "ci_high"]]
    always = planted(separation=3.0, twin=False).assign(success=True)
    assert evidence_rows(always).method.str.contains("every one of the 108 examples succeeded").all()


def test_the_auc_and_the_tables_with_intervals_on_planted_examples():
    assert retrieval_summary.auc(np.array([1, 1, 0, 0]), np.array([0.9, 0.8, 0.1, 0.2])) == 1.0
    assert retrieval_summary.auc(np.array([1, 0]), np.array([0.5, 0.5])) == 0.5
    assert np.isnan(retrieval_summary.auc(np.array([1, 1]), np.array([0.1, 0.2])))
    rng = np.random.default_rng(3)
    success, score = rng.uniform(size=40) < 0.5, rng.integers(0, 6, size=40).astype(float)  # many ties
    u = stats.mannwhitneyu(score[success], score[~success]).statistic
    assert retrieval_summary.auc(success, score) == pytest.approx(u / (success.sum() * (~success).sum()), rel=1e-12)
    twice = np.r_[success, success[:5]], np.r_[score, score[:5]]  # multiplicity 2 = the example written twice
    weights = np.r_[np.full(5, 2.0), np.ones(35)][None]
    assert retrieval_summary.auc(success, score, weights)[0] == pytest.approx(retrieval_summary.auc(*twice), rel=1e-12)
    examples = planted(separation=3.0)
    accuracy = retrieval_summary.accuracy_table(examples, resamples=200)
    assert len(accuracy) == 2 * 9 and (accuracy.windows == 12).all()
    assert ((accuracy.accuracy_lo <= accuracy.accuracy) & (accuracy.accuracy <= accuracy.accuracy_hi)).all()
    assert accuracy.query("weights == 'twin'").influence_task.isna().all()
    predictive = retrieval_summary.predictive_table(examples, resamples=200)
    assert list(predictive.measure) == ["task", "free"] and (predictive.weights == "pretrained").all()
    assert (predictive.auc_lo > 0.5).all() and (predictive.examples == 108).all()


def test_the_commands_run_a_saved_model_and_its_twin_into_tables_and_evidence(tmp_path, capsys):
    from lostmid.cli.main import main

    corpus = saved_tiny(tmp_path)
    block = dict(
        model={"path": str(tmp_path / "tiny"), "name": "tiny"},
        lengths=[48],
        windows=[3],
        gradient_windows=[2],
        twin_windows=[1],
        fractions=[0.0, 0.5, 1.0],
        tasks=["single", "flag"],
        corpus=str(corpus),
        resamples=50,
    )
    settings = json.dumps(block)
    jobs = [("pretrained", k) for k in range(3)] + [("twin", 0)]
    record = tmp_path / "run"  # a run's record: its overlay and one Parquet per window
    windows = [record / "windows" / f"{weights}_n48_w{k}.parquet" for weights, k in jobs]
    done = tmp_path / "done.json"
    blocks = [("pretrained", 0), ("pretrained", 1), ("twin", 0)]  # blocks of 2 windows: 0-1 and 2; the twin's 0
    for weights, b in blocks:
        job = ["--n", "48", "--block", str(b), *(["--twin"] if weights == "twin" else []), "--record", str(record)]
        assert main(["retrieval", "--settings", json.dumps({**block, "block": 2}), *job, "--done", str(done)]) == 0
    assert json.loads(done.read_text()) == [str(windows[-1])] and all(path.exists() for path in windows)
    assert main(["retrieval-corpus", "--settings", settings, "--out", str(tmp_path / "corpus.json")]) == 0
    assert json.loads((tmp_path / "corpus.json").read_text())["windows"] == {"48": 8}
    out = {name: str(tmp_path / f"{name}.parquet") for name in ("examples", "accuracy", "predictive")}
    summary = ["retrieval-summary", "--settings", settings, "--windows", *map(str, windows)]
    assert main([*summary, *(f"--{k}={v}" for k, v in out.items()), "--figure", str(tmp_path / "f.png")]) == 0
    examples = pd.read_parquet(out["examples"])
    assert len(examples) == (3 + 1) * 2 * 3 and set(examples.weights) == {"pretrained", "twin"}
    assert (examples.share == 48 / 96).all() and examples.query("weights == 'twin'").influence_task.isna().all()
    assert examples.query("weights == 'pretrained'").groupby("draw").influence_free.count().tolist() == [6, 6, 0]
    evidence = ["evidence", "--variants", '{"baseline": {}}', "--family", "retrieval", "--retrieval", out["examples"]]
    assert main([*evidence, "--out", str(tmp_path / "evidence.parquet")]) == 0
    table = pd.read_parquet(tmp_path / "evidence.parquet")
    assert len(table) == 2 * 2 * 2 and set(table.claim) == {c.name for c in RETRIEVAL_CLAIMS}
    (record / "overlay.yaml").write_text(json.dumps({"retrieval": block}))  # JSON is YAML
    assert main(["retrieval-page", "--record", str(record)]) == 0
    page = (record / "README.md").read_text()
    assert "Windows: pretrained n = 48: 3 windows (2 with the task-free share); twin n = 48: 1 windows" in page
    primaries = pd.read_parquet(record / "tables" / "primaries.parquet")
    assert {"middle_minus_ends", "influence_beyond_position"} <= set(primaries.estimator)
    assert (record / "retrieval.png").exists() and "| middle_minus_ends | success | 3 |" in page
    capsys.readouterr()
    other = json.dumps({**block, "seed": 1})  # another draw of keys: the records are not this run's
    assert main([*summary[:2], other, *summary[3:], *(f"--{k}={v}" for k, v in out.items())]) == 2
    assert f"error: retrieval: the window record {windows[0]} was made under another configuration" in (
        capsys.readouterr().err
    )
    many = json.dumps({**block, "windows": [9], "twin_windows": [1]})
    assert main(["retrieval-corpus", "--settings", many, "--out", str(tmp_path / "corpus.json")]) == 2
    assert "error: retrieval: the corpus holds 8 disjoint windows of n = 48 tokens, fewer than the 9" in (
        capsys.readouterr().err
    )
    capsys.readouterr()
    long = json.dumps({**block, "lengths": [4096], "windows": [1], "gradient_windows": [0], "twin_windows": [0]})
    job = ["--n", "4096", "--block", "0", "--record", str(tmp_path / "long"), "--done", str(done)]
    assert main(["retrieval", "--settings", long, *job]) == 2
    assert "error: config key retrieval.model: length 4096 exceeds the 96 positions of" in capsys.readouterr().err
    tiny_model(torch.float32).save_pretrained(tmp_path / "bare")  # no tokenizer saved beside it
    bare = json.dumps({**block, "model": {"path": str(tmp_path / "bare")}})
    job = ["--n", "48", "--block", "0", "--record", str(tmp_path / "bare_run"), "--done", str(done)]
    assert main(["retrieval", "--settings", bare, *job]) == 2
    assert "has no tokenizer; the retrieval tasks are written as text" in capsys.readouterr().err


def test_each_row_of_the_figure_names_the_windows_behind_it():
    rows = [
        dict(n=256, share=256 / 8192, weights="pretrained", windows=12),
        dict(n=256, share=256 / 8192, weights="twin", windows=8),
        dict(n=4096, share=4096 / 8192, weights="pretrained", windows=3),
    ]
    accuracy = pd.DataFrame(rows)
    titles = [plots_retrieval.accuracy_title(accuracy.query("n == @n")) for n in (256, 4096)]
    assert titles == [
        "n = 256 (0.0312 of the window; 12 windows, twin 8)",
        "n = 4096 (0.5 of the window; 3 windows)",
    ]


def test_success_of_a_multi_token_answer_is_greedy_decoding_reproducing_it():
    model, tok = tiny_model(), tokenizer()
    arch = retrieval.arch_of(model)
    window = stream()[:64]
    vocabulary = retrieval.single_token_words(tok)
    example = retrieval.window_examples(tok, window, 0, ("number",), (0.25,), 3, 3, 2, vocabulary)[0]
    k = len(example.answer)
    prompt = example.tokens[: 64 - k + 1]  # up to the end of the query
    greedy = model.generate(prompt[None], max_new_tokens=k, do_sample=False, pad_token_id=0)[0, -k:].tolist()
    for answer, expected in ((greedy, True), ([*greedy[:-1], (greedy[-1] + 1) % len(VOCAB)], False)):
        tokens = torch.cat([prompt, torch.tensor(answer[:-1])])
        planted_answer = retrieval.Example(**{**example.__dict__, "tokens": tokens, "answer": answer})
        cache = retrieval.window_pass(arch, torch.from_numpy(window))[0]
        assert retrieval.score(arch, planted_answer, cache)[0] is expected
        assert retrieval.score(arch, planted_answer)[0] is expected


def test_the_results_page_shows_the_stage_only_for_a_run_that_has_it(tmp_path):
    from lostmid.cli.results import retrieval_section

    assert retrieval_section(tmp_path) == []
    examples = planted(separation=3.0)
    (tmp_path / "retrieval").mkdir()
    retrieval_summary.accuracy_table(examples, resamples=50).to_parquet(tmp_path / "retrieval" / "accuracy.parquet")
    retrieval_summary.predictive_table(examples, resamples=50).to_parquet(tmp_path / "retrieval" / "predictive.parquet")
    heading, text = retrieval_section(tmp_path)
    assert (
        heading.startswith("## Retrieval")
        and "| q = 0.5 |" in text
        and "| tiny | pretrained | 64 | single | task |" in text
    )
