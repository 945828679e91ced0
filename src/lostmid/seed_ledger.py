"""The seed ledger: which training seeds each named config's runs have used (runs/seed_ledger.yaml).

Seeds are the unit of replication, so a confirmatory run must not reuse a seed whose data were seen:
a config that declares its seeds fresh (top-level ``fresh_seeds: <name>``, its name in the ledger)
is refused before any job when one of its grid seeds stands in the ledger under another name, or
when the ledger does not record them under its own. The Snakefile calls ``check_fresh_seeds`` on
``LEDGER``, the one place the ledger's path is declared.
"""

from __future__ import annotations

from pathlib import Path

from lostmid.config import read_yaml
from lostmid.errors import ConfigError

# The ledger, relative to the checkout's root (the Snakefile's folder): a record of the runs, beside them.
LEDGER = Path("runs/seed_ledger.yaml")


def parse_seeds(words: str) -> set[int]:
    """ "0-3, 7" -> {0, 1, 2, 3, 7}: comma-separated integers and inclusive ranges a-b."""
    found: set[int] = set()
    for part in str(words).split(","):
        first, _, last = part.strip().partition("-")
        try:
            low, high = int(first), int(last or first)
        except ValueError:
            raise ConfigError(f"seed ledger: {part.strip()!r} is not a seed or a range a-b") from None
        if high < low:
            raise ConfigError(f"seed ledger: the range {part.strip()!r} runs backwards")
        found.update(range(low, high + 1))
    return found


def read_ledger(path) -> dict[str, set[int]]:
    """Name -> the seeds the ledger records for it (reserved seeds included)."""
    entries = read_yaml(path)
    ledger = {}
    for name, entry in entries.items():
        if not isinstance(entry, dict) or "seeds" not in entry:
            raise ConfigError(f"seed ledger {path}: entry {name!r} needs a `seeds` key")
        ledger[str(name)] = parse_seeds(entry["seeds"])
    return ledger


def grid_seeds(config: dict) -> set[int]:
    return {int(seed) for block in config["grid"] for seed in block["seeds"]}


def words(seeds) -> str:
    """{0, 1, 2, 7} -> "0-2, 7"."""
    runs: list[list[int]] = []
    for seed in sorted(seeds):
        if runs and seed == runs[-1][1] + 1:
            runs[-1][1] = seed
        else:
            runs.append([seed, seed])
    return ", ".join(f"{a}-{b}" if b > a else f"{a}" for a, b in runs)


def check_fresh_seeds(config: dict, ledger_path) -> None:
    """A config with ``fresh_seeds: <name>`` uses only seeds the ledger gives to <name> and to no other
    config; ConfigError (one line naming the config and the reused seeds) otherwise. Without the key: nothing."""
    name = config.get("fresh_seeds")
    if name is None:
        return
    ledger = read_ledger(Path(ledger_path))
    seeds = grid_seeds(config)
    reused = {other: seeds & used for other, used in ledger.items() if other != name and seeds & used}
    if reused:
        where = "; ".join(f"{words(common)} by {other}" for other, common in reused.items())
        raise ConfigError(f"config {name!r} declares fresh seeds but reuses seeds used before: {where}")
    unrecorded = seeds - ledger.get(name, set())
    if unrecorded:
        raise ConfigError(
            f"config {name!r} declares fresh seeds but {ledger_path} does not record seeds {words(unrecorded)} "
            f"under {name!r}: add them there first"
        )
