"""Pooled evidence (lostmid.evidence.pooled): runs that repeat a seed set count once; fixed and random
effects over disjoint seed sets with their heterogeneity, read from run records (each run's evidence
row, its seeds from its overlay's grid), checked by hand on tiny synthetic run folders."""

import json

import numpy as np
import pandas as pd
import pytest
import yaml
from scipy import stats

from lostmid.errors import InputError
from lostmid.evidence import pooled
from lostmid.manifest import sha256
from lostmid.pages.evidence import pooled_markdown
from lostmid.stats import meta

CLAIM = "balance_lowers_e_inf_at_matched_accuracy"
ARMS = "balance vs baseline, L 16, depth 4, residual true"


def runs_of(lines):
    columns = ["seed_set", "run", "n_seeds", "estimate", "ci_low", "ci_high"]
    frame = pd.DataFrame(lines, columns=columns)
    return frame.assign(claim="c", setting="s", level=0.95, rule_kind="less_than_zero", margin=0.4)


def record(root, name, seeds, estimate, se, level=0.95, family_size=0, margin=0.05, layout="evidence"):
    """A run record folder: its manifest, its overlay's grid (the two arms on ``seeds`` at L 16, depth 4) and an
    evidence table holding CLAIM's row (a t interval of half-width t * ``se`` at ``level``; in a family of
    ``family_size`` rows the table keeps the Bonferroni level) beside another claim's row."""
    folder = root / name
    (folder / layout).mkdir(parents=True)
    commit = name.ljust(40, "0")
    grid = [{"variants": ["balance", "baseline"], "L": [16], "depth": [4], "seeds": list(seeds)}]
    (folder / "overlay.yaml").write_text(yaml.safe_dump({"base": ["config.yaml"], "grid": grid}))
    configs = [{"path": "overlay.yaml", "sha256": sha256(folder / "overlay.yaml")}]  # the overlay the run ran
    invocation = {"commit": commit, "configs": configs, "numerics": {}, "machine": {}}
    (folder / "manifest.json").write_text(json.dumps({**invocation, "invocations": [invocation]}))
    half = stats.t.ppf(0.5 + level / 2, len(seeds) - 1) * se
    row = {
        "claim": CLAIM,
        "setting": f"{ARMS}, checkpoint step {100 * len(seeds)} vs step 500",
        "L": 16,
        "depth": 4,
        "checkpoint": f"step {100 * len(seeds)} vs step 500",
        "estimate": estimate,
        "ci_low": estimate - half,
        "ci_high": estimate + half,
        "n_seeds": len(seeds),
        "rule_kind": "less_than_zero",
        "margin": margin,
        "family_size": family_size,
        "adjusted_level": 1 - (1 - level) / max(family_size, 1),
    }
    other = {**row, "claim": "balance_keeps_accuracy", "rule_kind": "equivalent_to_zero"}
    pd.DataFrame([row, other]).to_parquet(folder / layout / "evidence.parquet")
    return folder


def test_repeats_of_a_seed_set_count_once_as_their_mean_with_their_mean_standard_error():
    t = stats.t.ppf(0.975, 15)
    runs = runs_of(
        [
            ("0-15", "a", 16, -0.2, -0.2 - t * 0.3, -0.2 + t * 0.3),
            ("0-15", "b", 16, -0.6, -0.6 - t * 0.5, -0.6 + t * 0.5),
        ]
    )
    (line,) = pooled.per_seed_set(runs).itertuples()
    assert line.runs == 2 and line.estimate == pytest.approx(-0.4) and line.se == pytest.approx(0.4)


def test_the_fixed_effect_is_inverse_variance_and_identical_sets_have_no_heterogeneity():
    t15, t47 = stats.t.ppf(0.975, 15), stats.t.ppf(0.975, 47)
    runs = runs_of(
        [
            ("0-15", "a", 16, -1.0, -1.0 - t15 * 0.4, -1.0 + t15 * 0.4),
            ("200-247", "b", 48, -1.0, -1.0 - t47 * 0.2, -1.0 + t47 * 0.2),
        ]
    )
    (row,) = pooled.pooled_rows(runs).itertuples()
    se = 1 / np.sqrt(1 / 0.4**2 + 1 / 0.2**2)
    assert row.fixed == pytest.approx(-1.0) and row.fixed_high - row.fixed == pytest.approx(1.959964 * se, rel=1e-5)
    assert row.Q == pytest.approx(0.0) and row.I2 == 0 and row.tau2 == 0 and row.random == pytest.approx(-1.0)
    assert row.verdict == "supported" and row.n_seeds == 64


def test_a_claim_on_one_seed_set_gets_no_pooled_row():
    t = stats.t.ppf(0.975, 15)
    runs = runs_of([("0-15", "a", 16, -1.0, -1.0 - t, -1.0 + t), ("0-15", "b", 16, -0.5, -0.5 - t, -0.5 + t)])
    assert pooled.pooled_rows(runs).empty


def test_three_run_records_pool_by_hand(tmp_path):
    """Two runs of seeds 0-3 (SE 0.4 in a family of 3 rows, 0.2) and one of 10-15 at the 90% level (SE 0.3): the
    repeat counts once as (-0.8, SE 0.3); then two sets of equal weight 1/0.09, so fixed = -0.5 with SE 0.3/sqrt 2,
    Q = 2 (1 df), tau^2 = (Q - 1) / (1/0.09) = 0.09, random = -0.5 with SE sqrt(0.18 / 2) = 0.3, I^2 = 1/2."""
    folders = [
        record(tmp_path, "first", range(4), -1.0, 0.4, family_size=3),
        record(tmp_path, "again", range(4), -0.6, 0.2, layout="tables"),
        record(tmp_path, "fresh", range(10, 16), -0.2, 0.3, level=0.9),
    ]
    runs = pooled.read_runs(folders, CLAIM)
    assert list(runs.seed_set) == ["0-3", "0-3", "10-15"] and runs.level.to_numpy() == pytest.approx([0.95, 0.95, 0.9])
    assert list(runs.run) == ["first (first0000000)", "again (again0000000)", "fresh (fresh0000000)"]
    assert (runs.setting == ARMS).all() and runs.checkpoint.iloc[0] == "step 400 vs step 500"
    (row,) = pooled.pooled_rows(runs).itertuples()
    z = stats.norm.ppf(0.975)
    assert row.seed_sets == "0-3 (2 runs); 10-15 (1 run)" and row.n_seeds == 10 and row.df == 1
    assert row.fixed == pytest.approx(-0.5) and row.fixed_high == pytest.approx(-0.5 + z * 0.3 / np.sqrt(2))
    assert (
        row.Q == pytest.approx(2.0) and row.p_Q == pytest.approx(stats.chi2.sf(2, 1)) and row.I2 == pytest.approx(0.5)
    )
    assert row.tau2 == pytest.approx(0.09) and row.random == pytest.approx(-0.5)
    assert (row.random_low, row.random_high) == pytest.approx((-0.5 - z * 0.3, -0.5 + z * 0.3))
    assert row.verdict == "inconclusive" and row.rule.startswith("less_than_zero, margin 0.05")
    assert "| 0-3 (2 runs); 10-15 (1 run) | 10 |" in pooled_markdown(runs, pooled.pooled_rows(runs))


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda root: [root], r"no evidence table \(evidence/evidence.parquet or tables/evidence.parquet\)"),
        (
            lambda root: [record(root, "a", range(4), -1.0, 0.4), record(root, "b", range(8, 12), -1.0, 0.4)],
            "has no row of claim 'absent'",
        ),
        (
            lambda root: [
                record(root, "a", range(4), -1.0, 0.4),
                record(root, "b", range(8, 12), -1.0, 0.4, margin=0.1),
            ],
            r"differ in rule \(a \(a0+\): less_than_zero, 0.05; b \(b0+\): less_than_zero, 0.1\)",
        ),
        (
            lambda root: [record(root, "a", range(4), -1.0, 0.4), record(root, "b", range(2, 6), -1.0, 0.4)],
            "the seed sets 0-3 and 2-5 share seeds 2-3 without being equal",
        ),
    ],
    ids=["no evidence table", "claim not in a run", "rules differ", "seed sets overlap"],
)
def test_bad_run_records_are_one_line_naming_the_problem(tmp_path, make, message):
    claim = "absent" if "absent" in message else CLAIM
    with pytest.raises(InputError, match=message) as caught:
        pooled.read_runs(make(tmp_path), claim)
    assert "\n" not in str(caught.value) and caught.value.path is None  # a committed record is never moved aside


def test_the_command_pools_run_folders_and_reports_bad_input_in_one_line(tmp_path, capsys):
    from lostmid.cli.main import main

    folders = [str(record(tmp_path, name, seeds, -1.0, 0.3)) for name, seeds in (("a", range(4)), ("b", range(8, 12)))]
    assert (
        main(["pooled", "--runs", *folders, "--claim", CLAIM, "--setting", "balance vs", "--out", str(tmp_path / "p")])
        == 0
    )
    assert "| 0-3 (1 run); 8-11 (1 run) | 8 |" in capsys.readouterr().out
    assert pd.read_parquet(tmp_path / "p").verdict.item() == "supported"
    assert main(["pooled", "--runs", str(tmp_path / "missing"), "--claim", CLAIM]) == 2
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("lostmid")]
    assert lines == [f"lostmid pooled: error: {tmp_path / 'missing'}: no such run folder"]


def test_the_random_effects_agree_with_statsmodels_where_its_tau2_is_not_negative():
    from statsmodels.stats.meta_analysis import combine_effects

    estimates, variances = np.array([-0.4, -0.965, -0.999]), np.array([0.1, 0.03, 0.07])
    reference = combine_effects(estimates, variances, method_re="dl")
    tau2 = meta.dersimonian_laird_tau2(estimates, variances)
    assert tau2 == pytest.approx(reference.tau2) and meta.cochran_q(estimates, variances) == pytest.approx(reference.q)
    assert meta.inverse_variance(estimates, variances + tau2)[0] == pytest.approx(
        reference.summary_frame().loc["random effect"].eff
    )
