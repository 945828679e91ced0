"""Settings of the architectures stage: the config's ``architectures`` section and its ``flag``
subsection, and its ``text`` subsection for the ``pretrained`` entries (docs/architectures.md lists
every key), built by ``lostmid.config.settings_from_section``
(defaults, families and their encodings, targets and powers: the config schema). Free of torch,
so that the workflow builds them when it parses the config."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

from lostmid.errors import ConfigError


@dataclass(frozen=True)
class FlagSettings:
    """The ``architectures.flag`` block: which flag-recall runs, on which evaluation set."""

    variants: tuple[str, ...]
    per_position: int  # sequences at every flag position 2..L
    seed: int
    targets: tuple[str, ...]
    powers: tuple[int, ...]
    chunk: int  # sequences per forward/backward pass (memory only)


@dataclass(frozen=True)
class TextSettings:
    """The ``architectures.text`` block: how every ``architectures.pretrained`` entry and its twin are measured."""

    lengths: tuple[int, ...]
    sequences: tuple[int, ...]  # windows at each length (at most the corpus's disjoint windows)
    corpus: str  # pydoc_data.topics | a text file | random (lostmid.architectures.text)
    seed: int  # windows at length n: seed + n; bootstrap draws: seed + n; Hutchinson probes: seed + n + 1
    twin_seed: int | None  # weights of the random-init twin (None: no twin)
    targets: tuple[str, ...]
    powers: tuple[int, ...]
    resamples: int  # bootstrap draws over sequences
    level: float  # of the percentile interval
    chunk: int  # sequences per forward/backward pass (memory only)
    checkpoint_from: int  # gradient checkpointing of every layer at n >= this (memory only)

    def check(self) -> None:
        if len(self.sequences) != len(self.lengths):
            raise ConfigError(
                f"config key architectures.text.sequences has {len(self.sequences)} counts for "
                f"{len(self.lengths)} lengths (one count per length)"
            )


@dataclass(frozen=True)
class ArchSettings:
    """The ``architectures`` section but its ``flag``, ``pretrained`` and ``text`` keys: the random-init sweep."""

    families: dict  # family -> the positional encodings measured
    depths: tuple[int, ...]
    lengths: tuple[int, ...]
    d_model: int
    heads: int
    vocab: int
    seeds: tuple[int, ...]
    sequences: int  # sequences per configuration, at most
    token_budget: int  # ... and at most max(1, token_budget // n) of them at length n
    tokens_per_pass: int  # chunk of max(1, tokens_per_pass // n) sequences per forward/backward pass
    targets: tuple[str, ...]
    powers: tuple[int, ...]
    seed: int  # token ids at length n: seed + n; Hutchinson probes: seed + n + 1

    def check(self) -> None:
        if self.d_model % self.heads:
            raise ConfigError(
                f"config key architectures.d_model={self.d_model} is not divisible by architectures.heads={self.heads}"
            )

    def sequences_at(self, n: int) -> int:
        """Sequences measured at length n: min(sequences, max(1, token_budget // n))."""
        return min(self.sequences, max(1, self.token_budget // n))

    def chunk_at(self, n: int) -> int:
        return max(1, self.tokens_per_pass // n)


# The retrieval keys that decide a window's rows; the counts (lengths, windows, gradient_windows,
# twin_windows), the summary's and the memory-only keys do not.
RECORD_KEYS = (
    "model",
    "fractions",
    "tasks",
    "keys",
    "digits",
    "corpus",
    "seed",
    "twin_seed",
    "bos",
    "measures",
    "gradient_tasks",
)


@dataclass(frozen=True)
class RetrievalSettings:
    """The ``retrieval`` block: needles at fractions q of real-text windows (docs/retrieval.md lists every key)."""

    model: dict  # {model: smollm2} | {path: ...}, optional name
    lengths: tuple[int, ...]
    windows: tuple[int, ...]  # per n: windows of the pretrained model
    gradient_windows: tuple[int, ...]  # per n: the first k of them also get both influence measures
    gradient_tasks: tuple[tuple[str, ...] | None, ...]  # per n (or empty): the tasks measured there (None: all)
    twin_windows: tuple[int, ...]  # per n: windows of the random-init twin (accuracy only)
    fractions: tuple[float, ...]
    tasks: tuple[str, ...]
    keys: int  # pairs of the multikey task
    digits: int  # digits of the number task's value
    corpus: str
    seed: int
    twin_seed: int | None
    prefix_reuse: bool
    resamples: int
    level: float
    checkpoint_from: int
    bos: bool  # the tokenizer's BOS token before the haystack (False: the window's first token at position 0)
    measures: tuple[str, ...]  # the influence shares taken in the gradient windows: task, free, bare
    record: str  # the folder of the run's record: one Parquet per window under its windows/
    block: int  # windows per job at one (model, n): the model is loaded once per job

    def check(self) -> None:
        for name in ("windows", "gradient_windows", "twin_windows"):
            if len(getattr(self, name)) != len(self.lengths):
                raise ConfigError(
                    f"config key retrieval.{name} has {len(getattr(self, name))} counts for {len(self.lengths)} "
                    "lengths (one count per length)"
                )
        for name in ("gradient_windows", "twin_windows"):
            for n, k, w in zip(self.lengths, getattr(self, name), self.windows):
                if k > w:
                    raise ConfigError(f"config key retrieval.{name}: {k} at n = {n} exceeds the {w} windows there")
        if self.gradient_tasks and len(self.gradient_tasks) != len(self.lengths):
            raise ConfigError(
                f"config key retrieval.gradient_tasks has {len(self.gradient_tasks)} entries for {len(self.lengths)} "
                "lengths (one entry per length, or none)"
            )
        for n, tasks in zip(self.lengths, self.gradient_tasks):
            if tasks is not None and set(tasks) - set(self.tasks):
                raise ConfigError(
                    f"config key retrieval.gradient_tasks at n = {n} names {sorted(set(tasks) - set(self.tasks))}, "
                    f"not among retrieval.tasks {list(self.tasks)}"
                )

    def count(self, n: int, twin: bool) -> tuple[int, int]:
        """(windows, gradient windows) at length n for the model or its twin (the twin: no gradients)."""
        i = self.lengths.index(n)
        return (self.twin_windows[i], 0) if twin else (self.windows[i], self.gradient_windows[i])

    def record_hash(self) -> str:
        """sha256 (12 hex digits) of the keys that decide a window's rows (``RECORD_KEYS``): a window record
        made under other values is not this run's."""
        chosen = {key: getattr(self, key) for key in RECORD_KEYS}
        return hashlib.sha256(json.dumps(chosen, sort_keys=True, default=list).encode()).hexdigest()[:12]

    def window_jobs(self, twin_runs: bool = True) -> list[tuple[str, int, int]]:
        """(weights, n, k) of every window: the model's windows 0..windows-1 at each n, then its twin's."""
        jobs = [("pretrained", n, k) for n, w in zip(self.lengths, self.windows) for k in range(w)]
        if twin_runs and self.twin_seed is not None:
            jobs += [("twin", n, k) for n, w in zip(self.lengths, self.twin_windows) for k in range(w)]
        return jobs

    def block_jobs(self) -> list[tuple[str, int, int]]:
        """(weights, n, b) of every job: the b-th block of ``block`` consecutive windows of a model at n."""
        return [(weights, n, k // self.block) for weights, n, k in self.window_jobs() if k % self.block == 0]

    def block_windows(self, n: int, twin: bool, block: int) -> range:
        """The windows k of the ``block``-th job of the model (or its twin) at n."""
        count, _ = self.count(n, twin)
        if not 0 <= block * self.block < count:
            raise ConfigError(
                f"retrieval: block {block} of {self.block} windows at n = {n} is beyond the {count} windows asked there"
            )
        return range(block * self.block, min((block + 1) * self.block, count))

    def gradient_tasks_at(self, n: int) -> tuple[str, ...]:
        """The tasks whose examples get the influence measures (in the gradient windows) at length n."""
        tasks = self.gradient_tasks[self.lengths.index(n)] if self.gradient_tasks else None
        return self.tasks if tasks is None else tasks
