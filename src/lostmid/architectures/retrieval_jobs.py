"""The retrieval stage's jobs (docs/retrieval.md): the corpus check before any window, and one job per
(model, n, block of ``retrieval.block`` windows), which loads the model and corpus once and writes each window
to the run's record as soon as it is done.

    corpus_windows(settings)                            the corpus's source, tokens and disjoint windows per n
    retrieval_block(settings, twin, n, b, device)       the b-th block of windows of a model (or its twin) at n
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from lostmid import io
from lostmid.architectures import models, text
from lostmid.architectures.pretrained import entry_name
from lostmid.architectures.retrieval import check_windows, retrieval_examples
from lostmid.architectures.retrieval_summary import check_record_hash
from lostmid.errors import ConfigError


def corpus_windows(settings) -> dict:
    """{"corpus": its source (``text.corpus_source``: where it comes from, its licence, its text's sha256),
    "tokens": T, "windows": {n: disjoint windows}} of the configured corpus under the model's tokenizer; one
    line where an n has fewer disjoint windows than the model's or the twin's count there (before any window
    job starts)."""
    source = models.model_source(settings.model, "retrieval.model")
    tokens = len(text.corpus_ids(models.load_tokenizer(source, "retrieval.model"), settings.corpus, "retrieval.corpus"))
    for n, model, twin in zip(settings.lengths, settings.windows, settings.twin_windows):
        check_windows(tokens, n, max(model, twin))
    return {
        "corpus": {"name": settings.corpus, **text.corpus_source(settings.corpus)},
        "tokens": tokens,
        "windows": {str(n): tokens // n for n in settings.lengths},
    }


def window_path(record, weights: str, n: int, k: int) -> Path:
    """The record's file of the k-th window of a model (``weights``: pretrained | twin) at length n."""
    return Path(record) / "windows" / f"{weights}_n{n}_w{k}.parquet"


def recorded(path: Path, record_hash: str) -> bool:
    """Whether the window record ``path`` exists (made under ``record_hash``); one line where it was made under
    another configuration (a record is never overwritten by another run's rows)."""
    if not path.exists():
        return False
    rows = pd.read_parquet(path, columns=["config_hash"])
    check_record_hash(path, rows, record_hash, "give the run its own retrieval.record")
    return True


def window_examples(arch, tokenizer, settings, stream, n: int, k: int, weights: str, windows: int, gradients: int):
    """The examples of the k-th window of the draw at n under ``settings`` (``retrieval_examples``, the rows a window
    record holds), with the shares where k is among the first ``gradients`` of ``windows``."""
    return retrieval_examples(
        arch,
        tokenizer,
        n=n,
        windows=windows,
        gradient_windows=gradients,
        gradient_tasks=settings.gradient_tasks_at(n),
        measures=settings.measures,
        fractions=settings.fractions,
        tasks=settings.tasks,
        keys=settings.keys,
        digits=settings.digits,
        seed=settings.seed,
        bos=settings.bos,
        prefix_reuse=settings.prefix_reuse,
        checkpoint=n >= settings.checkpoint_from,
        stream=stream,
        first=k,
        limit=1,
        name=entry_name(settings.model),
        weights=weights,
    )


def retrieval_block(settings, twin: bool, n: int, block: int, device, record=None) -> list[Path]:
    """The windows of the ``block``-th job (``settings.block_windows``) of the configured model, or of its
    random-init twin (accuracy only), at length n: each window's examples (``retrieval_examples``), stamped
    with the record's ``config_hash`` (``settings.record_hash``), written to its file under ``record``
    (``settings.record`` unless given) as soon as it is done. Windows already recorded are skipped, so a
    stopped job resumes at the first window it lacks; the model and corpus are loaded once, and only where a
    window is missing. Returns the block's window files."""
    weights = "twin" if twin else "pretrained"
    record_hash = settings.record_hash()
    windows = settings.block_windows(n, twin, block)
    paths = [window_path(record or settings.record, weights, n, k) for k in windows]
    missing = [(k, path) for k, path in zip(windows, paths) if not recorded(path, record_hash)]
    if not missing:
        return paths
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
    for k, path in missing:
        examples = window_examples(arch, tokenizer, settings, stream, n, k, weights, count, gradients)
        io.write_parquet(examples.assign(draw=k, config_hash=record_hash), path)
    return paths
