"""Retrieval on real text: a needle at every fraction q of a window, does the model retrieve it, and how much
influence does the needle have (docs/retrieval.md has the definitions, the deviations from RULER and a
runnable example).

Entry points:

    retrieval_examples(model, tokenizer, ...)   a notebook's call: any Hugging Face causal LM with its
        tokenizer to one row per (task, q, window): success, the answer's log-probability and the two
        influence shares of the needle
    retrieval_job(settings, twin, n, device)    the stage's job: one model (or its random-init twin) at one n

Tasks (``TASKS``; K, K_i keys and V, V_i values drawn per window, absent from the window):

    single    " The code word for K is V." at q; query " The code word for K is"; answer " V" (one token)
    multikey  the same with ``keys`` pairs, the queried one at q, the others at seeded uniform places
    flag      the flag-recall task in text: " K V" at q, query " K" (so "... K V ... K" should predict V)
    number    RULER's NIAH needle " The special magic number for K is N." with N a ``digits``-digit number;
              query " The special magic number for K is"; answer " N" (several tokens), greedy exact match

The model input has exactly n tokens: the haystack (the first H tokens of one of the corpus's disjoint
windows of n tokens), the needles, the query and the answer's tokens but its last (teacher forcing), so
that one forward pass scores every answer token. Success: every answer token is the top-1 next token over
the whole vocabulary (for one token: top-1; for several: greedy decoding reproduces the answer exactly,
because greedy decoding follows the teacher-forced prefix as long as it matches). log p(answer): the sum of
the answer tokens' log-probabilities.

Influence shares of the queried needle (tokens s..e-1), with g_j the gradient of a scalar with respect to
the input embedding of token j:

    task-conditioned  sum_{j in needle} ||g_j|| / sum_{j < n} ||g_j||  for the scalar log p(answer)
    task-free         the same share for the top-1 probability at the last token before the query (the
                      architectures stage's ``top1`` target on the window without the query: causal, so
                      the same forward pass serves both; one backward pass each)

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
from lostmid.architectures.pretrained import CHECKPOINT_FROM, arch_of, check_length, entry_name
from lostmid.errors import ConfigError

log = logging.getLogger(__name__)

TASKS = ("single", "multikey", "flag", "number")
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


def build_example(tokenizer, task, q, index, window, pairs, places) -> Example:
    """The input of one (task, q, window): the window's first H tokens with the queried pair's needle at
    round(q H) and the other pairs' needles at ``places`` (fractions), then the query and the answer's
    tokens but its last; H makes the input exactly len(window) tokens."""
    template = TEMPLATES[task]
    needles = [encode(tokenizer, template.needle.format(key=k, value=v)) for k, v in pairs]
    (key, value), n = pairs[0], len(window)
    query = encode(tokenizer, template.query.format(key=key))
    answer = encode(tokenizer, " " + value)
    haystack = n - sum(map(len, needles)) - len(query) - (len(answer) - 1)
    if haystack < 1:
        raise ConfigError(
            f"retrieval: the {task} needles, query and answer take {n - haystack} tokens, more than the window "
            f"of n = {n} holds"
        )
    at = [round(q * haystack), *(round(f * haystack) for f in places)]
    order = sorted(range(len(needles)), key=lambda i: (at[i], i > 0))  # the queried needle first on ties
    parts, done, start = [], 0, 0
    length = 0
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
        task, q, index, tokens, start, start + len(needles[0]), n - len(query) - len(answer) + 1, answer, min(at)
    )


def window_examples(tokenizer, window, index, tasks, fractions, keys, digits, rng_seed, vocabulary) -> list:
    """Every (task, q) example of one window; keys, values and distractor places drawn once per task."""
    found = []
    for t, task in enumerate(tasks):
        rng = np.random.default_rng([rng_seed, t])
        pairs = draw_pairs(tokenizer, task, keys if task == "multikey" else 1, window, vocabulary, digits, rng)
        places = rng.uniform(size=len(pairs) - 1)
        found += [build_example(tokenizer, task, q, index, window, pairs, places) for q in fractions]
    return found


def window_cache(arch: models.Arch, window: torch.Tensor):
    """The key-value cache of the bare window (1, n) (no gradients)."""
    with torch.no_grad():
        return arch.model.base_model(window[None], use_cache=True).past_key_values


def cache_prefix(cache, length: int):
    """A new cache holding the first ``length`` positions of ``cache`` (the full one stays as it is)."""
    from transformers import DynamicCache

    return DynamicCache([(layer.keys[..., :length, :], layer.values[..., :length, :]) for layer in cache.layers])


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


def influence_shares(arch: models.Arch, example: Example, checkpoint: bool) -> tuple[float, float]:
    """(task-conditioned, task-free) share of the queried needle's tokens (module docstring): one forward
    pass, one backward pass per scalar."""
    base, head, embedding = arch.model.base_model, arch.model.get_output_embeddings(), arch.model.get_input_embeddings()
    k, last = len(example.answer), example.query_start - 1
    layers = [layer for layer, _ in models.layers(arch)] if checkpoint else []
    with bounded.checkpointed(layers), torch.enable_grad():
        x = embedding(example.tokens[None]).detach().requires_grad_(True)  # (1, n, d)
        hidden = base(inputs_embeds=x, use_cache=False).last_hidden_state  # (1, n, d)
        logp = head(hidden[0, -k:]).float().log_softmax(-1)  # (k, V)
        answer_logp = logp[torch.arange(k), torch.tensor(example.answer, device=logp.device)].sum()
        top1 = measure.target_sum("top1", head(hidden[:, last]))
        (task,) = torch.autograd.grad(answer_logp, x, retain_graph=True)
        (free,) = torch.autograd.grad(top1, x)
    return tuple(needle_share(g[0].detach().double().norm(dim=-1), example.start, example.stop) for g in (task, free))


def needle_share(norms: torch.Tensor, start: int, stop: int) -> float:
    """sum_{start <= j < stop} norms_j / sum_j norms_j (norms (n,): ||g_j|| per position)."""
    return float(norms[start:stop].sum() / norms.sum())


def retrieval_examples(
    model,
    tokenizer,
    *,
    corpus: str = "pydoc_data.topics",
    n: int = 256,
    windows: int = 4,
    gradient_windows: int | None = None,
    gradient_tasks=None,
    fractions=FRACTIONS,
    tasks=TASKS,
    keys: int = 8,
    digits: int = 7,
    seed: int = 7000,
    prefix_reuse: bool = True,
    checkpoint: bool | None = None,
    words=WORDS,
    stream: np.ndarray | None = None,
    limit: int | None = None,
    name: str = "model",
    weights: str = "pretrained",
) -> pd.DataFrame:
    """One row per (task, q, window) of a Hugging Face causal LM with its tokenizer: model (``name``),
    weights (``weights``: pretrained | twin), positions (the model's), share (n / positions), task, q, window
    (the window's index in the corpus), n, start, stop, query_start, prefix, success, logprob, influence_task,
    influence_free (NaN beyond the first ``gradient_windows`` windows, None: every window, and for the tasks
    not in ``gradient_tasks``, None: every task).

    ``windows`` disjoint windows of n tokens of ``corpus`` (``text.corpus_ids``; or the token ``stream``)
    drawn with ``seed + n``; keys, values and distractor places with (seed + n + window index, task).
    ``checkpoint`` None: from n = ``pretrained.CHECKPOINT_FROM`` on (memory only). ``limit``: run only the
    first ``limit`` of the drawn windows (the twin reads the first of the model's windows).
    """
    if tokenizer is None:
        raise ConfigError("retrieval: the model has no tokenizer; the retrieval tasks are written as text")
    arch = model if isinstance(model, models.Arch) else arch_of(model)
    check_length(arch, n, "retrieval.lengths")
    bad = sorted(set(tasks) - set(TASKS))
    if bad:
        raise ConfigError(f"retrieval: unknown tasks {bad} (known: {', '.join(TASKS)})")
    stream = text.corpus_ids(tokenizer, corpus, "retrieval.corpus") if stream is None else stream
    available = len(stream) // n
    if windows > available:
        raise ConfigError(
            f"retrieval: the corpus holds {available} disjoint windows of n = {n} tokens, fewer than the "
            f"{windows} windows asked"
        )
    gradient_windows = windows if gradient_windows is None else gradient_windows
    gradient_tasks = tasks if gradient_tasks is None else gradient_tasks
    checkpoint = n >= CHECKPOINT_FROM if checkpoint is None else checkpoint
    vocabulary = single_token_words(tokenizer, words)
    device = next(arch.model.parameters()).device
    chosen = text.windows(stream, n, windows, seed + n)  # (W, n), in corpus order
    indices = text.window_indices(len(stream), n, windows, seed + n)
    rows = []
    run = windows if limit is None else min(limit, windows)
    for w, (window, index) in enumerate(zip(chosen[:run], indices[:run])):
        start = time.perf_counter()
        examples = window_examples(
            tokenizer, window.numpy(), int(index), tasks, fractions, keys, digits, seed + n + int(index), vocabulary
        )
        cache = window_cache(arch, window.to(device)) if prefix_reuse else None
        for example in examples:
            example.tokens = example.tokens.to(device)
            success, logprob = score(arch, example, cache)
            measured = w < gradient_windows and example.task in gradient_tasks
            shares = influence_shares(arch, example, checkpoint) if measured else (np.nan, np.nan)
            rows.append(
                {
                    "model": name,
                    "weights": weights,
                    "positions": arch.max_length,
                    "share": n / arch.max_length,
                    "task": example.task,
                    "q": example.q,
                    "window": example.window,
                    "n": n,
                    "start": example.start,
                    "stop": example.stop,
                    "query_start": example.query_start,
                    "prefix": example.prefix if prefix_reuse else 0,
                    "success": success,
                    "logprob": logprob,
                    "influence_task": shares[0],
                    "influence_free": shares[1],
                }
            )
        del cache
        done = pd.DataFrame(rows[-len(examples) :])
        log.info(
            "n=%d window %d/%d (corpus window %d): accuracy %.2f, %s, %.1f s",
            n,
            w + 1,
            run,
            index,
            done.success.mean(),
            f"with gradients ({', '.join(gradient_tasks)})" if w < gradient_windows else "forward only",
            time.perf_counter() - start,
        )
    return pd.DataFrame(rows)


def retrieval_job(settings, twin: bool, n: int, device) -> pd.DataFrame:
    """The examples (``retrieval_examples``) of the configured model, or of its random-init twin (accuracy
    only, on the first ``twin_windows`` of the model's windows), at length n."""
    key = "retrieval.model"
    source = models.model_source(settings.model, key)
    models.check_source(source, (n,), key)
    arch, tokenizer = models.load_pretrained(source, key=key)
    if tokenizer is None:
        raise ConfigError(f"config key {key}: {source} has no tokenizer; the retrieval tasks are written as text")
    if twin:
        if settings.twin_seed is None:
            raise ConfigError("config key retrieval.twin_seed is null: there is no twin to run")
        arch = models.random_twin(arch, settings.twin_seed)
    arch.model.to(device)
    count, gradients = settings.count(n, twin)
    stream = text.corpus_ids(tokenizer, settings.corpus, "retrieval.corpus")
    examples = retrieval_examples(
        arch,
        tokenizer,
        n=n,
        windows=settings.windows[settings.lengths.index(n)],  # the twin runs the first ``count`` of them
        gradient_windows=gradients,
        gradient_tasks=settings.gradient_tasks_at(n),
        fractions=settings.fractions,
        tasks=settings.tasks,
        keys=settings.keys,
        digits=settings.digits,
        seed=settings.seed,
        prefix_reuse=settings.prefix_reuse,
        checkpoint=n >= settings.checkpoint_from,
        stream=stream,
        limit=count,
        name=entry_name(settings.model),
        weights="twin" if twin else "pretrained",
    )
    return examples
