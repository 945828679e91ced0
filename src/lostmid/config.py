"""The workflow config: validation, the run grid and the spec that defines one run.

A *run* is one point of the grid: (variant, L, depth, seed). Its *spec* is everything that
determines its trained weights: the merged model, training and remedy settings. The spec,
and nothing else, is fingerprinted into every checkpoint, so that changing the total step
count, the checkpoint interval, the device or an analysis parameter never retrains.
"""

from __future__ import annotations

import copy
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import yaml

from lostmid.errors import ConfigError

# Keys of the grid that every results table carries as columns.
GRID_KEYS = ("variant", "L", "depth", "seed", "step")


@dataclass(frozen=True, order=True)
class Run:
    variant: str
    L: int
    depth: int
    seed: int

    @property
    def name(self) -> str:
        """Folder-style id used in result paths: ``{variant}/L{L}_M{depth}_seed{seed}``."""
        return f"{self.variant}/L{self.L}_M{self.depth}_seed{self.seed}"

    def keys(self) -> dict:
        return {"variant": self.variant, "L": self.L, "depth": self.depth, "seed": self.seed}


def _key_path(path) -> str:
    """``['grid', 0, 'L']`` -> ``grid[0].L``: how error messages name a config key."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "<top level>"


def validate(config: dict, schema_path) -> dict:
    """Check ``config`` against the JSON schema and the cross-key rules; return it unchanged.

    Raises ConfigError naming the offending key.
    """
    import jsonschema

    schema = yaml.safe_load(Path(schema_path).read_text())
    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(config), key=lambda e: (len(e.path), list(map(str, e.path))))
    if errors:
        err = errors[0]
        raise ConfigError(f"config key {_key_path(err.path)}: {err.message}")
    check_cross_keys(config)
    return config


def check_cross_keys(config: dict) -> None:
    """Rules a JSON schema cannot express."""
    variants = config.get("variants", {})
    train = config["train"]
    if train["steps"] % train["every"]:
        raise ConfigError(f"config key train.every={train['every']} does not divide train.steps={train['steps']}")
    for name, variant in variants.items():
        own = (variant or {}).get("train", {})
        if "steps" in own or "every" in own:
            steps, every = schedule(config, name)
            if steps % every:
                raise ConfigError(f"config key variants.{name}.train: every={every} does not divide steps={steps}")
        seed_batch = merge(train, own).get("seed_batch", 1)
        per_job = config.get("seeds_per_job", 0)
        if per_job and seed_batch > 1 and per_job % seed_batch:
            raise ConfigError(f"config key seeds_per_job={per_job} is not a multiple of the train.seed_batch={seed_batch} of "
                              f"variant {name}: a job must hold whole seed batches")
    for i, block in enumerate(config["grid"]):
        for name in block["variants"]:
            if name not in variants:
                raise ConfigError(f"config key grid[{i}].variants names {name!r}, which is not defined under variants")
    check_variant_names(config)
    architectures = config.get("architectures") or {}
    if architectures.get("d_model", 32) % architectures.get("heads", 4):
        raise ConfigError(f"config key architectures.d_model={architectures.get('d_model', 32)} is not divisible by "
                          f"architectures.heads={architectures.get('heads', 4)}")
    for name in architecture_flag_variants(config):
        if name not in variants:
            raise ConfigError(f"config key architectures.flag.variants names {name!r}, which is not defined under variants")
        if not any(name in block["variants"] for block in config["grid"]):
            raise ConfigError(f"config key architectures.flag.variants names {name!r}, which no grid block trains")
    model = config["model"]
    if model["d_model"] % model["heads"]:
        raise ConfigError(f"config key model.d_model={model['d_model']} is not divisible by model.heads={model['heads']}")
    for name, variant in variants.items():
        overrides = (variant or {}).get("model", {})
        if "d_model" in overrides or "heads" in overrides:
            d_model, heads = overrides.get("d_model", model["d_model"]), overrides.get("heads", model["heads"])
            if d_model % heads:
                raise ConfigError(f"config key variants.{name}.model: d_model={d_model} is not divisible by heads={heads}")


def architecture_flag_variants(config: dict) -> list[str]:
    """The variants whose runs the architectures stage compares with the rollout theories (none
    without an ``architectures`` block; ``baseline`` by default)."""
    architectures = config.get("architectures") or {}
    return (architectures.get("flag") or {}).get("variants", ["baseline"]) if architectures else []


def check_variant_names(config: dict) -> None:
    """Every key that names a variant names one that is defined (and, for the remedies'
    baseline, one that runs in the grid: the time and memory ratios are taken against it)."""
    variants = config.get("variants", {})
    baseline = (config.get("remedies") or {}).get("baseline", "baseline")
    if baseline not in variants:
        raise ConfigError(f"config key remedies.baseline names {baseline!r}, which is not defined under variants")
    in_grid = {name for block in config["grid"] for name in block["variants"]}
    if baseline not in in_grid:
        raise ConfigError(f"config key remedies.baseline names {baseline!r}, which no grid block runs (grid[*].variants)")
    flow = (config.get("influence") or {}).get("flow_variants") or []
    unknown = sorted(set(flow) - set(variants))
    if unknown:
        raise ConfigError(f"config key influence.flow_variants names {unknown}, which are not defined under variants")


def read_yaml(path) -> dict:
    """A config file's mapping; a file that is not valid YAML is a ConfigError naming the file
    and the line (Snakemake's own message names neither)."""
    try:
        config = yaml.safe_load(Path(path).read_text())
    except OSError as err:
        raise ConfigError(f"config file {path}: {err.strerror or err}") from err
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f", line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        context, context_mark = getattr(err, "context", None), getattr(err, "context_mark", None)
        if context and context_mark is not None:
            context += f" started at line {context_mark.line + 1}, column {context_mark.column + 1}:"
        problem = " ".join(part for part in (context, getattr(err, "problem", None)) if part) or str(err)
        raise ConfigError(f"config file {path}{where}: not valid YAML: {problem}") from err
    if config is None:
        config = {}
    if not isinstance(config, dict):
        raise ConfigError(f"config file {path}: must be a mapping of keys at top level, got {type(config).__name__}")
    return config


def load(path, schema_path) -> dict:
    """Read and validate a config file (for library use outside Snakemake)."""
    return validate(read_yaml(path), schema_path)


def runs(config: dict) -> list[Run]:
    """Every run of the grid: the union of each grid block's product, sorted, no duplicates."""
    found = set()
    for block in config["grid"]:
        for variant in block["variants"]:
            for L in block["L"]:
                for depth in block["depth"]:
                    for seed in block["seeds"]:
                        found.add(Run(variant, int(L), int(depth), int(seed)))
    return sorted(found)


def schedule(config: dict, variant: str) -> tuple[int, int]:
    """(steps, every) of a variant: its own ``train.steps`` and ``train.every`` if it sets them,
    else the config's. The schedule says how far and how often to checkpoint, not what the weights
    become, so it stays out of the run spec."""
    train = merge(config["train"], (config["variants"][variant] or {}).get("train", {}))
    return train["steps"], train["every"]


def checkpoint_steps(config: dict, variant: str) -> list[int]:
    """0, every, 2 every, ..., steps of a variant."""
    steps, every = schedule(config, variant)
    return list(range(0, steps + 1, every))


def merge(base: dict, override: dict) -> dict:
    """``override`` on top of ``base`` as Snakemake merges config files: mappings recursively,
    everything else replaced."""
    merged = copy.deepcopy(base)
    for key, value in override.items():
        merged[key] = merge(merged[key], value) if isinstance(value, dict) and isinstance(merged.get(key), dict) else value
    return merged


# train keys that say how far and how often to checkpoint, not what the weights become.
_SCHEDULE_KEYS = ("steps", "every")
# (block, key, neutral value) of the keys ``run_spec`` leaves out at their neutral value.
_NEUTRAL_KEYS = (("train", "seed_batch", 1), ("train", "warmup", 0), ("model", "positions", "learned"))


def run_spec(config: dict, run: Run) -> dict:
    """Everything that defines the weights of ``run``: the fingerprinted spec."""
    variant = config["variants"][run.variant] or {}
    model = merge(config["model"], variant.get("model", {}))
    model.update(seq_len=run.L, depth=run.depth)
    train = merge(config["train"], variant.get("train", {}))
    for key in _SCHEDULE_KEYS:
        train.pop(key, None)
    # Keys added after the first checkpoints were written: at their neutral value they stay out of
    # the spec, so that the fingerprints of every run that does not use them are as before the key.
    for block, key, neutral in _NEUTRAL_KEYS:
        part = model if block == "model" else train
        if part.get(key) == neutral:
            del part[key]
    return {
        **run.keys(),
        "model": model,
        "train": train,
        "remedy": copy.deepcopy(variant.get("remedy", {"kind": "none"})),
    }


def canonical_json(obj) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"))


def fingerprint(spec: dict) -> str:
    return hashlib.sha256(canonical_json(spec).encode()).hexdigest()[:16]


def spec_differences(expected: dict, found: dict, prefix: str = "") -> list[str]:
    """Dotted keys whose values differ between two specs (for checkpoint mismatch errors)."""
    diffs = []
    for key in sorted(set(expected) | set(found)):
        a, b = expected.get(key), found.get(key)
        name = f"{prefix}{key}"
        if isinstance(a, dict) and isinstance(b, dict):
            diffs += spec_differences(a, b, name + ".")
        elif a != b:
            diffs.append(f"{name}: requested {a!r}, checkpoint has {b!r}")
    return diffs


def settings_from_block(cls, raw, key: str, tuple_keys=()):
    """A settings dataclass from a config block: unknown keys are errors, lists become tuples."""
    values = dict(raw or {})
    unknown = set(values) - set(cls.__dataclass_fields__)
    if unknown:
        raise ConfigError(f"config key {key} has unknown keys {sorted(unknown)}")
    for name in tuple_keys:
        if name in values:
            values[name] = tuple(int(v) for v in values[name])
    return cls(**values)
