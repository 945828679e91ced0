"""Retrieval on real text: a needle at every fraction q of a window, does the model retrieve it, and how much
influence does the needle have (docs/retrieval.md has the definitions, the deviations from RULER and a
runnable example).

Entry points:

    retrieval_examples(model, tokenizer, ...)   a notebook's call: any Hugging Face causal LM with its
        tokenizer to one row per (task, q, window): success, the answer's log-probability and the two
        influence shares of the needle
    (the stage's jobs, a block of windows each, and its corpus check: ``retrieval_jobs``)

Tasks (``TASKS``; K, K_i keys and V, V_i values drawn per window, absent from the window):

    single    " The code word for K is V." at q; query " The code word for K is"; answer " V" (one token)
    multikey  the same with ``keys`` pairs, the queried one at q, the others at seeded uniform places
    flag      the flag-recall task in text: " K V" at q, query " K" (so "... K V ... K" should predict V)
    number    RULER's NIAH needle " The special magic number for K is N." with N a ``digits``-digit number;
              query " The special magic number for K is"; answer " N" (several tokens), greedy exact match

The model input has exactly n tokens: the tokenizer's BOS token (``bos``; the old input without it is the
reading ``bos: false``), the haystack (the first H tokens of one of the corpus's disjoint windows of n
tokens), the needles, the query and the answer's tokens but its last (teacher forcing), so
that one forward pass scores every answer token. Success: every answer token is the top-1 next token over
the whole vocabulary (for one token: top-1; for several: greedy decoding reproduces the answer exactly,
because greedy decoding follows the teacher-forced prefix as long as it matches). log p(answer): the sum of
the answer tokens' log-probabilities.

Influence shares of the queried needle (tokens s..e-1), with g_j the gradient of a scalar with respect to
the input embedding of token j (``MEASURES``):

    task      task-conditioned: sum_{j in needle} ||g_j|| / sum_{j < n} ||g_j||  for the scalar log p(answer)
    free      task-free: the same share for the top-1 probability at the last token before the query (the
              architectures stage's ``top1`` target on the input without the query: causal, so the same
              forward pass serves both; one backward pass each, per example)
    bare      task-free, of the needle's *positions* in the haystack *without* the needle: the same target
              on the bare window (the lead ids, then the window's first query_start - len(lead) tokens),
              the share of the positions s..e-1 the needle takes in the example. The bare window is the
              same for every q of a task, so one backward pass per task gives every q's share, and its
              forward pass is the one that fills the key-value cache (below): 2 backward passes a window
              instead of 18 forward and 18 backward passes for ``free``. It measures where the model looks
              in the text before anything is put there, not the needle's own pull.

Gradients are taken with the model's parameters out of autograd (``models.frozen``): the input gradient is
the same, bit for bit, and no weight gradient is computed.

Prefix reuse (``prefix_reuse``): the tokens before the first needle are the window's own first tokens for
every task and q, so one forward pass of the bare window gives the key-value cache that every example of
the window reuses; each example runs only from its first needle on. Forward passes only: the gradients need
every position's embedding.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from lostmid.architectures import bounded, measure, models, text
from lostmid.architectures.pretrained import CHECKPOINT_FROM, arch_of, check_length
from lostmid.errors import ConfigError

log = logging.getLogger(__name__)

TASKS = ("single", "multikey", "flag", "number")
MEASURES = ("task", "free", "bare")  # the influence shares: task-conditioned, task-free, task-free without the needle
EXAMPLE_MEASURES = ("task", "free")  # those taken per example (``bare``: per task of a window)
FRACTIONS = (0.0, 0.125, 0.25, 0.375, 0.5, 0.625, 0.75, 0.875, 1.0)
# Keys and values: concrete nouns, rare in technical prose; those the tokenizer writes as one token (with a
# leading space) and that do not occur in a window are drawn for it.
WORDS = tuple(
    """apple tiger piano candle garden violet dragon marble castle falcon pepper lemon copper meadow banana
    tomato hammer pencil rabbit monkey planet winter summer coffee butter ocean forest river cloud rocket
    orange thunder silver bridge anchor horse camel zebra eagle parrot onion carrot potato cherry grape
    mango peach olive tulip daisy lily rose maple cedar willow pearl ruby amber jacket boots glove violin
    guitar drum flute kettle spoon basket""".split()
)


@dataclass(frozen=True)
class Template:
    needle: str
    query: str


TEMPLATES = {
    "single": Template(" The code word for {key} is {value}.", " The code word for {key} is"),
    "multikey": Template(" The code word for {key} is {value}.", " The code word for {key} is"),
    "flag": Template(" {key} {value}", " {key}"),
    "number": Template(" The special magic number for {key} is {value}.", " The special magic number for {key} is"),
}


@dataclass
class Example:
    """One model input: ``tokens`` (n,), the queried needle at [start, stop), the query from ``query_start``,
    the answer's tokens, and ``prefix``, the tokens before the first needle (the window's own)."""

    task: str
    q: float
    window: int
    tokens: torch.Tensor
    start: int
    stop: int
    query_start: int
    answer: list
    prefix: int


def encode(tokenizer, words: str) -> list:
    return list(tokenizer(words, add_special_tokens=False)["input_ids"])


def single_token_words(tokenizer, words=WORDS) -> dict:
    """word -> the ids that write it alone (with and without a leading space), for words written as one token
    (not the unknown token)."""
    found = {}
    for word in words:
        spaced = encode(tokenizer, " " + word)
        if len(spaced) == 1 and spaced[0] != tokenizer.unk_token_id:
            found[word] = {spaced[0], *encode(tokenizer, word)[:1]}
    return found


def occurs(part: list, stream: np.ndarray) -> bool:
    """Whether the token sequence ``part`` occurs contiguously in ``stream``."""
    if len(part) == 1:
        return bool((stream == part[0]).any())
    view = np.lib.stride_tricks.sliding_window_view(stream, len(part))
    return bool((view == np.asarray(part)).all(1).any())


def draw_pairs(tokenizer, task: str, pairs: int, window: np.ndarray, vocabulary: dict, digits: int, rng) -> list:
    """``pairs`` (key, value) pairs, all words distinct and absent from ``window``; the number task's values
    are ``digits``-digit numbers whose tokens do not occur in it either (drawn again until they do not)."""
    absent = sorted(word for word, ids in vocabulary.items() if not any(occurs([i], window) for i in ids))
    needed = pairs if task == "number" else 2 * pairs
    if len(absent) < needed:
        raise ConfigError(
            f"retrieval: only {len(absent)} of the key and value words are single tokens absent from a window "
            f"({needed} needed for {task}); fewer keys or a tokenizer that writes the words as one token"
        )
    words = list(rng.choice(absent, size=needed, replace=False))
    keys = words[:pairs]
    if task != "number":
        return list(zip(keys, words[pairs:]))
    values = []
    while len(values) < pairs:
        value = str(rng.integers(10 ** (digits - 1), 10**digits))
        if value not in values and not occurs(encode(tokenizer, " " + value), window):
            values.append(value)
    return list(zip(keys, values))


def leading_ids(tokenizer, bos: bool) -> list:
    """The ids before the haystack: the tokenizer's BOS token (``bos``), or none (the old input, whose first
    haystack token sits at position 0, the attention sink)."""
    if not bos:
        return []
    if tokenizer.bos_token_id is None:
        raise ConfigError(
            "config key retrieval.bos is true but the tokenizer has no BOS token; set retrieval.bos: false "
            "(the window's first token at position 0)"
        )
    return [tokenizer.bos_token_id]


def build_example(tokenizer, task, q, index, window, pairs, places, lead=()) -> Example:
    """The input of one (task, q, window): the ``lead`` ids (the BOS token or none), the window's first H tokens
    with the queried pair's needle at round(q H) and the other pairs' needles at ``places`` (fractions), then
    the query and the answer's tokens but its last; H makes the input exactly len(window) tokens."""
    template = TEMPLATES[task]
    needles = [encode(tokenizer, template.needle.format(key=k, value=v)) for k, v in pairs]
    (key, value), n = pairs[0], len(window)
    query = encode(tokenizer, template.query.format(key=key))
    answer = encode(tokenizer, " " + value)
    haystack = n - len(lead) - sum(map(len, needles)) - len(query) - (len(answer) - 1)
    if haystack < 1:
        raise ConfigError(
            f"retrieval: the {task} needles, query and answer take {n - haystack} tokens, more than the window "
            f"of n = {n} holds"
        )
    at = [round(q * haystack), *(round(f * haystack) for f in places)]
    order = sorted(range(len(needles)), key=lambda i: (at[i], i > 0))  # the queried needle first on ties
    parts, done, start = [np.asarray(lead, dtype=np.int64)], 0, 0
    length = len(lead)
    for i in order:
        parts.append(window[done : at[i]])
        length += at[i] - done
        if i == 0:
            start = length
        parts.append(np.asarray(needles[i]))
        length += len(needles[i])
        done = at[i]
    parts += [window[done:haystack], np.asarray(query + answer[:-1])]
    tokens = torch.from_numpy(np.concatenate(parts).astype(np.int64))
    return Example(
        task,
        q,
        index,
        tokens,
        start,
        start + len(needles[0]),
        n - len(query) - len(answer) + 1,
        answer,
        len(lead) + min(at),
    )


def window_examples(tokenizer, window, index, tasks, fractions, keys, digits, rng_seed, vocabulary, lead=()) -> list:
    """Every (task, q) example of one window; keys, values and distractor places drawn once per task."""
    found = []
    for t, task in enumerate(tasks):
        rng = np.random.default_rng([rng_seed, t])
        pairs = draw_pairs(tokenizer, task, keys if task == "multikey" else 1, window, vocabulary, digits, rng)
        places = rng.uniform(size=len(pairs) - 1)
        found += [build_example(tokenizer, task, q, index, window, pairs, places, lead) for q in fractions]
    return found


def window_pass(arch: models.Arch, window: torch.Tensor, lead=(), examples=(), checkpoint: bool = False):
    """(key-value cache, bare shares) of one pass over the bare window: the ``lead`` ids and the window, n
    positions in all. The shares (``bare`` in the module docstring) are {(task, q): share} of ``examples``, one
    backward pass per distinct last position before the query (one per task); no examples: the cache alone,
    without gradients. The cache is the same, bit for bit, with or without gradients; with ``checkpoint``
    (layers recomputed in the backward pass, which would write the cache twice) it comes from a pass of its own.
    """
    context = torch.cat([torch.tensor(list(lead), dtype=window.dtype, device=window.device), window])[: len(window)]
    base = arch.model.base_model
    if not examples or checkpoint:
        with torch.no_grad():
            cache = base(context[None], use_cache=True).past_key_values
        return cache, (bare_shares(arch, context, examples, checkpoint) if examples else {})
    shares, cache = bare_shares(arch, context, examples, False, use_cache=True)
    return cache_prefix(cache, len(context)), shares


def bare_shares(arch: models.Arch, context: torch.Tensor, examples, checkpoint: bool, use_cache: bool = False):
    """{(task, q): the ``bare`` share} of each of ``examples`` on the bare window ``context`` (n,); with
    ``use_cache`` also the pass's key-value cache."""
    base, head, embedding = arch.model.base_model, arch.model.get_output_embeddings(), arch.model.get_input_embeddings()
    layers = [layer for layer, _ in models.layers(arch)] if checkpoint else []
    lasts = sorted({example.query_start - 1 for example in examples})
    shares = {}
    with models.frozen(arch.model), bounded.checkpointed(layers), torch.enable_grad():
        # The whole window where its cache is kept (every task's prefix reads it), else up to the last target.
        x = embedding(context[None, : None if use_cache else lasts[-1] + 1]).detach().requires_grad_(True)  # (1, m, d)
        out = base(inputs_embeds=x, use_cache=use_cache)
        for k, last in enumerate(lasts):
            scalar = measure.target_sum("top1", head(out.last_hidden_state[:, last]))
            (g,) = torch.autograd.grad(scalar, x, retain_graph=k < len(lasts) - 1)
            norms = g[0, : last + 1].detach().double().norm(dim=-1)  # (last + 1,)
            for example in examples:
                if example.query_start - 1 == last:
                    shares[example.task, example.q] = needle_share(norms, example.start, example.stop)
    return (shares, out.past_key_values) if use_cache else shares


def cache_prefix(cache, length: int):
    """A new cache holding the first ``length`` positions of ``cache``, out of autograd (the full one stays as it
    is)."""
    from transformers import DynamicCache

    return DynamicCache(
        [(layer.keys[..., :length, :].detach(), layer.values[..., :length, :].detach()) for layer in cache.layers]
    )


def score(arch: models.Arch, example: Example, cache=None) -> tuple[bool, float]:
    """(success, log p(answer)) of one example; with ``cache`` (the bare window's) only the tokens from the
    first needle on are run."""
    base, head = arch.model.base_model, arch.model.get_output_embeddings()
    k = len(example.answer)
    with torch.no_grad():
        if cache is None or example.prefix == 0:
            hidden = base(example.tokens[None], use_cache=False).last_hidden_state
        else:
            past = cache_prefix(cache, example.prefix)
            hidden = base(
                example.tokens[None, example.prefix :], past_key_values=past, use_cache=True
            ).last_hidden_state
        logp = head(hidden[0, -k:]).float().log_softmax(-1)  # (k, V)
    answer = torch.tensor(example.answer, device=logp.device)
    return bool((logp.argmax(-1) == answer).all()), float(logp[torch.arange(k), answer].sum())


def influence_shares(
    arch: models.Arch, example: Example, checkpoint: bool, measures=EXAMPLE_MEASURES
) -> tuple[float, float]:
    """(task-conditioned, task-free) share of the queried needle's tokens (module docstring), NaN for a measure
    not in ``measures``: one forward pass, one backward pass per measure. The task-free share alone needs only
    the tokens before the query (the model is causal)."""
    base, head, embedding = arch.model.base_model, arch.model.get_output_embeddings(), arch.model.get_input_embeddings()
    k, last = len(example.answer), example.query_start - 1
    tokens = example.tokens if "task" in measures else example.tokens[: example.query_start]
    layers = [layer for layer, _ in models.layers(arch)] if checkpoint else []
    shares = {}
    with models.frozen(arch.model), bounded.checkpointed(layers), torch.enable_grad():
        x = embedding(tokens[None]).detach().requires_grad_(True)  # (1, n, d)
        hidden = base(inputs_embeds=x, use_cache=False).last_hidden_state  # (1, n, d)
        scalars = {}
        if "task" in measures:
            logp = head(hidden[0, -k:]).float().log_softmax(-1)  # (k, V)
            scalars["task"] = logp[torch.arange(k), torch.tensor(example.answer, device=logp.device)].sum()
        if "free" in measures:
            scalars["free"] = measure.target_sum("top1", head(hidden[:, last]))
        for i, (name, scalar) in enumerate(scalars.items()):
            (g,) = torch.autograd.grad(scalar, x, retain_graph=i < len(scalars) - 1)
            shares[name] = needle_share(g[0].detach().double().norm(dim=-1), example.start, example.stop)
    return tuple(shares.get(name, np.nan) for name in EXAMPLE_MEASURES)


def needle_share(norms: torch.Tensor, start: int, stop: int) -> float:
    """sum_{start <= j < stop} norms_j / sum_j norms_j (norms (n,): ||g_j|| per position)."""
    return float(norms[start:stop].sum() / norms.sum())


def window_order(tokens: int, n: int, seed: int) -> np.ndarray:
    """The floor(tokens / n) disjoint windows of n tokens in the order the stage takes them, a permutation
    drawn with ``seed``: W windows are the first W (so a run with more windows keeps the earlier ones)."""
    available = tokens // n
    if available == 0:
        raise ConfigError(f"retrieval: the corpus has {tokens} tokens, fewer than one window of n = {n}")
    return np.random.default_rng(seed).permutation(available)


def check_windows(tokens: int, n: int, asked: int) -> None:
    """One line where the corpus of ``tokens`` tokens holds fewer disjoint windows of n tokens than ``asked``."""
    if asked > tokens // n:
        raise ConfigError(
            f"retrieval: the corpus holds {tokens // n} disjoint windows of n = {n} tokens, fewer than the "
            f"{asked} windows asked (retrieval.windows)"
        )


@dataclass(frozen=True)
class Plan:
    """What every window of one model at one n shares: the tasks, positions and draws, the leading ids
    (BOS or none), and which influence measures (``measures``) are taken on which tasks."""

    n: int
    tasks: tuple
    fractions: tuple
    keys: int
    digits: int
    seed: int
    lead: tuple
    prefix_reuse: bool
    gradient_tasks: tuple
    measures: tuple
    checkpoint: bool
    name: str
    weights: str


def window_rows(arch: models.Arch, tokenizer, plan: Plan, window: torch.Tensor, index: int, gradients, vocabulary):
    """The rows (``retrieval_examples``) of one window of n tokens, the ``index``-th of the corpus; the
    influence shares where ``gradients`` (NaN elsewhere)."""
    device = next(arch.model.parameters()).device
    examples = window_examples(
        tokenizer,
        window.numpy(),
        index,
        plan.tasks,
        plan.fractions,
        plan.keys,
        plan.digits,
        plan.seed + plan.n + index,
        vocabulary,
        plan.lead,
    )
    measured = [e.task in plan.gradient_tasks for e in examples] if gradients else [False] * len(examples)
    bare = [e for e, m in zip(examples, measured) if m] if "bare" in plan.measures else []
    cache, shares = (None, {})
    if plan.prefix_reuse or bare:
        cache, shares = window_pass(arch, window.to(device), plan.lead, bare, plan.checkpoint)
    cache = cache if plan.prefix_reuse else None
    per_example = tuple(m for m in plan.measures if m in EXAMPLE_MEASURES)
    rows = []
    for example, measure_it in zip(examples, measured):
        example.tokens = example.tokens.to(device)
        success, logprob = score(arch, example, cache)
        task, free = (
            influence_shares(arch, example, plan.checkpoint, per_example)
            if measure_it and per_example
            else (np.nan, np.nan)
        )
        rows.append(
            {
                "model": plan.name,
                "weights": plan.weights,
                "positions": arch.max_length,
                "share": plan.n / arch.max_length,
                "task": example.task,
                "q": example.q,
                "window": example.window,
                "n": plan.n,
                "bos": bool(plan.lead),
                "start": example.start,
                "stop": example.stop,
                "query_start": example.query_start,
                "prefix": example.prefix if plan.prefix_reuse else 0,
                "success": success,
                "logprob": logprob,
                "influence_task": task,
                "influence_free": free,
                "influence_bare": shares.get((example.task, example.q), np.nan),
            }
        )
    return pd.DataFrame(rows)


def retrieval_examples(
    model,
    tokenizer,
    *,
    corpus: str = "pydoc_data.topics",
    n: int = 256,
    windows: int = 4,
    gradient_windows: int | None = None,
    gradient_tasks=None,
    measures=MEASURES,
    fractions=FRACTIONS,
    tasks=TASKS,
    keys: int = 8,
    digits: int = 7,
    seed: int = 7000,
    bos: bool = True,
    prefix_reuse: bool = True,
    checkpoint: bool | None = None,
    words=WORDS,
    stream: np.ndarray | None = None,
    first: int = 0,
    limit: int | None = None,
    name: str = "model",
    weights: str = "pretrained",
) -> pd.DataFrame:
    """One row per (task, q, window) of a Hugging Face causal LM with its tokenizer: model (``name``),
    weights (``weights``: pretrained | twin), positions (the model's), share (n / positions), task, q, window
    (the window's index in the corpus), n, bos, start, stop, query_start, prefix, success, logprob,
    influence_task, influence_free, influence_bare (NaN beyond the first ``gradient_windows`` windows, None:
    every window, for the tasks not in ``gradient_tasks``, None: every task, and for a measure not in
    ``measures``).

    The windows: the first ``windows`` of the corpus's disjoint windows of n tokens (``text.corpus_ids`` of
    ``corpus``, or the token ``stream``) in the order ``window_order`` draws with ``seed + n``; keys, values
    and distractor places with (seed + n + window index, task). ``bos``: the tokenizer's BOS token before the
    haystack. ``checkpoint`` None: from n = ``pretrained.CHECKPOINT_FROM`` on (memory only). ``first`` and
    ``limit``: run only the windows first .. first + limit - 1 of them (a job runs one; the twin the first
    few of the model's).
    """
    if tokenizer is None:
        raise ConfigError("retrieval: the model has no tokenizer; the retrieval tasks are written as text")
    arch = model if isinstance(model, models.Arch) else arch_of(model)
    check_length(arch, n, "retrieval.lengths")
    bad = sorted(set(tasks) - set(TASKS))
    if bad:
        raise ConfigError(f"retrieval: unknown tasks {bad} (known: {', '.join(TASKS)})")
    lead = tuple(leading_ids(tokenizer, bos))
    stream = text.corpus_ids(tokenizer, corpus, "retrieval.corpus") if stream is None else stream
    check_windows(len(stream), n, windows)
    plan = Plan(
        n,
        tuple(tasks),
        tuple(fractions),
        keys,
        digits,
        seed,
        lead,
        prefix_reuse,
        tuple(tasks if gradient_tasks is None else gradient_tasks),
        tuple(measures),
        n >= CHECKPOINT_FROM if checkpoint is None else checkpoint,
        name,
        weights,
    )
    gradient_windows = windows if gradient_windows is None else gradient_windows
    vocabulary = single_token_words(tokenizer, words)
    order = window_order(len(stream), n, seed + n)
    found = []
    for k in range(first, windows if limit is None else min(first + limit, windows)):
        start = time.perf_counter()
        index = int(order[k])
        window = torch.from_numpy(stream[index * n : (index + 1) * n])
        found.append(window_rows(arch, tokenizer, plan, window, index, k < gradient_windows, vocabulary))
        log.info(
            "n=%d window %d of %d (corpus window %d): accuracy %.2f, %s, %.1f s",
            n,
            k,
            windows,
            index,
            found[-1].success.mean(),
            f"with gradients ({', '.join(plan.gradient_tasks)})" if k < gradient_windows else "forward only",
            time.perf_counter() - start,
        )
    return pd.concat(found, ignore_index=True)
