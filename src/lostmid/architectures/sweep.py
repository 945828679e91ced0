"""The stage's runs: the random-init sweep and the flag-recall checkpoints (pretrained models:
``lostmid.architectures.pretrained``, whose tables share these keys).

Every run yields three tidy tables that share their key columns ``KEYS`` so one Parquet folder
per table reads the sweep and the flag comparison together:

    family, encoding   gpt2|llama|qwen2 and learned|rope|none; the flag model: family 'flag', encoding 'learned'
    variant            'init' for random models, the entry's name for a pretrained model, the flag variant
    depth, n           layers H (attention layers) and sequence length
    seed, step         weight seed and training step (random init: step 0; pretrained: seed 0, step -1)

    profiles    KEYS, target, power, profile (measured | cesaro | rollout_uniform | rollout_attention),
                position (1..n), mass (sum 1 over positions), raw (measured: mean ||grad||^p; theories: nan)
    layers      KEYS, layer (1..H), lam (lambda_t), attention_first (mean over rows of A_t[i, 1]),
                attention_self (mean diagonal of A_t)
    comparison  KEYS, target, power, theory and ``theory.compare``'s columns
"""

from __future__ import annotations

import logging
import time

import numpy as np
import pandas as pd
import torch

from lostmid.architectures import measure, models, theory
from lostmid.architectures.settings import ArchSettings, FlagSettings

log = logging.getLogger(__name__)

KEYS = ("family", "encoding", "variant", "depth", "n", "seed", "step")
INT_KEYS = ("depth", "n", "seed", "step")


def token_ids(vocab: int, sequences: int, n: int, seed: int, device=None) -> torch.Tensor:
    """Uniform random token ids (sequences, n) from a generator seeded with ``seed``."""
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(0, vocab, (sequences, n), generator=generator).to(device)


def tables(keys: dict, measured: dict, stats: measure.LayerStats) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(profiles, layers, comparison) rows of one model at one length.

    ``measured``: {(target, power): raw profile (n,)}; ``stats``: the hooks' lambda_t and A_t.
    """
    lambdas, attention = stats.lambdas(), stats.attention()  # (H,), (H, n, n)
    theories = theory.theory_profiles(lambdas, attention)
    n = attention.shape[-1]
    position = np.arange(1, n + 1)
    profiles, comparison = [], []
    for (target, power), raw in measured.items():
        mass = theory.mass(raw)
        profiles.append(
            pd.DataFrame(
                {
                    "target": target,
                    "power": power,
                    "profile": "measured",
                    "position": position,
                    "mass": mass,
                    "raw": raw,
                }
            )
        )
        for name, profile in theories.items():
            profiles.append(
                pd.DataFrame(
                    {
                        "target": target,
                        "power": power,
                        "profile": name,
                        "position": position,
                        "mass": profile,
                        "raw": np.nan,
                    }
                )
            )
        comparison.append(pd.DataFrame(theory.compare(mass, theories, lambdas)).assign(target=target, power=power))
    layers = pd.DataFrame(
        {
            "layer": np.arange(1, len(lambdas) + 1),
            "lam": lambdas,
            "attention_first": attention[:, :, 0].mean(1),
            "attention_self": np.diagonal(attention, axis1=1, axis2=2).mean(1),
        }
    )
    comparison = pd.concat(comparison, ignore_index=True)
    comparison = comparison[["target", "power"] + [c for c in comparison.columns if c not in ("target", "power")]]
    return tuple(keyed(df, keys) for df in (pd.concat(profiles, ignore_index=True), layers, comparison))


def keyed(df: pd.DataFrame, keys: dict) -> pd.DataFrame:
    from lostmid.tables.keys import with_keys

    out = with_keys(df, **{k: keys[k] for k in KEYS})
    for name in INT_KEYS:
        out[name] = out[name].astype("int64")
    return out


def measure_arch(arch: models.Arch, settings: ArchSettings, n: int, device, keys: dict):
    """Every configured target and power of one model at length n, and its theory comparison (three tables)."""
    sequences = settings.sequences_at(n)
    ids = token_ids(arch.vocab, sequences, n, settings.seed + n, device)
    measured, stats = {}, None
    for target in settings.targets:
        profiles, recorded = measure.measure_hf(
            arch,
            ids,
            target,
            settings.powers,
            settings.chunk_at(n),
            settings.seed + n + 1,
            stats_pairs=models.layers(arch) if stats is None else None,
        )
        stats = stats or recorded
        measured.update({(target, p): profile for p, profile in profiles.items()})
    return tables(keys, measured, stats)


def _log_row(what: str, comparison: pd.DataFrame, seconds: float) -> None:
    row = comparison.query("theory == 'rollout_attention'").iloc[0]
    log.info(
        "%s: %.2f s, alpha %.3f, last mass %.3f vs (1-alpha)^H %.3f, rollout_attention rho %.3f W1/(n-1) %.4f",
        what,
        seconds,
        row.alpha,
        row.measured_last,
        row.recency_bound,
        row.spearman,
        row.w1,
    )


def concat(parts) -> tuple[pd.DataFrame, ...]:
    return tuple(pd.concat(list(group), ignore_index=True) for group in zip(*parts))


def random_sweep(settings: ArchSettings, device) -> tuple[pd.DataFrame, ...]:
    """(profiles, layers, comparison) of every random-init model of the sweep."""
    parts = []
    for family, encodings in settings.families.items():
        for encoding in encodings:
            for depth in settings.depths:
                for seed in settings.seeds:
                    arch = models.build(
                        family,
                        encoding,
                        depth,
                        settings.d_model,
                        settings.heads,
                        settings.vocab,
                        max(settings.lengths),
                        seed,
                    )
                    arch.model.to(device)
                    for n in settings.lengths:
                        start = time.perf_counter()
                        keys = dict(
                            family=family, encoding=encoding, variant="init", depth=depth, n=n, seed=seed, step=0
                        )
                        part = measure_arch(arch, settings, n, device, keys)
                        _log_row(
                            f"{family}/{encoding} H={depth} seed={seed} n={n}", part[2], time.perf_counter() - start
                        )
                        parts.append(part)
    return concat(parts)


def flag_tables(model, spec: dict, step: int, settings: FlagSettings, device) -> tuple[pd.DataFrame, ...]:
    """(profiles, layers, comparison) of one flag-recall checkpoint on the flag task's evaluation set."""
    from lostmid.core import task

    L = spec["L"]
    tokens, answers, _ = task.stratified_eval_set(L, settings.per_position, settings.seed)
    tokens, answers = tokens.to(device), answers.to(device)
    measured, stats = {}, None
    for target in settings.targets:
        profiles, recorded = measure.measure_flag(
            model,
            tokens,
            answers,
            target,
            settings.powers,
            settings.chunk,
            settings.seed + 1,
            record_stats=stats is None,
        )
        stats = stats or recorded
        measured.update({(target, p): profile for p, profile in profiles.items()})
    keys = dict(
        family="flag", encoding="learned", variant=spec["variant"], depth=stats.depth, n=L, seed=spec["seed"], step=step
    )
    return tables(keys, measured, stats)


def flag_comparison(checkpoints, settings: FlagSettings, device) -> tuple[pd.DataFrame, ...]:
    """The tables of every (path, spec, inputs) checkpoint, loaded with ``lostmid.training.checkpoint.load_model``
    (``inputs``: the records of the files it must have been made from)."""
    from lostmid.training.checkpoint import load_model

    parts = []
    for path, spec, inputs in checkpoints:
        start = time.perf_counter()
        model, step = load_model(path, spec, device, inputs)
        part = flag_tables(model, spec, step, settings, device)
        _log_row(
            f"flag {spec['variant']} L={spec['L']} M={spec['depth']} seed={spec['seed']} step={step}",
            part[2],
            time.perf_counter() - start,
        )
        parts.append(part)
    return concat(parts)
