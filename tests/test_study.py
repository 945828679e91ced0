"""The pre-registered study (docs/study.md): its config, its plan, and the record of the plan a run began under."""

from __future__ import annotations

import subprocess

import numpy as np
import pandas as pd
import pytest
import yaml

from lostmid import seed_ledger
from lostmid.config import read_merged
from lostmid.seed_ledger import check_fresh_seeds, read_ledger

from conftest import REPO, begun_under, copy_record, plan_repo

LEDGER = REPO / seed_ledger.LEDGER


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


def test_every_primary_and_secondary_names_an_endpoint_the_findings_read():
    from lostmid.study import estimators as est
    from lostmid.study.findings import ENDPOINTS, SECONDARIES

    plan = yaml.safe_load((REPO / "study" / "plan.yaml").read_text())
    secondaries = yaml.safe_load(SECONDARIES.read_text())["secondaries"]
    for row in [*plan["primaries"], *secondaries]:
        name = row["estimator"].rsplit(".", 1)[-1]
        assert name in ENDPOINTS, row["id"]
        assert not str(row["estimator"]).startswith("lostmid.") or hasattr(est, name), row["id"]  # the plan's path
    assert len({row["id"] for row in secondaries}) == len(secondaries)


def committed_plan(repo, text: str, name: str = "plan.yaml"):
    """A git repository at ``repo`` whose first commit holds study/``name`` with ``text``; returns (git, plan)."""

    def git(*words):
        subprocess.run(["git", "-C", str(repo), *words], check=True, capture_output=True)

    git("init", "-q")
    git("config", "user.email", "t@t"), git("config", "user.name", "t")
    plan = repo / "study" / name
    plan.parent.mkdir(exist_ok=True)
    plan.write_text(text)
    git("add", "."), git("commit", "-q", "-m", "plan")
    return git, plan


def run_manifest(repo, plan: str = "study/plan.yaml") -> dict:
    """The manifest a run of ``repo`` would write as it starts, with the plan recorded (lostmid.manifest.start
    without its probe of a job's numerics, which imports torch in a child process)."""
    from lostmid import manifest

    invocation = {
        **manifest.source(repo),
        "configs": [],
        "records": [manifest.recorded(repo, plan)],
        "numerics": {"mode": "deterministic"},
        "machine": {"cpu": "test", "cores": 2, "architecture": "x86_64"},
        "versions": {"torch": "test"},
        "finished": None,
    }
    return {**invocation, "invocations": [invocation]}


def test_endpoints_are_primary_only_under_the_plan_every_invocation_began_under(tmp_path):
    from lostmid.study.record import plan_status

    git, plan = committed_plan(tmp_path, "primaries: []\n")
    (tmp_path / "run.txt").write_text("run\n")
    git("add", "."), git("commit", "-q", "-m", "run")
    started = run_manifest(tmp_path)
    assert plan_status(tmp_path, plan, started)[0] is True
    assert plan_status(tmp_path, plan, None) == (
        False,
        "the record has no manifest: the plan the run began under is unknown",
    )
    plan.write_text("primaries: [changed]\n")
    primary, why = plan_status(tmp_path, plan, started)
    assert not primary and why.startswith("the plan changed after the run began")
    git("commit", "-qam", "the plan, again, after the run")
    plan.write_text("primaries: []\n")  # the run's bytes, committed after the run's commit
    git("commit", "-qam", "the plan as it was")
    primary, why = plan_status(tmp_path, plan, started)
    assert not primary and "is not an ancestor of the run's" in why


def test_the_second_plan_is_checked_as_the_first_by_its_own_path(tmp_path):
    from lostmid.study.record import plan_status

    git, second = committed_plan(tmp_path, "primaries: [second]\n", "plan2.yaml")
    first = tmp_path / "study" / "plan.yaml"
    first.write_text("primaries: []\n")
    git("add", "."), git("commit", "-q", "-m", "run")
    started = run_manifest(tmp_path, "study/plan2.yaml")  # the overlay's `plan: study/plan2.yaml`
    assert plan_status(tmp_path, second, started)[0] is True
    primary, why = plan_status(tmp_path, first, started)
    assert not primary and why.endswith("recorded no plan study/plan.yaml")


# --------------------------------------------------------------------------- the reading


def test_the_four_outcomes_are_read_off_the_interval_against_zero_and_the_size():
    from lostmid.study import reading

    assert reading.outcome(0.8, 1.5, "increase", 0.69) == reading.AT_LEAST
    assert reading.outcome(0.1, 0.5, "increase", 0.69) == reading.SMALLER
    assert reading.outcome(-0.2, 0.5, "increase", 0.69) == reading.NO_EFFECT
    assert reading.outcome(-0.9, -0.3, "increase", 0.69) == reading.NO_EFFECT  # the other side of 0
    assert reading.outcome(-0.2, 0.9, "increase", 0.69) == reading.INCONCLUSIVE
    assert reading.outcome(0.2, 0.9, "increase", 0.69) == reading.INCONCLUSIVE  # an effect, its size undecided
    assert reading.outcome(-0.09, -0.06, "decrease", 0.05) == reading.AT_LEAST  # a decrease: mirrored
    assert reading.outcome(-0.04, 0.01, "decrease", 0.05) == reading.NO_EFFECT
    assert reading.outcome(float("nan"), float("nan"), "decrease", 0.05) == reading.INCONCLUSIVE


def test_holm_gives_each_primary_the_level_of_its_rank_until_the_first_it_cannot_reject():
    from lostmid.study.reading import holm_levels

    levels = holm_levels([0.04, 0.001, 0.03, 0.2], alpha=0.05)
    # sorted: 0.001 (rank 1: 0.05/4), 0.03 (rank 2: 0.05/3 = 0.0167, not rejected: stop), then 0.04 and 0.2
    assert levels == [0.05 / 3, 0.05 / 4, 0.05 / 3, 0.05 / 3]
    assert holm_levels([0.001, 0.002], alpha=0.05) == [0.025, 0.05]


# --------------------------------------------------------------------------- planted effects


def planted_failure(variant: str, seeds, slopes, step: int = 500, n: int = 512, seed: int = 0) -> pd.DataFrame:
    """A failure table whose seed s fails with logit = -1.5 + slope_s (p - 1/2) at every flag position of L 16,
    binomial draws of n sequences, at step 0 (everything fails half the time) and at ``step``."""
    rng = np.random.default_rng(seed)
    rows = []
    for s, slope in zip(seeds, slopes):
        for f in range(2, 17):
            p = f / 16
            for at, rate in ((0, 0.5), (step, 1 / (1 + np.exp(1.5 - slope * (p - 0.5))))):
                failures = int(rng.binomial(n, rate))
                rows.append(
                    {
                        "variant": variant,
                        "L": 16,
                        "depth": 4,
                        "seed": s,
                        "step": at,
                        "flag_pos": f,
                        "p": p,
                        "n": n,
                        "failures": failures,
                        "failures_first_half": failures // 2,
                    }
                )
    return pd.DataFrame(rows)


def planted_plan(sizes) -> dict:
    primaries = [
        {
            "id": f"slope_{k}",
            "question": f"Planted slope {k}?",
            "arms": [f"arm_{k}"],
            "checkpoint": 500,
            "estimator": "lostmid.study.estimators.position_slope",
            "unit": "seed",
            "scale": "log odds per unit p",
            "direction": "increase",
            "size": size,
            "words": "w",
            "source": "test",
        }
        for k, size in enumerate(sizes)
    ]
    arms = {f"arm_{k}": {"variants": [f"v{k}"]} for k in range(len(sizes))}
    return {
        "alpha": 0.05,
        "level": 0.95,
        "primaries": primaries,
        "run": {"arms": arms},
        "checkpoints": {"fixed_mid_step": 500, "horizon": 500},
    }


def test_planted_effects_give_each_of_the_four_outcomes_and_a_changed_plan_demotes_them():
    from lostmid.study import reading
    from lostmid.study.findings import rows
    from lostmid.study.record import Record

    seeds = range(24)
    rng = np.random.default_rng(1)
    failure = pd.concat(
        [
            planted_failure("v0", seeds, 3.0 + 0.2 * rng.standard_normal(24)),  # well beyond the size 0.69
            planted_failure("v1", seeds, 0.35 + 0.1 * rng.standard_normal(24)),  # an effect, below the size
            planted_failure("v2", seeds, 0.0 * rng.standard_normal(24)),  # none
            planted_failure("v3", range(3), [0.0, 2.0, -1.0]),  # three noisy seeds: undecided
        ],
        ignore_index=True,
    )
    plan = planted_plan([0.69, 0.69, 0.69, 0.69])
    found = rows(plan, Record(failure=failure), primary_status=True)
    assert [row.outcome for row in found] == [
        reading.AT_LEAST,
        reading.SMALLER,
        reading.NO_EFFECT,
        reading.INCONCLUSIVE,
    ]
    assert all(row.sentence.endswith(".") for row in found) and found[0].level < 0.05
    demoted = rows(plan, Record(failure=failure), primary_status=False)
    assert all(row.outcome.startswith("exploratory: ") for row in demoted)


def test_an_endpoint_without_data_reads_not_yet_run_and_counts_in_holm():
    from lostmid.study.findings import rows
    from lostmid.study.reading import NOT_YET_RUN
    from lostmid.study.record import Record

    plan = planted_plan([0.69, 0.69])
    failure = planted_failure("v0", range(12), [3.0] * 12)
    found = rows(plan, Record(failure=failure), primary_status=True)
    assert found[1].outcome == NOT_YET_RUN and found[1].sentence == f"At step 500: No answer: {NOT_YET_RUN}."
    assert found[0].level == 0.05 / 2  # k = 2: the missing one keeps its place


def planted_influence(failure: pd.DataFrame, influence_of) -> pd.DataFrame:
    """A layer-0 influence table of the runs of ``failure``: density at position j = f - 1 from ``influence_of``."""
    rows = failure[["variant", "L", "depth", "seed", "step", "flag_pos"]].drop_duplicates()
    return pd.DataFrame(
        {
            "variant": rows.variant,
            "L": rows.L,
            "depth": rows.depth,
            "seed": rows.seed,
            "step": rows.step,
            "layer": 0,
            "position": rows.flag_pos - 1,
            "p": (rows.flag_pos - 1) / 16,
            "energy": 1.0,
            "density": [influence_of(s, f) for s, f in zip(rows.seed, rows.flag_pos)],
        }
    )


def test_influence_beyond_position_finds_a_planted_link_and_none_where_influence_is_position_alone():
    from lostmid.study import estimators as est

    rng = np.random.default_rng(2)
    noise = {(s, f): rng.standard_normal() for s in range(24) for f in range(2, 17)}
    rows = []
    for s in range(24):  # failure rises with p and, beyond it, falls with a seed-specific influence
        for f in range(2, 17):
            logit = -1.5 + 1.0 * (f / 16 - 0.5) - 0.8 * noise[s, f]
            failures = int(rng.binomial(512, 1 / (1 + np.exp(-logit))))
            rows.append(
                {
                    "variant": "b",
                    "L": 16,
                    "depth": 4,
                    "seed": s,
                    "step": 500,
                    "flag_pos": f,
                    "p": f / 16,
                    "n": 512,
                    "failures": failures,
                    "failures_first_half": int(rng.binomial(failures, 0.5)),
                }
            )
    failure = pd.DataFrame(rows)
    linked = planted_influence(failure, lambda s, f: np.exp(noise[s, f] - 0.2 * f))
    effect = est.influence_beyond_position(failure, linked, ["b"], 500)
    low, high = effect.interval(0.95)
    assert high < -0.5 and effect.n == 24  # less influence, more failure, beyond position
    reliability = est.split_half_reliability(failure, linked, ["b"], 500)
    assert reliability["mean_rho"] < -0.3 and 0 < reliability["split_half_r"] <= reliability["reliability"] <= 1
    position_only = planted_influence(failure, lambda s, f: np.exp(-0.2 * f + 0.01 * rng.standard_normal()))
    low, high = est.influence_beyond_position(failure, position_only, ["b"], 500).interval(0.95)
    assert not high < -0.5  # collinear with position: no planted link is found


def test_speed_and_preference_are_paired_by_seed_over_the_fix_arms_blocks():
    from lostmid.study import estimators as est

    base = planted_failure("base", range(8), [2.0] * 8)
    fix = pd.concat([planted_failure("fix_1", range(4), [0.0] * 4), planted_failure("fix_2", range(4, 8), [0.0] * 4)])
    failure = pd.concat([base, fix], ignore_index=True)
    preference = est.preference_difference(failure, ["fix_1", "fix_2"], ["base"], 500)
    assert preference.n == 8 and preference.interval(0.95)[1] < -0.1  # the fix's flat profile: less preference
    speed = est.speed_difference(failure, ["fix_1", "fix_2"], ["base"], 500)
    assert speed.n == 8 and abs(speed.estimate) < 0.05  # the same mean failure over training, by construction
    assert list(est.speed_differences(failure, ["fix_1"], ["base"], 500).index) == [0, 1, 2, 3]


def test_the_findings_page_names_both_commits_and_puts_its_answers_into_the_readme(tmp_path):
    """A copy of runs/study whose run began under a copy of the plan committed in a checkout (less its slowest
    primary): primary, the plan's commit beside the run's, one figure per answered question."""
    from lostmid.pages.findings import README_END, README_START, write_findings

    repo = plan_repo(tmp_path)
    started = begun_under(copy_record("study", tmp_path), repo)
    out = repo / "docs" / "findings.md"
    readme = repo / "README.md"
    readme.write_text(f"# x\n{README_START}\nold\n{README_END}\nrest\n")
    found = write_findings(
        repo / "study" / "plan.yaml", tmp_path / "study", out, repo / "docs" / "figures", repo, readme
    )
    page = out.read_text()
    assert f"{README_START}\nFrom [findings.md](docs/findings.md):\n\n- **Does the residual" in readme.read_text()
    unwrapped = " ".join(readme.read_text().split())  # the README's lines are wrapped (lostmid.io.wrap_prose)
    assert "old" not in readme.read_text() and unwrapped.count(" ".join(found[0].sentence.split())) == 1
    assert f"commit `{started['records'][0]['commit']}`" in page and f"`{started['commit'][:12]}`" in page
    assert "Endpoints: primary" in page and found[0].outcome == "at least the source's size"
    assert "](figures/findings_primaries.png)" in page  # one forest of every primary


def planted_retrieval(windows: int = 12, n: int = 1024, share_effect: float = 1.0, dip: float = 0.5, seed: int = 3):
    """Per-example retrieval rows: success depends on q (a dip of ``dip`` in the middle) and, beyond it, on the
    log task-free share with ``share_effect`` log odds per unit of log share."""
    rng = np.random.default_rng(seed)
    rows = []
    for window in range(windows):
        for task in ("single", "number"):
            for q in np.arange(9) / 8:
                for _ in range(3):
                    log_share = -3 + 0.5 * q + rng.standard_normal()
                    middle = dip if 0.25 <= q <= 0.75 else 0.0
                    logit = 1.5 - 4 * middle + share_effect * (log_share + 3)
                    success = float(rng.random() < 1 / (1 + np.exp(-logit)))
                    rows.append(
                        {
                            "window": window,
                            "n": n,
                            "task": task,
                            "q": q,
                            "success": success,
                            "influence_free": float(np.exp(log_share)),
                            "weights": "pretrained",
                        }
                    )
    return pd.DataFrame(rows)


def test_the_retrieval_estimators_find_a_planted_dip_and_a_planted_share_effect_over_windows():
    from lostmid.study import estimators as est

    examples = planted_retrieval()
    dip = est.middle_minus_ends(examples, n=1024)
    assert dip.n == 12 and dip.interval(0.95)[1] < 0
    share = est.share_beyond_position(examples, n=1024, resamples=40)
    assert share.n == 12 and share.interval(0.95)[0] > 0.3 and share.p_value < 0.05
    none = est.share_beyond_position(planted_retrieval(share_effect=0.0, seed=4), n=1024, resamples=40)
    assert none.interval(0.95)[0] < 0 < none.interval(0.95)[1]
    assert abs(est.end_minus_start(examples, 1024).estimate) < 0.15  # the planted ends are alike


def test_the_thermodynamic_limit_is_the_growth_of_log_first_over_last_per_doubling_of_L():
    from lostmid.study import estimators as est

    rows = [
        {"seed": seed, "L": L, "position": j, "output_jacobian": 10.0 ** (-(seed + 1) * np.log2(L) * (j - 1) / (L - 1))}
        for seed in (0, 1)
        for L in (8, 16, 32)
        for j in range(1, L + 1)
    ]
    growth = est.imbalance_growth(pd.DataFrame(rows), "seed")
    assert growth.units.to_dict() == pytest.approx({0: 1.0, 1: 2.0})  # log10 first/last = (seed + 1) log2 L


def test_the_second_plan_names_its_estimators_sizes_and_power_and_its_seeds_are_reserved():
    import importlib

    from lostmid.study.plan import read_plan

    plan = read_plan(REPO / "study" / "plan2.yaml")  # at most ten primaries, each with its keys (one line if not)
    for primary in plan["primaries"]:
        module, name = primary["estimator"].rsplit(".", 1)
        assert callable(getattr(importlib.import_module(module), name)), primary["id"]
        assert primary["size_label"] in ("source", "our margin") and primary["size_why"], primary["id"]
        assert {"units", "half_width", "p_decided"} <= set(primary["power"]), primary["id"]
    overlay = yaml.safe_load((REPO / "config" / "study2.yaml").read_text())  # the plan's overlay, moved to config/
    assert overlay["plan"] == "study/plan2.yaml"
    assert grid_seeds(overlay) == read_ledger(LEDGER)["study2"] == set(range(1000, 1384))
    fits = [v["remedy"]["fit"] for v in overlay["variants"].values() if "remedy" in v]
    assert len(fits) == 48 and len({f["seed"] for f in fits}) == 48  # >= 12 fits per fix arm, none shared
    check_fresh_seeds(overlay, LEDGER)  # no seed of another config
