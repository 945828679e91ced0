"""Settings of the architectures stage: the config's ``architectures`` block and its ``flag``
sub-block (docs/architectures.md lists every key), built by ``lostmid.config.settings_from_block``
(defaults, families and their encodings, targets and powers: the config schema). Free of torch,
so that the workflow builds them when it parses the config."""

from __future__ import annotations

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
class ArchSettings:
    """The ``architectures`` block but its ``flag`` sub-block: the random-init sweep and pretrained folders."""

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
    pretrained: tuple  # of {path, name (default: the folder's name), encoding: native|none}

    def check(self) -> None:
        if self.d_model % self.heads:
            raise ConfigError(f"config key architectures.d_model={self.d_model} is not divisible by architectures.heads={self.heads}")

    def sequences_at(self, n: int) -> int:
        """Sequences measured at length n: min(sequences, max(1, token_budget // n))."""
        return min(self.sequences, max(1, self.token_budget // n))

    def chunk_at(self, n: int) -> int:
        return max(1, self.tokens_per_pass // n)
