"""The workflow config: validation, the run grid, the spec that defines one run, and the
settings of a section.

A *run* is one point of the grid: (variant, L, depth, seed). Its *spec* is everything that
determines its trained weights: the merged model, training and remedy settings. The spec,
and nothing else, is fingerprinted into every checkpoint, so that changing the total step
count, the checkpoint interval, the device or an analysis parameter never retrains. Validation
fills in the schema's defaults (lostmid.schema), but never in the spec's sections.

Every other section is read through its settings dataclass, built by ``settings_from_section``.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import json
import os
import types
import typing
from dataclasses import dataclass, fields
from pathlib import Path

import yaml

from lostmid import schema
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


def validate(config: dict, schema_path=schema.SCHEMA) -> dict:
    """Check ``config`` against the JSON schema, fill in the schema's defaults (in place, never in the
    run spec's blocks: lostmid.schema) and check the cross-key rules; return it.

    Raises ConfigError naming the offending key.
    """
    root = schema.load(Path(schema_path))
    schema.check(config, root, root)  # NaN and infinity refused, integral floats made ints, before any spec is built
    schema.fill_defaults(config, root, root)
    check_cross_keys(config)
    check_sizes(config)
    check_paths(config)
    return config


# The most memory one training step's attention may take: more than any single accelerator holds
# (141 GB on an H200, 192 GB on a B200), so a config beyond it is a typo (L: 100000), not a plan.
MAX_STEP_BYTES = 256 * 2**30


def attention_bytes(spec: dict) -> int:
    """Bytes of the attention maps one training step of the run ``spec`` holds: batch x heads x depth x
    L x L entries (every seed of a seed batch at once), each kept as score, probability and gradient
    in float32. The largest activation at any L worth asking about; the rest grows like L, not L^2."""
    model, train = spec["model"], spec["train"]
    entries = train["batch_size"] * train_value(train, "seed_batch") * model["heads"] * spec["depth"] * spec["L"] ** 2
    return 3 * 4 * entries


def check_sizes(config: dict) -> None:
    """Refuse a grid whose runs could not train on any device (attention_bytes above MAX_STEP_BYTES),
    with the memory they would take."""
    for i, entry in enumerate(config["grid"]):
        for run in runs({**config, "grid": [entry]}):
            need = attention_bytes(run_spec(config, run))
            if need > MAX_STEP_BYTES:
                raise ConfigError(
                    f"config key grid[{i}].L: L={run.L} would need {need / 2**30:,.0f} GiB of attention maps per "
                    f"training step (variant {run.variant}, depth {run.depth}), more than the "
                    f"{MAX_STEP_BYTES / 2**30:.0f} GiB a device holds"
                )


def check_paths(config: dict) -> None:
    """The files and folders the config names exist, before any job runs (the pretrained models are
    measured after the whole random-init sweep): a missing one is a ConfigError naming its key."""
    for i, entry in enumerate(config.get("architectures", {}).get("pretrained", [])):
        # a packaged model ({model: name}) is found through its distribution: lostmid.jobs.check
        if not entry.get("model") and not Path(entry["path"]).exists():
            raise ConfigError(f"config key architectures.pretrained[{i}].path: {entry['path']} does not exist")


def check_cross_keys(config: dict) -> None:
    """Rules a JSON schema cannot express: across sections, and inside the run spec's sections (a
    settings section's own rules are its class's ``check``). ``config`` has its defaults filled."""
    variants = config["variants"]
    train = config["train"]
    if train["steps"] % train["every"]:
        raise ConfigError(f"config key train.every={train['every']} does not divide train.steps={train['steps']}")
    for name, variant in variants.items():
        own = (variant or {}).get("train", {})
        if "steps" in own or "every" in own:
            steps, every = schedule(config, name)
            if steps % every:
                raise ConfigError(f"config key variants.{name}.train: every={every} does not divide steps={steps}")
        seed_batch = train_value(merge(train, own), "seed_batch")  # a run spec key: validation never fills it in
        per_job = config["seeds_per_job"]
        if per_job and seed_batch > 1 and per_job % seed_batch:
            raise ConfigError(
                f"config key seeds_per_job={per_job} is not a multiple of the train.seed_batch={seed_batch} of "
                f"variant {name}: a job must hold whole seed batches"
            )
    for i, entry in enumerate(config["grid"]):
        for name in entry["variants"]:
            if name not in variants:
                raise ConfigError(f"config key grid[{i}].variants names {name!r}, which is not defined under variants")
    check_variant_names(config)
    for name in architecture_flag_variants(config):
        if name not in variants:
            raise ConfigError(
                f"config key architectures.flag.variants names {name!r}, which is not defined under variants"
            )
        if not any(name in entry["variants"] for entry in config["grid"]):
            raise ConfigError(f"config key architectures.flag.variants names {name!r}, which no grid entry trains")
    model = config["model"]
    if model["d_model"] % model["heads"]:
        raise ConfigError(
            f"config key model.d_model={model['d_model']} is not divisible by model.heads={model['heads']}"
        )
    for name, variant in variants.items():
        overrides = (variant or {}).get("model", {})
        if "d_model" in overrides or "heads" in overrides:
            d_model, heads = overrides.get("d_model", model["d_model"]), overrides.get("heads", model["heads"])
            if d_model % heads:
                raise ConfigError(
                    f"config key variants.{name}.model: d_model={d_model} is not divisible by heads={heads}"
                )


def architecture_flag_variants(config: dict) -> list[str]:
    """The variants whose runs the architectures stage compares with the rollout theories (none
    without an ``architectures`` section)."""
    return config["architectures"]["flag"]["variants"] if "architectures" in config else []


def check_variant_names(config: dict) -> None:
    """Every key that names a variant names one that is defined (and, for the remedies'
    baseline, one that runs in the grid: the time and memory ratios are taken against it)."""
    variants = config["variants"]
    baseline = config["remedies"]["baseline"]
    if baseline not in variants:
        raise ConfigError(f"config key remedies.baseline names {baseline!r}, which is not defined under variants")
    in_grid = {name for entry in config["grid"] for name in entry["variants"]}
    if baseline not in in_grid:
        raise ConfigError(
            f"config key remedies.baseline names {baseline!r}, which no grid entry runs (grid[*].variants)"
        )
    for key in ("flow_variants", "trace_variants"):
        unknown = sorted(set(config["influence"][key] or []) - set(variants))
        if unknown:
            raise ConfigError(f"config key influence.{key} names {unknown}, which are not defined under variants")


class _UniqueKeyLoader(yaml.SafeLoader):
    """YAML's safe loader, but a key written twice in one mapping is an error: plain YAML keeps the
    last, so a second ``train:`` section would silently drop the first."""

    def construct_mapping(self, node, deep=False):
        seen = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None,
                    None,
                    f"key {key!r} appears twice in one mapping (first at line {seen[key] + 1}); "
                    "YAML would keep only the last",
                    key_node.start_mark,
                )
            seen[key] = key_node.start_mark.line
        return super().construct_mapping(node, deep=deep)


def check_checkout(imported: str, checkout) -> None:
    """Refuse a workflow whose ``lostmid`` (the module file ``imported``) is not ``checkout``'s own
    src/: a second clone would otherwise run the first one's code without a word."""
    own = (Path(checkout) / "src" / "lostmid").resolve()
    found = Path(imported).resolve().parent
    if found != own:
        raise ConfigError(
            f"this workflow is {Path(checkout).resolve()} but it imports lostmid from {found}: "
            f"run `pip install -e {Path(checkout).resolve()}` (or set PYTHONPATH={own.parent})"
        )


def read_yaml(path) -> dict:
    """A config file's mapping; a file that is not valid YAML, or that writes a key twice in one
    mapping, is a ConfigError naming the file and the line (Snakemake's own message names neither)."""
    try:
        config = yaml.load(Path(path).read_text(), Loader=_UniqueKeyLoader)
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


def read_merged(paths) -> dict:
    """The config files ``paths`` (read_yaml), merged in this order as Snakemake merges
    ``--configfile`` (``merge``), each overlay after its base (``check_bases``); no files: an empty config."""
    check_bases(paths)
    merged: dict = {}
    for path in paths:
        merged = merge(merged, read_yaml(path))
    return merged


def check_bases(paths) -> None:
    """Every overlay among the config files ``paths`` comes after its base. An overlay declares its
    base (``base:``, the files beside it that it goes on top of); named without them, it is one
    error line that gives the command line that runs it."""
    given = [Path(path).resolve() for path in paths]
    for i, path in enumerate(paths):
        bases = [Path(path).parent / name for name in read_yaml(path).get("base") or []]
        if any(base.resolve() not in given[:i] for base in bases):
            shown = [_shown(name) for name in (*bases, path)]
            raise ConfigError(
                f"config file {shown[-1]} is an overlay on {' and '.join(shown[:-1])}: "
                f"name its base first: snakemake --cores all --configfile {' '.join(shown)}"
            )


def _shown(path) -> str:
    """``path`` as a person would type it here: relative to the working directory when under it, else
    absolute, without the ``..`` of a base named from its overlay's folder (runs/<run>/../../config/)."""
    relative = os.path.relpath(path)
    return os.path.normpath(path) if relative.startswith("..") else relative


def load(*paths, schema_path=schema.SCHEMA) -> dict:
    """Read, merge (read_merged) and validate config files, as the workflow sees them."""
    return validate(read_merged(paths), schema_path)


def runs(config: dict) -> list[Run]:
    """Every run of the grid: the union of each grid entry's product, sorted, no duplicates."""
    found = set()
    for entry in config["grid"]:
        for variant in entry["variants"]:
            for L in entry["L"]:
                for depth in entry["depth"]:
                    for seed in entry["seeds"]:
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
        merged[key] = (
            merge(merged[key], value) if isinstance(value, dict) and isinstance(merged.get(key), dict) else value
        )
    return merged


# train keys that say how far and how often to checkpoint, not what the weights become.
_SCHEDULE_KEYS = ("steps", "every")


@functools.cache
def neutral_values() -> dict[tuple[str, str], object]:
    """(section, key) -> neutral value of the run spec's keys that ``run_spec`` leaves out at that
    value: the ``default:`` of a property of the schema's ``$defs`` model or train (never filled
    into a config: lostmid.schema.fill_defaults stops at a ``$ref``)."""
    defs = schema.load()["$defs"]
    return {
        (section, key): sub["default"]
        for section in ("model", "train")
        for key, sub in defs[section]["properties"].items()
        if "default" in sub
    }


def train_value(train: dict, key: str):
    """Key ``key`` of a run spec's (or a config's) ``train`` block: as written, else its neutral
    value (``neutral_values``), which the spec leaves out. How every reader of such a key reads it."""
    return train[key] if key in train else neutral_values()[("train", key)]


def _without_neutral(section: str, part: dict) -> dict:
    """``part`` (a run spec's ``section``) without its keys at their neutral value. Keys added after the
    first checkpoints were written: at their neutral value they stay out of the spec, so that the
    fingerprints of every run that does not use them are as before the key."""
    for (name, key), neutral in neutral_values().items():
        if name == section and part.get(key) == neutral:
            del part[key]
    return part


def model_spec(config: dict, variant: str, L: int, depth: int) -> dict:
    """The ``model`` section of the run spec of ``variant`` at ``L`` and ``depth`` (any seed)."""
    model = merge(config["model"], (config["variants"][variant] or {}).get("model", {}))
    model.update(seq_len=L, depth=depth)
    return _without_neutral("model", model)


def run_spec(config: dict, run: Run) -> dict:
    """Everything that defines the weights of ``run``: the fingerprinted spec."""
    variant = config["variants"][run.variant] or {}
    train = merge(config["train"], variant.get("train", {}))
    for key in _SCHEDULE_KEYS:
        train.pop(key, None)
    return {
        **run.keys(),
        "model": model_spec(config, run.variant, run.L, run.depth),
        "train": _without_neutral("train", train),
        "remedy": copy.deepcopy(variant.get("remedy", {"kind": "none"})),
    }


# The keys of a run spec (run_spec), as the commands get it (--spec).
SPEC_KEYS = ("variant", "L", "depth", "seed", "model", "train", "remedy")


def check_spec(spec) -> dict:
    """A run spec a command got (``--spec`` JSON), checked against the schema as run_spec builds it:
    the grid keys as the grid's, ``model`` and ``train`` as the config's sections (``train`` without
    its schedule, ``model`` with the run's ``seq_len`` and ``depth``), ``remedy`` as a variant's. A
    violation is a ConfigError naming the key (``--spec key model is required``); returns the spec
    (integral floats made ints: lostmid.schema.check)."""
    if not isinstance(spec, dict):
        raise ConfigError(
            f"--spec must be a run spec, a JSON object of {', '.join(SPEC_KEYS)}; got a {type(spec).__name__}"
        )
    root = schema.load()
    grid = root["properties"]["grid"]["items"]["properties"]
    train = root["properties"]["train"]
    outline = {
        "type": "object",
        "additionalProperties": False,
        "required": list(SPEC_KEYS),
        "properties": {
            "variant": {"$ref": "#/$defs/name"},
            "L": grid["L"]["items"],
            "depth": grid["depth"]["items"],
            "seed": grid["seeds"]["items"],
            "model": {"type": "object"},
            "train": {
                "$ref": "#/$defs/train",
                "required": [key for key in train["required"] if key not in _SCHEDULE_KEYS],
            },
            "remedy": {"$ref": "#/$defs/remedy"},
        },
    }
    spec = copy.deepcopy(spec)
    schema.check(spec, outline, root, noun="--spec key")
    model = spec["model"]
    for key, value in (("seq_len", spec["L"]), ("depth", spec["depth"])):
        if model.pop(key, None) != value:
            raise ConfigError(f"--spec key model.{key} must be the run's {'L' if key == 'seq_len' else key}, {value}")
    schema.check(model, root["properties"]["model"], root, "model", noun="--spec key")
    model.update(seq_len=spec["L"], depth=spec["depth"])
    return spec


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


def settings_from_section(cls, raw, key: str):
    """The settings dataclass ``cls`` of the config section ``key`` (dotted: ``influence``,
    ``influence.init_sweep``, ``variants.<name>.remedy``), from ``raw``, the section as the config
    or a command's JSON gives it (None: an empty section). The one way settings are built:

    * the section is checked against its schema: an unknown key, a missing one or a bad value is a
      one-line ConfigError naming the key (``config key influence.flw_step is unknown``);
    * keys left out take the schema's defaults (the dataclasses have none of their own);
    * a key of the section that ``cls`` does not hold is left out (a subsection with settings of its
      own, or a key another stage reads); lists become tuples, numbers the type of their field;
    * ``cls.check()``, where the class has one, runs the section's cross-key rules.
    """
    root = schema.load()
    section = schema.section_schema(key, root)
    values = copy.deepcopy({} if raw is None else raw)
    schema.check(values, section, root, key)  # a section that is not a mapping too
    schema.fill_defaults(values, section, root)
    types = typing.get_type_hints(cls)
    settings = cls(**{field.name: _typed(values[field.name], types[field.name]) for field in fields(cls)})
    if hasattr(settings, "check"):
        settings.check()
    return settings


def _typed(value, kind):
    """``value`` as a field of type ``kind`` holds it: a list as a tuple (of the item type), an
    integer in a float field as a float, an integral float in an int field as an int; a field
    that takes a number or a list (``float | tuple[float, ...]``) the one the value is."""
    if isinstance(kind, types.UnionType):  # e.g. int | float: the value as it is; float | tuple: the one it is
        if not isinstance(value, (list, tuple)):
            return value
        kind = next(k for k in typing.get_args(kind) if k is tuple or typing.get_origin(k) is tuple)
    if kind is tuple or typing.get_origin(kind) is tuple:
        items = typing.get_args(kind)
        return tuple(_typed(item, items[0]) for item in value) if items else tuple(value)
    if kind in (float, int):
        return kind(value)
    return value
