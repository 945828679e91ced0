"""The flag-recall task (docs/theory.md §2).

Alphabet {0, 1, FLAG}. A sequence of length L holds exactly one FLAG at 1-based position
f in {2..L}; every other token is 0 or 1, uniform i.i.d. The target is x_{f-1}, the token
just before the FLAG. Everything is drawn from an explicit torch.Generator, so the same
seed gives the same data on every machine.
"""

from __future__ import annotations

import torch

FLAG = 2
VOCAB = 3
N_ANSWERS = 2


def flag_positions(L: int) -> torch.Tensor:
    """The admissible 1-based FLAG positions 2..L."""
    return torch.arange(2, L + 1)


def flag_law(L: int, law: str = "uniform") -> torch.Tensor:
    """Training law pi over the flag positions 2..L (probabilities, sum 1).

    ``uniform``: every position equally likely. ``early`` / ``late``: weight linear in the
    position, favouring the start or the end (for shifted-training ablations).
    """
    f = flag_positions(L).double()
    if law == "uniform":
        weights = torch.ones_like(f)
    elif law == "early":
        weights = L + 1 - f
    elif law == "late":
        weights = f - 1
    else:
        raise ValueError(f"unknown flag law {law!r}; expected uniform, early or late")
    return weights / weights.sum()


def sequences_with_flags(flags: torch.Tensor, L: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Random 0/1 sequences with a FLAG at each given 1-based position; returns (tokens, targets)."""
    n = flags.numel()
    tokens = torch.randint(0, 2, (n, L), generator=generator)
    rows = torch.arange(n)
    tokens[rows, flags - 1] = FLAG
    targets = tokens[rows, flags - 2]
    return tokens, targets


def sample_batch(batch_size: int, L: int, law: torch.Tensor, generator: torch.Generator):
    """A training batch: flags drawn from ``law``; returns (tokens, targets, flags)."""
    flags = torch.multinomial(law, batch_size, replacement=True, generator=generator) + 2
    tokens, targets = sequences_with_flags(flags, L, generator)
    return tokens, targets, flags


def stratified_eval_set(L: int, per_position: int, seed: int):
    """The fixed evaluation set: ``per_position`` sequences at every flag position 2..L.

    Returns (tokens, targets, flags) ordered by flag position.
    """
    generator = torch.Generator().manual_seed(seed)
    flags = flag_positions(L).repeat_interleave(per_position)
    tokens, targets = sequences_with_flags(flags, L, generator)
    return tokens, targets, flags


def balanced_eval_set(L: int, per_position: int, seed: int):
    """An evaluation set balanced in flag position and target: ``per_position`` sequences at
    every flag position 2..L, exactly half of them with target 0 and half with target 1.

    Balance in both makes a constant predictor (always 0, or always 1) fail on exactly half
    the sequences at every position, so it shows no position effect at all; on the
    ``stratified_eval_set`` the targets are random and such a predictor's failure rate
    wobbles from position to position. The target (the token at f-1) is set, every other
    non-FLAG token is uniform 0/1 from a torch.Generator seeded with ``seed``. Within a
    position the targets alternate 0, 1, 0, 1, ... Returns (tokens, targets, flags) ordered
    by flag position, like ``stratified_eval_set``. ``per_position`` must be even.
    """
    if per_position <= 0 or per_position % 2:
        raise ValueError(f"per_position must be a positive even number (half target 0, half 1), got {per_position}")
    tokens, _, flags = stratified_eval_set(L, per_position, seed)
    targets = (torch.arange(flags.numel()) % 2).to(tokens.dtype)
    tokens[torch.arange(flags.numel()), flags - 2] = targets
    return tokens, targets, flags


_MASK63 = (1 << 63) - 1


def eval_seed_for_run(base_seed: int, run_seed: int) -> int:
    """The evaluation-set seed of the training run ``run_seed``: a SplitMix64-style mix of
    (base_seed, run_seed), kept to 63 bits so it fits an int64 column.

    Every step is a bijection modulo 2**63 (adding, multiplying by an odd constant,
    xor-shifting right), so for one ``base_seed`` distinct run seeds in [0, 2**63) always get
    distinct evaluation seeds: each training seed is evaluated on its own draw of the set,
    and an interval over seeds includes the evaluation set's own sampling error. The mix
    also keeps the evaluation seed away from the small integers used as training seeds, so
    the evaluation sequences are not the training generator's own stream.
    """
    z = ((base_seed + 1) * 0x9E3779B97F4A7C15 + run_seed) & _MASK63  # the +1: seeds 0, 0 do not map to 0
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK63
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK63
    return z ^ (z >> 31)


def wilson_interval(failures, n, z: float = 1.959963984540054):
    """Wilson score interval for a binomial proportion (95% by default); elementwise on arrays.

    Chosen over the normal approximation because failure rates sit near 0 at late checkpoints.
    """
    import numpy as np

    failures = np.asarray(failures, dtype=np.float64)
    n = np.asarray(n, dtype=np.float64)
    rate = failures / n
    denom = 1 + z**2 / n
    centre = (rate + z**2 / (2 * n)) / denom
    half = z * np.sqrt(rate * (1 - rate) / n + z**2 / (4 * n**2)) / denom
    # At rate 0 or 1 the bound is exactly 0 or 1; rounding would put it a hair inside.
    low = np.where(failures == 0, 0.0, np.clip(centre - half, 0, 1))
    high = np.where(failures == n, 1.0, np.clip(centre + half, 0, 1))
    return low, high


__all__ = [
    "FLAG",
    "VOCAB",
    "N_ANSWERS",
    "flag_positions",
    "flag_law",
    "sample_batch",
    "stratified_eval_set",
    "balanced_eval_set",
    "eval_seed_for_run",
    "wilson_interval",
]
