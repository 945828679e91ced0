"""The paper's validation protocol (docs/validation.md) on synthetic tables with known answers: each
arm compared at its own mid-training checkpoint, Algorithm 3's trace claim on the loss-free
profiles, the position shift, the overhead, the dose-response of a penalty, the rows' p-values; the
measurements behind them (held-out cross-entropy, the loss-free profiles) on tiny models; and the
validation configs."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
import torch
import yaml
from test_evidence import EV, MODEL, ConstantModel, failure_table

from lostmid import config as lostmid_config
from lostmid import jobs
from lostmid.evidence import claims
from lostmid.evidence import validation_claims as vc

from conftest import REPO, lostmid_arguments, model_config, run_snakemake

SCHEDULE = {"steps": 1500, "every": 250}
VARIANTS = {
    "baseline": {"train": {**SCHEDULE, "seed_batch": 1}},
    "balance_blog": {"remedy": {"kind": "balance", "beta": 0.1, "target": "uniform"}, "train": SCHEDULE},
    "balance_strong": {"remedy": {"kind": "balance", "beta": 0.3, "target": "uniform"}, "train": SCHEDULE},
    "reweight_blog": {"remedy": {"kind": "reweight", "eta": 1.0}, "train": SCHEDULE},
    "observability_blog": {"remedy": {"kind": "observability", "lam": 0.1}, "train": SCHEDULE},
    "baseline_shift_early": {"train": {**SCHEDULE, "flag_law": "early"}},
    "balance_shift_early": {
        "remedy": {"kind": "balance", "beta": 0.1, "target": "uniform"},
        "train": {**SCHEDULE, "flag_law": "early"},
    },
}
SEEDS = range(6)
LEARNED, CHANCE = (-4.0, 0.0), (0.0, 0.0)


def curves(mid: int) -> dict:
    """Failure curves at chance until ``mid`` and learned from ``mid`` on (so mid-training is ``mid``)."""
    return {step: (CHANCE if step < mid else LEARNED) for step in (0, 250, 500, 750)}


def metrics_rows(
    variant: str, e_inf_by_step: dict, z: float = 1.0, lim: float = 0.0, seeds=SEEDS, jitter: float = 0.05, L: int = 16
) -> pd.DataFrame:
    rng = np.random.default_rng(abs(hash(variant)) % 2**32)
    return pd.DataFrame(
        [
            {
                "variant": variant,
                "L": L,
                "depth": 2,
                "seed": seed,
                "step": step,
                "delta": 0.2,
                "E_inf": value * math.exp(jitter * rng.standard_normal()),
                "Z": z,
                "LIM": lim,
            }
            for seed in seeds
            for step, value in e_inf_by_step.items()
        ]
    )


def observability_rows(variant: str, spike_by_step: dict, seeds=SEEDS, L: int = 16) -> pd.DataFrame:
    """Loss-free profiles: a flat trace density with a spike of height ``spike`` at the last position."""
    rng = np.random.default_rng(abs(hash(variant)) % 2**32)
    rows = []
    for seed in seeds:
        for step, spike in spike_by_step.items():
            trace = np.ones(L)
            trace[-1] = spike * math.exp(0.05 * rng.standard_normal())
            for i in range(L):
                rows.append(
                    {
                        "variant": variant,
                        "L": L,
                        "depth": 2,
                        "seed": seed,
                        "step": step,
                        "position": i + 1,
                        "trace": trace[i],
                        "trace_density": trace[i] / trace.mean(),
                        "jacobian_density": trace[i] / trace.mean(),
                    }
                )
    return pd.DataFrame(rows)


def rows(name: str, **tables) -> list[dict]:
    inputs = claims.Inputs(variants=VARIANTS, model=MODEL, **tables)
    return claims.evaluate_claim(claims.CLAIMS_BY_NAME[name], inputs, EV)


def test_algorithm_1_is_compared_with_its_baseline_at_each_arms_own_mid_training_checkpoint():
    failure = pd.concat(
        [failure_table("baseline", curves(250), SEEDS), failure_table("balance_blog", curves(500), SEEDS)]
    )
    # Read at the right checkpoints (baseline 250, balance 500) the remedy halves E_inf; read at one
    # common step it would look worse.
    metrics = pd.concat(
        [
            metrics_rows("baseline", {0: 1.0, 250: 2.0, 500: 0.1, 750: 0.1}, z=1.0),
            metrics_rows("balance_blog", {0: 1.0, 250: 3.0, 500: 0.5, 750: 0.5}, z=2.0),
        ]
    )
    row, interpolated = rows("balance_lowers_e_inf_at_matched_accuracy", failure=failure, metrics=metrics)
    assert row["verdict"] == "supported" and row["estimate"] == pytest.approx(math.log(0.25), abs=0.1)
    assert "balance_blog at step 500, baseline at step 250" in row["method"]
    assert "log(Z remedy / Z baseline) 0.693" in row["note"] and "(gap " in row["note"]
    # The same claim with each seed interpolated to the accuracy level: both arms at one accuracy.
    assert interpolated["checkpoint"] == vc.INTERPOLATED and "interpolated to accuracy" in interpolated["method"]
    assert "accuracy gap 0 by construction" in interpolated["note"] and math.isfinite(interpolated["estimate"])


def test_an_arm_that_never_reaches_mid_training_gets_a_not_run_row_saying_so():
    failure = pd.concat(
        [
            failure_table("baseline", curves(250), SEEDS),
            failure_table("balance_blog", {s: CHANCE for s in (0, 250, 500, 750)}, SEEDS),
        ]
    )
    metrics = pd.concat([metrics_rows(v, {0: 1.0, 250: 1.0, 500: 1.0, 750: 1.0}) for v in ("baseline", "balance_blog")])
    row, interpolated = rows("balance_lowers_e_inf_at_matched_accuracy", failure=failure, metrics=metrics)
    assert row["verdict"] == "inconclusive" and "balance_blog's mean evaluation accuracy never reached" in row["method"]
    assert interpolated["verdict"] == "inconclusive" and "no seed of balance_blog reaches" in interpolated["method"]


def test_algorithm_2_changing_the_profile_little_is_an_equivalence_at_matched_accuracy():
    failure = pd.concat([failure_table(v, curves(250), SEEDS) for v in ("baseline", "reweight_blog")])
    metrics = pd.concat(
        [metrics_rows(v, {0: 1.0, 250: 2.0, 500: 1.0, 750: 1.0}) for v in ("baseline", "reweight_blog")]
    )
    (row,) = rows("reweight_changes_profile_little_at_matched_accuracy", failure=failure, metrics=metrics)
    assert row["verdict"] == "supported" and row["rule_kind"] == "equivalent_to_zero"


def test_algorithm_3_trace_claim_reads_the_exact_trace_density_at_matched_accuracy_and_at_the_last_checkpoint():
    failure = pd.concat([failure_table(v, curves(250), SEEDS) for v in ("baseline", "observability_blog")])
    steps = (0, 250, 500, 750)
    observability = pd.concat(
        [
            observability_rows("baseline", {s: 8.0 for s in steps}),
            observability_rows("observability_blog", {0: 8.0, 250: 2.0, 500: 2.0, 750: 9.0}),
        ]
    )
    metrics = pd.concat(
        [
            metrics_rows(v, {s: 1.0 for s in steps}, lim=lim)
            for v, lim in (("baseline", 0.5), ("observability_blog", -1.0))
        ]
    )
    matched, last = rows(
        "observability_lowers_trace_imbalance_on_transformer",
        failure=failure,
        metrics=metrics,
        observability=observability,
    )
    assert matched["checkpoint"] == vc.MATCHED and matched["verdict"] == "supported"
    assert last["checkpoint"] == vc.LAST and last["verdict"] == "contradicted"
    assert "LIM (delta 0.2) remedy - baseline -1.5" in matched["note"] and "raw trace total" in matched["note"]


def test_without_the_loss_free_profiles_the_trace_claim_says_which_table_is_missing():
    failure = pd.concat([failure_table(v, curves(250), SEEDS) for v in ("baseline", "observability_blog")])
    metrics = pd.concat([metrics_rows(v, {0: 1.0, 250: 1.0}) for v in ("baseline", "observability_blog")])
    (row,) = rows("observability_lowers_trace_imbalance_on_transformer", failure=failure, metrics=metrics)
    assert row["method"] == "not run: table observability not given"


def at(found: list[dict], checkpoint: str) -> list[dict]:
    """The rows of one of the position shift's two checkpoints (vc.SHIFT_LAST, vc.SHIFT_MID)."""
    return [row for row in found if row["setting"].endswith(checkpoint)]


def test_the_shift_is_checked_to_bite_and_a_remedy_is_judged_on_the_flags_its_law_under_trains():
    # Trained with early flags, the baseline fails late flags (p > 1/2); the balanced arm fails them less.
    late_failing, less_failing = {750: (-6.0, 6.0)}, {750: (-6.0, 3.0)}
    failure = pd.concat(
        [
            failure_table("baseline", {750: LEARNED}, SEEDS, rng=np.random.default_rng(0)),
            failure_table("balance_blog", {750: LEARNED}, SEEDS, rng=np.random.default_rng(1)),
            failure_table("baseline_shift_early", late_failing, SEEDS, rng=np.random.default_rng(2)),
            failure_table("balance_shift_early", less_failing, SEEDS, rng=np.random.default_rng(3)),
        ]
    )
    # one checkpoint here, 750: the last and every uniform-law reference's mid-training, so both readings agree
    for checkpoint in (vc.SHIFT_LAST, vc.SHIFT_MID):
        bites = {r["variant"]: r for r in at(rows("flag_shift_raises_untrained_failure", failure=failure), checkpoint)}
        assert bites["baseline_shift_early"]["setting"].startswith("baseline_shift_early vs baseline,")
        assert bites["balance_shift_early"]["setting"].startswith("balance_shift_early vs balance_blog,")
        assert bites["baseline_shift_early"]["verdict"] == "supported"
        assert {r["rule_kind"] for r in bites.values()} == {"greater_than_zero"}
        (recall,) = at(rows("remedy_recalls_untrained_positions", failure=failure), checkpoint)
        assert recall["setting"].startswith("balance_shift_early vs baseline_shift_early")
        assert recall["verdict"] == "supported" and "at step 750" in recall["method"]


def test_a_remedy_is_not_judged_on_a_shift_that_does_not_bite():
    # Trained with early flags, the baseline recalls late flags as well as the uniform-law baseline:
    # there is nothing for the remedy to recover, so its row keeps its numbers but gets no verdict.
    failure = pd.concat(
        [
            failure_table(name, {750: LEARNED}, SEEDS, rng=np.random.default_rng(i))
            for i, name in enumerate(["baseline", "balance_blog", "baseline_shift_early", "balance_shift_early"])
        ]
    )
    bites = {r["variant"]: r for r in at(rows("flag_shift_raises_untrained_failure", failure=failure), vc.SHIFT_LAST)}
    assert bites["baseline_shift_early"]["verdict"] != "supported"
    (recall,) = at(rows("remedy_recalls_untrained_positions", failure=failure), vc.SHIFT_LAST)
    assert recall["method"].startswith("not evaluable: the shift does not bite") and recall["verdict"] == "inconclusive"
    assert math.isfinite(recall["estimate"])


def test_a_shift_that_has_worn_off_by_the_last_checkpoint_is_read_at_the_uniform_baselines_mid_training():
    # The uniform-law baseline reaches mid-training at 500. There the early-law baseline still fails late
    # flags and the balanced arm fails them less; by 750 every arm recalls every flag.
    learned = {250: CHANCE, 500: LEARNED, 750: LEARNED}
    failure = pd.concat(
        [
            failure_table("baseline", learned, SEEDS, rng=np.random.default_rng(0)),
            failure_table("balance_blog", learned, SEEDS, rng=np.random.default_rng(1)),
            failure_table("baseline_shift_early", {**learned, 500: (-6.0, 6.0)}, SEEDS, rng=np.random.default_rng(2)),
            failure_table("balance_shift_early", {**learned, 500: (-6.0, 3.0)}, SEEDS, rng=np.random.default_rng(3)),
        ]
    )
    recall = rows("remedy_recalls_untrained_positions", failure=failure)
    (last,), (mid,) = at(recall, vc.SHIFT_LAST), at(recall, vc.SHIFT_MID)
    assert last["method"].startswith("not evaluable: the shift does not bite")
    assert mid["verdict"] == "supported" and "at step 500" in mid["method"]
    (check,) = [
        r
        for r in at(rows("flag_shift_raises_untrained_failure", failure=failure), vc.SHIFT_MID)
        if r["variant"] == "baseline_shift_early"
    ]
    assert check["verdict"] == "supported" and "at step 500" in check["method"]


def train_rows(variant: str, seconds: float, memory: float) -> pd.DataFrame:
    rng = np.random.default_rng(abs(hash(variant)) % 2**32)
    return pd.DataFrame(
        [
            {
                "variant": variant,
                "L": 16,
                "depth": 2,
                "seed": seed,
                "step": step,
                "seconds_per_step": seconds * math.exp(0.05 * rng.standard_normal()),
                "peak_mem_mb": memory,
            }
            for seed in SEEDS
            for step in range(1, 21)
        ]
    )


def test_overhead_is_the_geometric_mean_ratio_to_the_baseline_and_a_ratio_past_the_bound_is_contradicted():
    train = pd.concat(
        [
            train_rows("baseline", 0.01, 400.0),
            train_rows("balance_blog", 0.02, 440.0),
            train_rows("observability_blog", 0.05, 400.0),
            train_rows("reweight_blog", 0.01, 400.0),
        ]
    )
    time = {r["variant"]: r for r in rows("remedy_time_overhead", train=train)}
    assert (
        time["balance_blog"]["estimate"] == pytest.approx(2.0, rel=0.05)
        and time["balance_blog"]["verdict"] == "supported"
    )
    assert time["observability_blog"]["verdict"] == "contradicted"
    memory = {r["variant"]: r for r in rows("remedy_memory_overhead", train=train)}
    assert memory["balance_blog"]["estimate"] == pytest.approx(1.1) and memory["balance_blog"]["verdict"] == "supported"


def test_the_validation_findings_are_one_family_decided_again_on_bonferroni_intervals():
    train = pd.concat(
        [train_rows(v, 0.01 * f, 400.0) for v, f in [("baseline", 1), ("balance_blog", 2), ("reweight_blog", 1)]]
    )
    overhead = [claims.CLAIMS_BY_NAME[name] for name in ("remedy_time_overhead", "remedy_memory_overhead")]
    table = claims.evidence_table(claims.Inputs(variants=VARIANTS, model=MODEL, train=train), EV, overhead)
    decided = table[table.n_seeds >= 2]
    assert len(decided) == 4 and (decided.family_size == 4).all()
    assert decided.adjusted_level.eq(1 - 0.05 / 4).all() and (decided.adjusted_high >= decided.ci_high).all()
    shift_check = claims.CLAIMS_BY_NAME["flag_shift_raises_untrained_failure"]
    assert shift_check.family is None  # a check that the shift bites, not a finding


def test_a_stronger_penalty_that_lowers_its_target_more_is_a_supported_dose_response():
    failure = pd.concat([failure_table(v, curves(250), SEEDS) for v in ("baseline", "balance_blog", "balance_strong")])
    metrics = pd.concat(
        [
            metrics_rows("baseline", {250: 1.0}),
            metrics_rows("balance_blog", {250: 0.5}),
            metrics_rows("balance_strong", {250: 0.1}),
        ]
    )
    (row,) = rows("penalty_strength_lowers_its_target", failure=failure, metrics=metrics)
    assert row["variant"] == "balance_blog,balance_strong" and row["setting"].endswith(
        "vs baseline, L 16, depth 2, residual true, checkpoint own mid-training (matched accuracy)"
    )
    assert row["verdict"] == "supported" and row["estimate"] < math.log(0.2)


# --------------------------------------------------------------------------- the measurements


def test_the_validation_loss_is_the_held_out_cross_entropy_of_the_answer():
    from lostmid.training.evaluate import failure_by_position

    table = failure_by_position(ConstantModel(0), L=12, per_position=8, base_seed=1000, run_seed=0, device="cpu")
    right, wrong = math.log(1 + math.exp(-1)), math.log(1 + math.e)  # logits (1, 0): answer 0 right / wrong
    assert table.loss.to_numpy() == pytest.approx((right + wrong) / 2)


def test_the_loss_free_profiles_are_the_exact_traces_and_the_output_jacobian_of_the_model():
    from lostmid.analysis.influence import observability_profile, output_jacobian_norms
    from lostmid.core.model import model_at_init
    from lostmid.core.task import stratified_eval_set
    from lostmid.objectives.algorithm3_observability import exact_traces

    model = model_at_init(model_config(seq_len=6, depth=2, d_model=8, heads=2), seed=0)
    tokens, _, _ = stratified_eval_set(6, 2, 0)
    table = observability_profile(model, tokens, chunk=3)
    with torch.no_grad():
        expected = exact_traces(model, model.embed(tokens)).double().numpy()
    assert table.trace.to_numpy() == pytest.approx(expected, rel=1e-6)
    assert table.output_jacobian.to_numpy() == pytest.approx(output_jacobian_norms(model, tokens).numpy(), rel=1e-6)
    assert table.trace_density.mean() == pytest.approx(1.0) and table.jacobian_density.mean() == pytest.approx(1.0)


# --------------------------------------------------------------------------- the configs


def arms_whose_rows_read_profiles(config: dict) -> set[str]:
    """Algorithms 1 and 3 trained on the uniform law for the uniform target (Algorithm 1's Jacobian row,
    Algorithm 3's trace row and ladders) and their baselines: the arms whose rows read the loss-free profiles."""
    inputs = claims.Inputs(variants=config["variants"], model=config["model"])
    remedies = {
        v
        for block in config["grid"]
        for v in block["variants"]
        if not v.endswith("_timing")
        and inputs.remedy(v) in ("balance", "observability")
        and vc.aimed_at_uniform(inputs, v)
    }
    return remedies | {inputs.reference(v) for v in remedies}


def test_the_validation_config_pairs_every_remedy_with_the_blog_baseline_and_profiles_the_arms_rows_read():
    config = lostmid_config.load(REPO / "config/config.yaml", REPO / "config/validation.yaml")
    jobs.check(config)
    inputs = claims.Inputs(variants=config["variants"], model=config["model"])
    arms = ["balance_blog", "reweight_blog", "observability_blog"]
    main_block = {
        v for block in config["grid"] if block["L"] == [16] and block["depth"] == [4] for v in block["variants"]
    }
    assert set(arms) <= main_block and [inputs.reference(v) for v in arms] == ["baseline"] * 3
    in_grid = {v for block in config["grid"] for v in block["variants"]}
    timing = {v for v in in_grid if v.endswith("_timing")}
    # The one list of profiled arms serves both configs: it holds every arm whose rows read the profiles here,
    # and nothing more than profiles/slurm/validation.yaml's arms read.
    full = lostmid_config.load(
        *(REPO / f for f in ("config/config.yaml", "config/validation.yaml", "profiles/slurm/validation.yaml"))
    )
    profiled = set(config["influence"]["trace_variants"])
    assert profiled == set(full["influence"]["trace_variants"])
    assert arms_whose_rows_read_profiles(config) <= profiled == arms_whose_rows_read_profiles(full)
    for name in in_grid - timing:
        assert lostmid_config.schedule(config, name) == (1500, 250)
        if vc.flag_law(inputs, name) != "uniform":
            assert vc.uniform_counterpart(inputs, name) in in_grid
    # The overhead is measured where every arm trains one seed at a time.
    assert {inputs.reference(v) for v in timing - {"baseline_timing"}} == {"baseline_timing"}
    assert all(vc.sequential(inputs, v) for v in timing) and not vc.sequential(inputs, "baseline")


def test_overhead_rows_compare_only_arms_that_both_train_one_seed_at_a_time():
    train = pd.concat([train_rows("baseline", 0.01, 400.0), train_rows("balance_blog", 0.02, 440.0)])
    vmapped = {**VARIANTS, "balance_blog": {**VARIANTS["balance_blog"], "train": {**SCHEDULE, "seed_batch": 4}}}
    inputs = claims.Inputs(variants=vmapped, model=MODEL, train=train)
    (row,) = claims.evaluate_claim(claims.CLAIMS_BY_NAME["remedy_time_overhead"], inputs, EV)
    assert row["method"].startswith("not run: no balance variant and baseline that both train with seed_batch 1")


def test_the_pilot_shares_the_validation_arms_on_seeds_the_validation_run_never_uses():
    base = [REPO / "config/config.yaml", REPO / "config/validation.yaml"]
    validation, pilot = (
        lostmid_config.load(*base),
        lostmid_config.load(*base, REPO / "runs/pilots/validation_pilot.yaml"),
    )
    seeds = {run.seed for run in lostmid_config.runs(validation)}
    assert seeds.isdisjoint(run.seed for run in lostmid_config.runs(pilot))
    # Nor does it reuse the seeds of Algorithm 1's decision run, whose rows helped size its main block.
    decision = lostmid_config.load(*base, REPO / "runs/validation_algorithm1/overlay.yaml")
    assert seeds.isdisjoint(run.seed for run in lostmid_config.runs(decision))
    main_block = {run.variant for run in lostmid_config.runs(validation) if (run.L, run.depth) == (16, 4)}
    assert {run.variant for run in lostmid_config.runs(pilot)} == {
        "baseline",
        "balance_blog",
        "reweight_blog",
        "observability_blog",
    }
    assert {run.variant for run in lostmid_config.runs(pilot)} <= main_block


def test_the_figures_job_of_the_validation_run_passes_only_options_lostmid_figures_takes(tmp_path):
    """The loss-free profiles are a per-run table of the validation run but not a figure's table: the
    figures job must not pass them (`lostmid figures` would stop on an unknown option)."""
    from lostmid.cli.main import build_parser

    merged = lostmid_config.read_merged([REPO / "config/config.yaml", REPO / "config/validation.yaml"])
    merged.pop("base")  # written out, the merged config stands alone
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(merged))
    dry = run_snakemake(tmp_path, "--dry-run", "--printshellcmds", "figures")
    shells = [line.removeprefix("Shell command: ") for line in dry.stdout.splitlines()]
    commands = [lostmid_arguments(tmp_path, shell) for shell in shells if shell.startswith("lostmid ")]
    (words,) = [command for command in commands if command[0] == "figures"]
    build_parser().parse_args(words)  # exits (SystemExit) on an unknown option
    assert "--observability" not in words and "--metrics" in words


def test_the_default_run_gets_no_loss_free_profiles():
    config = lostmid_config.load(REPO / "config/config.yaml")
    assert jobs.run_tables(jobs.blocks(config), "observability") == []


def test_the_remedies_table_puts_the_held_out_and_the_training_loss_beside_each_checkpoint():
    from lostmid.tables.remedies import losses_per_checkpoint

    keys = dict(variant="baseline", L=8, depth=1, seed=0)
    failure = pd.DataFrame(
        [
            {**keys, "step": s, "flag_pos": f, "n": n, "loss": loss}
            for s in (0, 4)
            for f, n, loss in ((2, 2, 0.2), (3, 6, 0.6))
        ]
    )
    train = pd.DataFrame([{**keys, "step": s, "loss": float(s)} for s in range(1, 5)])
    table = losses_per_checkpoint(failure, train, window=2).set_index("step")
    assert table.val_loss.to_numpy() == pytest.approx([0.5, 0.5])  # (2 * 0.2 + 6 * 0.6) / 8
    assert math.isnan(table.loc[0, "train_loss"]) and table.loc[4, "train_loss"] == pytest.approx(3.5)


@pytest.mark.slow
def test_every_validation_claim_has_a_row_on_the_smoke_run_with_its_loss_free_profiles(smoke_run, tmp_path):
    from lostmid.cli.main import main

    workdir, config = smoke_run
    results = workdir / "results"
    profiles = []
    for variant in ("baseline", "observability"):
        checkpoints = sorted(
            (results / "checkpoints" / variant / "L8_M1_seed0").glob("step*.pt"), key=lambda p: int(p.stem[4:])
        )
        out = tmp_path / f"{variant}.parquet"
        run_spec = lostmid_config.run_spec(
            lostmid_config.load(workdir / "config.yaml"), lostmid_config.Run(variant, 8, 1, 0)
        )
        assert (
            main(
                [
                    "observability",
                    "--spec",
                    json.dumps(run_spec),
                    "--checkpoints",
                    *map(str, checkpoints),
                    "--settings",
                    json.dumps({"seed": 2000, "trace_batch_per_position": 1}),
                    "--out",
                    str(out),
                ]
            )
            == 0
        )
        profiles.append(str(out))
    table = tmp_path / "evidence.parquet"
    assert (
        main(
            [
                "evidence",
                "--config",
                str(workdir / "config.yaml"),
                "--out",
                str(table),
                "--failure",
                *map(str, (results / "failure").rglob("*.parquet")),
                "--metrics",
                *map(str, (results / "metrics").rglob("*.parquet")),
                "--train",
                *map(str, (results / "train").rglob("*.parquet")),
                "--observability",
                *profiles,
            ]
        )
        == 0
    )
    rows = pd.read_parquet(table)
    validation = [c.name for c in claims.CLAIMS if getattr(c.compute, "func", c.compute).__module__ == vc.__name__]
    assert len(validation) == 9
    assert set(validation) <= set(rows.claim)
    traces = rows[rows.claim == "observability_lowers_trace_imbalance_on_transformer"]
    assert set(traces.checkpoint) == {vc.MATCHED, vc.LAST}


def test_the_evidence_table_is_written_into_a_docs_page_between_its_markers(tmp_path, capsys):
    from lostmid.cli.evidence import PAGE_MARKERS
    from lostmid.cli.main import main

    failure = pd.concat([failure_table(v, curves(250), SEEDS) for v in ("baseline", "reweight_blog")])
    metrics = pd.concat(
        [metrics_rows(v, {0: 1.0, 250: 2.0, 500: 1.0, 750: 1.0}) for v in ("baseline", "reweight_blog")]
    )
    table = claims.evidence_table(claims.Inputs(variants=VARIANTS, model=MODEL, failure=failure, metrics=metrics), EV)
    table.to_parquet(tmp_path / "evidence.parquet")
    page = tmp_path / "page.md"
    page.write_text(f"# Page\n\nbefore\n{PAGE_MARKERS[0]}\nold table\n{PAGE_MARKERS[1]}\nafter\n")
    assert main(["evidence", "--markdown", "--table", str(tmp_path / "evidence.parquet"), "--into", str(page)]) == 0
    text = page.read_text()
    assert (
        "old table" not in text
        and text.startswith("# Page\n\nbefore\n")
        and text.endswith(f"{PAGE_MARKERS[1]}\nafter\n")
    )
    assert "reweight_changes_profile_little_at_matched_accuracy" in text and "**supported**" in text
    page.write_text("no markers\n")
    assert main(["evidence", "--markdown", "--table", str(tmp_path / "evidence.parquet"), "--into", str(page)]) == 2
    assert "lacks the lines" in capsys.readouterr().err and page.read_text() == "no markers\n"


def test_the_time_overhead_reads_cpu_time_so_a_loaded_baseline_job_does_not_decide_it():
    """The baseline's job ran on a loaded machine (wall clock 3x its CPU time): by wall clock Algorithm 3's
    ratio would read 5 / 3; by CPU time, which the load does not stretch, it reads 5 and is contradicted."""
    loaded = train_rows("baseline", 0.03, 400.0).assign(cpu_seconds_per_step=lambda t: t.seconds_per_step / 3)
    idle = [
        train_rows(v, s, 400.0).assign(cpu_seconds_per_step=lambda t: t.seconds_per_step)
        for v, s in [("balance_blog", 0.02), ("observability_blog", 0.05), ("reweight_blog", 0.01)]
    ]
    time = {r["variant"]: r for r in rows("remedy_time_overhead", train=pd.concat([loaded, *idle]))}
    assert time["observability_blog"]["estimate"] == pytest.approx(5.0, rel=0.05)
    assert (
        time["observability_blog"]["verdict"] == "contradicted" and "CPU time" in time["observability_blog"]["method"]
    )
