"""Parameters of the training-time remedies (``remedy`` blocks of the variants), kept free of
torch so that the tables can name them without loading the training code (lostmid.objectives)."""

from __future__ import annotations

from lostmid.errors import ConfigError

# Remedy kinds and the parameters each accepts, with their defaults (None: required).
PARAMETERS = {
    "none": {},
    "bias": {},
    "balance": {"beta": None, "target": "uniform", "sequences": 0},
    "reweight": {"eta": None, "every": 25, "probe_per_position": 8},
    "observability": {"lam": None, "probes": 2, "monitored": 8},
}
STRENGTH = {"balance": "beta", "reweight": "eta", "observability": "lam"}
TARGETS = ("uniform", "late", "early")


def remedy_settings(remedy: dict) -> dict:
    """The remedy block with defaults filled in; a bad value is a ConfigError naming the key.

    The schema (workflow/schemas/config.schema.yaml) checks the same bounds when the
    workflow starts; this check guards library use without Snakemake.
    """
    kind = remedy.get("kind", "none")
    if kind not in PARAMETERS:
        raise ConfigError(f"config key remedy.kind: unknown remedy {kind!r}; known: {sorted(PARAMETERS)}")
    allowed = PARAMETERS[kind]
    unknown = sorted(set(remedy) - set(allowed) - {"kind"})
    if unknown:
        raise ConfigError(f"config key remedy.{unknown[0]}: not a parameter of remedy kind {kind!r} (allowed: {sorted(allowed)})")
    settings = {"kind": kind}
    for key, default in allowed.items():
        if key not in remedy and default is None:
            raise ConfigError(f"config key remedy.{key}: required for remedy kind {kind!r}")
        settings[key] = remedy.get(key, default)
    for key in ("beta", "eta", "lam"):
        if key in settings and not (isinstance(settings[key], (int, float)) and settings[key] >= 0):
            raise ConfigError(f"config key remedy.{key}: the strength must be a number >= 0, got {settings[key]!r}")
    positive = {"every": "K", "probe_per_position": "probe sequences per position", "probes": "R"}
    for key, name in positive.items():
        if key in settings and not (isinstance(settings[key], int) and settings[key] >= 1):
            raise ConfigError(f"config key remedy.{key}: {name} must be an integer >= 1, got {settings[key]!r}")
    if "sequences" in settings and not (isinstance(settings["sequences"], int) and settings["sequences"] >= 0):
        raise ConfigError(f"config key remedy.sequences: must be an integer >= 0 (0: the whole batch), got {settings['sequences']!r}")
    if "target" in settings and settings["target"] not in TARGETS:
        raise ConfigError(f"config key remedy.target: unknown target density {settings['target']!r}; known: {list(TARGETS)}")
    if "monitored" in settings:
        monitored = settings["monitored"]
        ok = (isinstance(monitored, int) and monitored >= 1) or (isinstance(monitored, float) and 0 < monitored <= 1)
        if isinstance(monitored, bool) or not ok:
            raise ConfigError(
                f"config key remedy.monitored: the monitored set must be non-empty: a count >= 1 or a fraction in (0, 1], got {monitored!r}"
            )
    return settings
