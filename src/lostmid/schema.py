"""The config schema: every key the workflow reads, its type, range and default, in one file.

``config.schema.yaml`` sits beside this module and ships with the package, so the Snakefile, the
``lostmid`` commands and library callers read the same file. Its ``default:`` entries are the
only defaults of the config: ``fill_defaults`` writes them into a config (what Snakemake's
``validate(config, schema, set_default=True)`` does) and ``lostmid.config.settings_from_section``
into a section it turns into settings.

Defaults are filled along a section's own ``properties`` (and the ``items`` of its lists), never
through a ``$ref``: ``model``, ``train`` and the ``variants`` make up the run spec that is
fingerprinted into every checkpoint (lostmid.config), and the spec holds only what the config
says. A remedy section takes its defaults when its settings are built (lostmid.objectives.settings).
"""

from __future__ import annotations

import copy
import functools
import math
from pathlib import Path

import yaml

from lostmid.errors import ConfigError

SCHEMA = Path(__file__).with_name("config.schema.yaml")


@functools.cache
def load(path: Path = SCHEMA) -> dict:
    """The schema at ``path`` (read once per process; callers must not change it)."""
    return yaml.safe_load(Path(path).read_text())


def resolve(schema: dict, root: dict) -> dict:
    """``schema`` with its ``$ref`` to ``#/$defs/<name>`` followed."""
    while "$ref" in schema:
        schema = root["$defs"][schema["$ref"].removeprefix("#/$defs/")]
    return schema


def section_schema(key: str, root: dict) -> dict:
    """The schema of the config section ``key``, dotted (``influence.init_sweep``); a part that is
    not a property takes the ``additionalProperties`` schema (``variants.<name>.remedy``)."""
    schema = root
    for part in key.split("."):
        properties = resolve(schema, root).get("properties", {})
        schema = properties[part] if part in properties else resolve(schema, root)["additionalProperties"]
    return schema


def key_path(path) -> str:
    """``['grid', 0, 'L']`` -> ``grid[0].L``: how error messages name a config key."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "<top level>"


def check(instance, schema: dict, root: dict, key: str = "", noun: str = "config key") -> None:
    """Raise a one-line ConfigError naming the key of the first (shallowest) violation of ``schema``
    by ``instance``, the config section ``key`` (empty: the whole config; ``noun`` says what it is).

    A number that is not finite (NaN, infinity) is an error wherever it is. An integral float where
    the schema wants an integer (``16.0``) becomes that integer, in place, before anything reads it
    (so it gives the fingerprint of ``16``); any other float there is an error."""
    check_finite(instance, [key] if key else [], noun)
    validator = _validator({**schema, "$defs": root["$defs"]})
    while True:
        errors = sorted(validator.iter_errors(instance), key=lambda e: (len(e.path), list(map(str, e.path))))
        integral = [path for err in errors for path in _integral_floats(err)]
        if not integral:
            break
        for path in integral:
            parent = instance
            for part in path[:-1]:
                parent = parent[part]
            parent[path[-1]] = int(parent[path[-1]])
    if errors:
        raise ConfigError(message(errors[0], [key] if key else [], noun, root))


@functools.cache
def _strict_validator_class():
    """Draft 2020-12 whose ``integer`` is an int only (jsonschema's takes 16.0): check turns integral floats into
    ints.
    """
    import jsonschema

    base = jsonschema.Draft202012Validator
    strict = base.TYPE_CHECKER.redefine(
        "integer", lambda checker, value: isinstance(value, int) and not isinstance(value, bool)
    )
    return jsonschema.validators.extend(base, type_checker=strict)


def _validator(schema: dict):
    return _strict_validator_class()(schema)


def _integral_floats(err) -> list[tuple]:
    """Paths (absolute in the checked instance) of the integral floats that ``err`` or the errors
    under it (the branches of an anyOf) refuse only for not being ints."""
    found = []
    types = err.validator_value if isinstance(err.validator_value, list) else [err.validator_value]
    if err.validator == "type" and "integer" in types and isinstance(err.instance, float) and err.instance.is_integer():
        found.append(tuple(err.absolute_path))
    for sub in err.context or []:
        found += _integral_floats(sub)
    return found


def check_finite(instance, path: list, noun: str = "config key") -> None:
    """Refuse NaN and infinity anywhere in ``instance`` (a config or a section), naming the key: a
    schema's minimum or maximum never catches NaN, and training on it runs to a NaN loss."""
    if isinstance(instance, float) and not math.isfinite(instance):
        raise ConfigError(f"{noun} {key_path(path)}: {instance} is not a finite number")
    children = (
        instance.items() if isinstance(instance, dict) else enumerate(instance) if isinstance(instance, list) else ()
    )
    for name, value in children:
        check_finite(value, [*path, name], noun)


def message(err, prefix: list, noun: str = "config key", root: dict | None = None) -> str:
    """The line of a jsonschema error: an unknown, missing or misnamed key is named itself."""
    path = [*prefix, *err.path]
    if err.validator in ("additionalProperties", "unevaluatedProperties") and err.validator_value is False:
        known = set(err.schema.get("properties", {}))
        if "$ref" in err.schema and root is not None:  # unevaluatedProperties: the referenced section's keys too
            known |= set(resolve(err.schema, root).get("properties", {}))
        unknown = sorted(set(err.instance) - known)
        return f"{noun} {key_path([*path, unknown[0]])} is unknown"
    if err.validator == "required":
        missing = [name for name in err.validator_value if name not in err.instance]
        return f"{noun} {key_path([*path, missing[0]])} is required"
    if "propertyNames" in err.relative_schema_path:
        return f"{noun} {key_path([*path, err.instance])} is not allowed here: {err.message}"
    return f"{noun} {key_path(path)}: {err.message}"


def fill_defaults(instance: dict, schema: dict, root: dict) -> dict:
    """Set every key of ``instance`` that ``schema`` (resolved) gives a default and ``instance`` leaves
    out, in place, then the same in its subsections and in the mappings of its lists; returns it.
    ``instance`` must be valid: defaults are valid by construction (tests/test_config.py)."""
    for name, sub in resolve(schema, root).get("properties", {}).items():
        if name not in instance and "default" in sub:
            instance[name] = copy.deepcopy(sub["default"])
        if "$ref" in sub and "default" not in sub:  # run spec sections (an analysis section by $ref has a default)
            continue
        value = instance.get(name)
        if isinstance(value, dict) and "properties" in resolve(sub, root):
            fill_defaults(value, sub, root)
        elif isinstance(value, list) and "properties" in sub.get("items", {}):
            for item in value:
                fill_defaults(item, sub["items"], root)
    return instance
