"""The seed ledger (runs/seed_ledger.yaml, lostmid.seed_ledger): a config that declares its seeds fresh is
refused, before any job, when one of them was used by another config."""

import subprocess
import sys

import pytest
import yaml

from lostmid import seed_ledger
from lostmid.config import read_merged
from lostmid.errors import ConfigError
from lostmid.seed_ledger import check_fresh_seeds, grid_seeds, parse_seeds, read_ledger

from conftest import CONFIG_FILES, REPO

LEDGER = REPO / seed_ledger.LEDGER


def test_seeds_are_integers_and_inclusive_ranges():
    assert parse_seeds("0-3, 7") == {0, 1, 2, 3, 7}
    with pytest.raises(ConfigError, match="runs backwards"):
        parse_seeds("5-2")


def test_the_confirmatory_config_is_fresh_and_recorded():
    config = read_merged([REPO / "config" / "config.yaml", REPO / "runs" / "confirm" / "overlay.yaml"])
    assert grid_seeds(config) == set(range(400, 424)) == read_ledger(LEDGER)["confirm"]
    check_fresh_seeds(config, LEDGER)  # no error


def test_every_trained_config_of_the_repository_is_in_the_ledger():
    ledger = read_ledger(LEDGER)
    used = set().union(*ledger.values())
    for path in CONFIG_FILES:
        config = yaml.safe_load(path.read_text())
        if "grid" in config:
            assert grid_seeds(config) <= used, path.relative_to(REPO)


def test_a_config_that_declares_fresh_seeds_but_reuses_one_is_refused_in_one_line():
    config = {"fresh_seeds": "confirm", "grid": [{"seeds": [22, 23, 400]}]}
    with pytest.raises(ConfigError) as refused:
        check_fresh_seeds(config, LEDGER)
    message = str(refused.value)
    assert "\n" not in message and message.startswith("config 'confirm' declares fresh seeds but reuses")
    assert "22-23 by config" in message and "400" not in message.split("reuses")[1]


def test_fresh_seeds_the_ledger_does_not_record_are_refused_too():
    with pytest.raises(ConfigError, match="does not record seeds 900"):
        check_fresh_seeds({"fresh_seeds": "confirm", "grid": [{"seeds": [400, 900]}]}, LEDGER)


def test_without_the_declaration_nothing_is_checked():
    check_fresh_seeds({"grid": [{"seeds": [0]}]}, LEDGER)


def test_the_workflow_refuses_a_reused_fresh_seed_before_any_job(tmp_path):
    overlay = tmp_path / "fresh.yaml"
    overlay.write_text("fresh_seeds: smoke\n")
    command = [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "-d", str(tmp_path), "--cores", "1"]
    command += ["--dry-run", "--configfile", str(REPO / "tests" / "smoke.yaml"), str(overlay)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert result.returncode != 0 and "This was a dry-run" not in result.stdout
    refusal = "config 'smoke' declares fresh seeds but reuses seeds used before: 0-1 by config"
    assert refusal in result.stdout + result.stderr
    assert not (tmp_path / "results").exists()
