"""Pretrained causal LMs on real text, against their random-init twins, with bootstrap intervals.

Entry points (docs/architectures.md has a runnable example):

    influence_profile(model, ids | tokenizer + corpus, ...)   a notebook's call: any Hugging Face causal LM
        (gpt2, llama, qwen2) to a DataFrame of the measured profile and the three theories' profiles,
        each with its bootstrap interval over sequences
    influence_tables(arch, ids, ...)                           the three tables of one model at one length
    pretrained_run(entry, settings, device, key)               the stage: one ``architectures.pretrained``
        entry and its random-init twin at every length of ``architectures.text``, on the same windows

Tables (one Parquet file each, ``sweep.KEYS`` first; step -1 = the pretrained weights, step 0 = the
twin, seed = its weight seed):

    profiles    KEYS, target, power, sequences, profile, position, mass, lo, hi
    layers      KEYS, sequences, layer, lam, attention_first, attention_self (each with _lo, _hi)
    comparison  KEYS, target, power, sequences, theory, and per metric (``METRICS``) its value, _lo and _hi
"""

from __future__ import annotations

import logging
import time

import numpy as np
import pandas as pd
import torch

from lostmid.architectures import bounded, intervals, models, text
from lostmid.architectures.settings import TextSettings
from lostmid.architectures.sweep import concat, keyed, token_ids
from lostmid.errors import ConfigError
from lostmid.stats import bootstrap

log = logging.getLogger(__name__)

METRICS = (
    "spearman",
    "w1",
    "measured_first",
    "measured_last",
    "measured_middle_depth",
    "theory_first",
    "theory_last",
    "theory_middle_depth",
    "alpha",
    "recency_bound",
    "measured_p",
    "theory_p",
)
CHECKPOINT_FROM = 2048  # the entry point's default: checkpoint the layers from this length on


def arch_of(model) -> models.Arch:
    """A Hugging Face causal LM as an Arch (its own positions), refusing a model type the stage cannot measure."""
    family = model.config.model_type
    if family not in models.ENCODINGS:
        raise ConfigError(f"model type {family!r} is not supported (known: {', '.join(models.FAMILIES)})")
    return models.Arch(family, models.ENCODINGS[family][0], model.eval())


def check_length(arch: models.Arch, n: int, key: str) -> None:
    if n > arch.max_length:
        raise ConfigError(f"config key {key}: length {n} exceeds the model's {arch.max_length} positions")


def _with_interval(name: str, values: np.ndarray, level: float) -> dict:
    estimate, lo, hi = bootstrap.percentile_interval(values, level)
    return {name: estimate, f"{name}_lo": lo, f"{name}_hi": hi}


def measurement_tables(
    measurement: bounded.Measurement, resamples: int = 1000, level: float = intervals.LEVEL, seed: int = 0
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(profiles, layers, comparison) of one Measurement without key columns (see the module docstring)."""
    sequences, n = measurement.rollout_attention.shape
    weights = intervals.draws(sequences, resamples, seed)
    theories = {name: intervals.profiles(weights, rows) for name, rows in measurement.theories().items()}
    lambdas = intervals.means(weights, measurement.lambdas)  # (1 + B, H)
    alpha = lambdas.mean(1)
    position = np.arange(1, n + 1)
    profiles, comparison = [], []
    for (target, power), grads in measurement.grads.items():
        measured = intervals.profiles(weights, grads)
        measured_shape, measured_p = intervals.shape_rows(measured), intervals.decay_exponent(measured)
        for name, draws in {"measured": measured, **theories}.items():
            estimate, lo, hi = bootstrap.percentile_interval(draws, level)
            profiles.append(
                pd.DataFrame(
                    {
                        "target": target,
                        "power": power,
                        "sequences": sequences,
                        "profile": name,
                        "position": position,
                        "mass": estimate,
                        "lo": lo,
                        "hi": hi,
                    }
                )
            )
        for name, draws in theories.items():
            shape = intervals.shape_rows(draws)
            values = {
                "spearman": intervals.spearman_rows(measured, draws),
                "w1": intervals.w1_rows(measured, draws),
                **{f"measured_{k}": v for k, v in measured_shape.items()},
                **{f"theory_{k}": v for k, v in shape.items()},
                "alpha": alpha,
                "recency_bound": (1 - alpha) ** lambdas.shape[1],
                "measured_p": measured_p,
                "theory_p": intervals.decay_exponent(draws),
            }
            row = {"target": target, "power": power, "sequences": sequences, "theory": name}
            for metric in METRICS:
                row.update(_with_interval(metric, values[metric], level))
            comparison.append(row)
    layers = {"sequences": sequences, "layer": np.arange(1, lambdas.shape[1] + 1)}
    for name, per_sequence in (
        ("lam", measurement.lambdas),
        ("attention_first", measurement.attention_first),
        ("attention_self", measurement.attention_self),
    ):
        layers.update(_with_interval(name, intervals.means(weights, per_sequence), level))
    return pd.concat(profiles, ignore_index=True), pd.DataFrame(layers), pd.DataFrame(comparison)


def influence_tables(
    arch: models.Arch,
    ids: torch.Tensor,
    targets=("top1",),
    powers=(1,),
    chunk: int = 1,
    checkpoint: bool | None = None,
    resamples: int = 1000,
    level: float = intervals.LEVEL,
    seed: int = 0,
    keys: dict | None = None,
):
    """The (profiles, layers, comparison) tables of ``arch`` on token ids (S, n), measured without attention
    matrices (``bounded.measure_bounded``); ``checkpoint`` None: from n = CHECKPOINT_FROM on. ``keys``
    (``sweep.KEYS``) are put in front of every table's columns."""
    n = ids.shape[1]
    checkpoint = n >= CHECKPOINT_FROM if checkpoint is None else checkpoint
    measurement = bounded.measure_bounded(arch, ids, targets, powers, chunk, probe_seed=seed + 1, checkpoint=checkpoint)
    tables = measurement_tables(measurement, resamples, level, seed)
    return tables if keys is None else tuple(keyed(table, keys) for table in tables)


def influence_profile(
    model,
    ids: torch.Tensor | None = None,
    *,
    tokenizer=None,
    corpus: str = "pydoc_data.topics",
    n: int = 1024,
    sequences: int = 8,
    seed: int = 0,
    target: str = "top1",
    power: int = 1,
    resamples: int = 1000,
    level: float = intervals.LEVEL,
    checkpoint: bool | None = None,
) -> pd.DataFrame:
    """The measured influence profile of a Hugging Face causal LM and the three theories' profiles, with bootstrap
    intervals over sequences: columns profile (measured | cesaro | rollout_uniform | rollout_attention),
    position (1..n), mass (each profile sums 1), lo, hi, sequences.

    Input: token ids (S, n), or a ``tokenizer`` and a ``corpus`` (``text.corpus_text``) from which
    ``sequences`` disjoint windows of ``n`` tokens are drawn with ``seed + n``.
    """
    arch = arch_of(model)
    if ids is None:
        ids = text.windows(text.corpus_ids(tokenizer, corpus), n, sequences, seed + n)
    check_length(arch, ids.shape[1], "ids")
    device = next(model.parameters()).device
    profiles, _, _ = influence_tables(
        arch, ids.to(device), (target,), (power,), checkpoint=checkpoint, resamples=resamples, level=level, seed=seed
    )
    return profiles[["profile", "position", "mass", "lo", "hi", "sequences"]]


def _log_comparison(what: str, comparison: pd.DataFrame, seconds: float) -> None:
    row = comparison.query("theory == 'rollout_attention'").iloc[0]
    log.info(
        "%s: %d sequences, %.1f s, rho %.3f [%.3f, %.3f], W1 %.4f [%.4f, %.4f], first %.4f last %.4f, "
        "p %.3f [%.3f, %.3f]",
        what,
        row.sequences,
        seconds,
        row.spearman,
        row.spearman_lo,
        row.spearman_hi,
        row.w1,
        row.w1_lo,
        row.w1_hi,
        row.measured_first,
        row.measured_last,
        row.measured_p,
        row.measured_p_lo,
        row.measured_p_hi,
    )


def entry_name(entry: dict) -> str:
    """The ``variant`` of an entry's rows: its name, else the packaged model's name or the path's stem."""
    from pathlib import Path

    return entry.get("name") or entry.get("model") or Path(entry["path"]).stem


def pretrained_run(entry: dict, settings: TextSettings, device, key: str) -> list[tuple]:
    """The tables of one pretrained entry and (``settings.twin_seed`` not None) its random-init twin at every
    length of ``settings``, on the same token ids; every check before the first measurement."""
    source = models.model_source(entry, key)
    models.check_source(source, settings.lengths, key)
    arch, tokenizer = models.load_pretrained(source, entry.get("encoding", "native"), key)
    arch.model.to(device)
    stream = None if settings.corpus == text.RANDOM else text.corpus_ids(tokenizer, settings.corpus)
    archs = [(arch, 0, -1)]
    if settings.twin_seed is not None:
        twin = models.random_twin(arch, settings.twin_seed)
        twin.model.to(device)
        archs.append((twin, settings.twin_seed, 0))
    name = entry_name(entry)
    parts = []
    for n, count in zip(settings.lengths, settings.sequences):
        if stream is None:
            ids = token_ids(arch.vocab, count, n, settings.seed + n)
        else:
            ids = text.windows(stream, n, count, settings.seed + n)
        ids = ids.to(device)
        for model_arch, seed, step in archs:
            start = time.perf_counter()
            keys = dict(
                family=arch.family, encoding=arch.encoding, variant=name, depth=arch.depth, n=n, seed=seed, step=step
            )
            part = influence_tables(
                model_arch,
                ids,
                settings.targets,
                settings.powers,
                settings.chunk,
                n >= settings.checkpoint_from,
                settings.resamples,
                settings.level,
                settings.seed + n,
                keys,
            )
            _log_comparison(
                f"{name} {'pretrained' if step < 0 else f'random-init twin seed {seed}'} n={n}",
                part[2],
                time.perf_counter() - start,
            )
            parts.append(part)
    return parts


def pretrained_tables(entries, settings: TextSettings, device) -> tuple[pd.DataFrame, ...]:
    """(profiles, layers, comparison) of every ``architectures.pretrained`` entry and its twin."""
    parts = []
    for i, entry in enumerate(entries):
        parts.extend(pretrained_run(entry, settings, device, f"architectures.pretrained[{i}]"))
    return concat(parts)
