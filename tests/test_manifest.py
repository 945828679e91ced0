"""A run records itself (lostmid.manifest), and a page is stamped from that record alone."""

from __future__ import annotations

import json
import subprocess

import pytest

from lostmid import manifest
from lostmid.errors import InputError


def checkout(tmp_path):
    """A git checkout with a config and a plan, committed."""
    root = tmp_path / "repo"
    (root / "config").mkdir(parents=True)
    (root / "config" / "run.yaml").write_text("device: cpu\n")
    (root / "plan.yaml").write_text("primaries: []\n")
    for words in (["init", "-q"], ["add", "."], ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "plan"]):
        subprocess.run(["git", "-C", str(root), *words], check=True)
    return root


def test_a_run_records_its_commit_configs_plan_numerics_and_machine(tmp_path, monkeypatch):
    root = checkout(tmp_path)
    monkeypatch.chdir(root)
    results = root / "results"
    started = manifest.start(results, root, ["config/run.yaml"], records=["plan.yaml"])
    assert started["commit"] and started["dirty"] is False and started["finished"] is None
    assert started["configs"] == [{"path": "config/run.yaml", "sha256": manifest.sha256(root / "config/run.yaml")}]
    assert started["records"][0]["commit"] == started["commit"]
    assert started["numerics"]["mode"] == "deterministic" and started["machine"]["cores"] >= 1
    assert "not finished" in manifest.stamp(started).splitlines()[0]
    finished = manifest.finish(results, "success")
    assert finished["wall_s"] >= 0 and finished["cpu_s"] >= 0 and finished["status"] == "success"
    page = manifest.stamp(finished)
    assert page.startswith(f"Run: commit `{started['commit'][:12]}`; config `config/run.yaml` (")
    assert "numerics deterministic" in page and "Plan `plan.yaml`" in page


def test_a_dirty_or_resumed_run_says_so_on_the_first_line(tmp_path, monkeypatch):
    root = checkout(tmp_path)
    monkeypatch.chdir(root)
    manifest.start(root / "results", root, ["config/run.yaml"])
    manifest.finish(root / "results", "error")
    (root / "config" / "run.yaml").write_text("device: auto\n")
    manifest.start(root / "results", root, ["config/run.yaml"])
    found = manifest.finish(root / "results", "success")
    assert len(found["invocations"]) == 2
    first = manifest.stamp(found).splitlines()[0]
    assert first.startswith("**Not reproducible as stamped") and "uncommitted changes" in first


def test_two_workflow_processes_on_one_results_folder_each_complete_their_own_invocation(tmp_path, monkeypatch):
    root = checkout(tmp_path)
    monkeypatch.chdir(root)
    monkeypatch.setattr(manifest.os, "getpid", lambda: 101)
    manifest.start(root / "results", root, ["config/run.yaml"])
    monkeypatch.setattr(manifest.os, "getpid", lambda: 202)  # a second process, started while the first runs
    manifest.start(root / "results", root, ["config/run.yaml"])
    monkeypatch.setattr(manifest.os, "getpid", lambda: 101)  # the first ends: its own invocation, not the last
    first = manifest.finish(root / "results", "success")["invocations"]
    assert [i["status"] if i["finished"] else None for i in first] == ["success", None]
    monkeypatch.setattr(manifest.os, "getpid", lambda: 202)
    both = manifest.finish(root / "results", "error")
    assert [i["status"] for i in both["invocations"]] == ["success", "error"] and both["status"] == "error"
    with pytest.raises(ValueError, match="completed already"):
        manifest.finish(root / "results", "error")


def test_a_missing_or_broken_manifest_is_one_line(tmp_path):
    with pytest.raises(InputError, match="no manifest"):
        manifest.read(tmp_path)
    (tmp_path / "manifest.json").write_text("{")
    with pytest.raises(InputError, match="does not parse"):
        manifest.read(tmp_path)
    (tmp_path / "manifest.json").write_text(json.dumps({"commit": "x"}))
    with pytest.raises(InputError, match="lacks configs, numerics, machine, invocations"):
        manifest.read(tmp_path)
