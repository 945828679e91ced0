"""The pre-registered study (docs/study.md): its config, its plan, and the record of the plan a run began under."""

from __future__ import annotations

import json
import subprocess

import yaml

from lostmid.config import read_merged
from lostmid.seed_ledger import check_fresh_seeds, read_ledger

from conftest import REPO

LEDGER = REPO / "config" / "seed_ledger.yaml"


def grid_seeds(config: dict) -> set[int]:
    return {seed for entry in config["grid"] for seed in entry["seeds"]}


def test_the_study_trains_48_fresh_seeds_per_arm_and_every_fix_block_has_its_own_fit_seed():
    config = read_merged([REPO / "config" / "config.yaml", REPO / "config" / "study.yaml"])
    assert grid_seeds(config) == set(range(720, 816)) == read_ledger(LEDGER)["study"]
    check_fresh_seeds(config, LEDGER)  # no error
    plan = yaml.safe_load((REPO / "study" / "plan.yaml").read_text())
    fit_seeds = set()
    for arm in plan["run"]["arms"].values():
        seeds = [
            seed for entry in config["grid"] if set(entry["variants"]) & set(arm["variants"]) for seed in entry["seeds"]
        ]
        assert len(seeds) == 48 and len(set(seeds)) == 48, arm
        for variant in arm["variants"]:
            fit = config["variants"][variant].get("remedy", {}).get("fit")
            if fit:
                fit_seeds.add(fit["seed"])
    assert len(fit_seeds) == 8  # 4 fits per fix arm, none shared


def test_the_plan_has_at_most_ten_primaries_each_with_its_reading():
    plan = yaml.safe_load((REPO / "study" / "plan.yaml").read_text())
    primaries = plan["primaries"]
    assert len(primaries) <= 10 and len({p["id"] for p in primaries}) == len(primaries)
    for primary in primaries:
        assert primary["direction"] in ("increase", "decrease") and primary["size"] > 0, primary["id"]
        assert primary["estimator"].startswith("lostmid.study.estimators."), primary["id"]
        for key in ("question", "arms", "checkpoint", "unit", "words", "size_why"):
            assert primary.get(key) not in (None, ""), (primary["id"], key)


def test_the_stamp_records_the_plan_bytes_and_the_commits(tmp_path):
    from lostmid.study.record import plan_stamp, sha256

    def git(*words):
        subprocess.run(["git", "-C", str(tmp_path), *words], check=True, capture_output=True)

    git("init", "-q")
    git("config", "user.email", "t@t"), git("config", "user.name", "t")
    plan = tmp_path / "study" / "plan.yaml"
    plan.parent.mkdir()
    plan.write_text("primaries: []\n")
    git("add", "."), git("commit", "-q", "-m", "plan")
    (tmp_path / "run.txt").write_text("run\n")
    git("add", "."), git("commit", "-q", "-m", "run")
    stamp = plan_stamp(tmp_path, plan)
    assert stamp["plan"] == "study/plan.yaml" and stamp["plan_sha256"] == sha256(plan)
    assert stamp["plan_commit"] != stamp["run_commit"] and stamp["run_dirty"] is False
    plan.write_text("primaries: [changed]\n")
    assert plan_stamp(tmp_path, plan)["run_dirty"] is True and json.dumps(stamp)
