"""Influence predicts failure (docs/evidence.md, "Influence predicts failure"): each claim on planted
tables, where a planted link is supported and a planted null or reversed link contradicted; and the
across-arms reading of flatness against position preference."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from lostmid.config import settings_from_section
from lostmid.evidence import claims
from lostmid.evidence import influence_failure as inf
from lostmid.evidence.settings import EvidenceSettings
from lostmid.stats import statistics

EV = settings_from_section(EvidenceSettings, {}, "evidence")  # the schema's defaults
VARIANTS = {"baseline": {}}
L, DEPTH, MID = 16, 2, 100
SEEDS = range(24)
FLAGS = np.arange(2, L + 1)


def failure_rows(variant="baseline", seeds=SEEDS, rise=3.0, n=64, seed=0) -> pd.DataFrame:
    """Step 0 at chance; step MID (mid-training: mean accuracy about 0.8) with logit(failure) = -3 + rise p."""
    rng = np.random.default_rng(seed)
    rows = []
    for s in seeds:
        for step, rate in ((0, np.full(FLAGS.size, 0.5)), (MID, 1 / (1 + np.exp(3 - rise * FLAGS / L)))):
            failures = rng.binomial(n, rate)
            for f, k in zip(FLAGS, failures):
                rows.append(dict(variant=variant, L=L, depth=DEPTH, seed=s, step=step, flag_pos=f, p=f / L, n=n))
                rows[-1].update(failures=int(k), failure_rate=k / n)
    return pd.DataFrame(rows)


def profile(link: str, rng) -> np.ndarray:
    """A density over positions 1..L: "planted" falls with position (less influence late), "reversed"
    rises, "null" is noise unrelated to position."""
    j = np.arange(1, L + 1)
    shape = {"planted": np.exp(-j / 4), "reversed": np.exp(j / 4), "null": np.ones(L)}[link]
    values = shape * rng.lognormal(0.0, 0.1 if link != "null" else 1.0, L)
    return values / values.mean()


def influence_rows(links: dict, variant="baseline", seeds=SEEDS, seed=1) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The averaged (results/influence, two layers: layer 1 carries the opposite profile, which must
    not be read) and the conditioned (results/answer_influence) tables; ``links`` maps step -> link."""
    rng = np.random.default_rng(seed)
    averaged, conditioned = [], []
    keys = dict(variant=variant, L=L, depth=DEPTH)
    for s in seeds:
        for step, link in links.items():
            density = profile(link, rng)
            for layer, values in ((0, density), (1, density[::-1])):
                averaged.append(
                    pd.DataFrame(
                        dict(**keys, seed=s, step=step, layer=layer, position=np.arange(1, L + 1), density=values)
                    )
                )
            answer = profile(link, rng)[: L - 1]  # its own draw: the conditioned measure is read from its own table
            conditioned.append(
                pd.DataFrame(dict(**keys, seed=s, step=step, flag_pos=FLAGS, position=FLAGS - 1, density=answer))
            )
    return pd.concat(averaged, ignore_index=True), pd.concat(conditioned, ignore_index=True)


def rows_of(name: str, failure, averaged, conditioned, variants=VARIANTS) -> list[dict]:
    inputs = claims.Inputs(
        variants=variants, model={}, failure=failure, influence=averaged, answer_influence=conditioned
    )
    return claims.evaluate_claim(claims.CLAIMS_BY_NAME[name], inputs, EV)


NAMES = [c.name for c in claims.CLAIMS if c.name.endswith("_predicts_failure")]  # the family's rows


def test_the_four_claims_are_registered_in_their_own_family():
    assert NAMES == [
        "averaged_influence_at_init_predicts_failure",
        "averaged_influence_predicts_failure",
        "conditioned_influence_at_init_predicts_failure",
        "conditioned_influence_predicts_failure",
    ]
    assert all(claims.CLAIMS_BY_NAME[n].family == "influence predicts failure" for n in NAMES)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize(
    ("link", "verdict"), [("planted", "supported"), ("null", "contradicted"), ("reversed", "contradicted")]
)
def test_a_planted_link_is_supported_and_a_null_or_reversed_one_contradicted(name, link, verdict):
    failure = failure_rows()
    # Only the influence the claim reads carries the link; the other checkpoint carries its mirror.
    other = {"planted": "reversed", "reversed": "planted", "null": "planted"}[link]
    at_init = "_at_init_" in name
    averaged, conditioned = influence_rows({0: link if at_init else other, MID: other if at_init else link})
    (row,) = rows_of(name, failure, averaged, conditioned)
    assert row["verdict"] == verdict, row
    assert row["n_seeds"] == len(SEEDS)
    assert row["checkpoint"] == (f"influence at step 0, failure at step {MID}" if at_init else f"step {MID}") + (
        " (mid-training)"
    )
    assert f"influence at step {0 if at_init else MID}, failure at step {MID}" in row["note"]
    if link == "planted":
        assert (
            row["ci_high"] < -EV.influence_failure_margin and "stronger reading rho <= -0.3: supported" in row["note"]
        )
    if link == "reversed":
        assert row["estimate"] > 0.5


def test_the_conditioned_claim_reads_its_own_table_not_the_averaged_density():
    failure = failure_rows()
    averaged, _ = influence_rows({0: "planted", MID: "planted"})
    _, conditioned = influence_rows({0: "reversed", MID: "reversed"})
    assert rows_of("averaged_influence_predicts_failure", failure, averaged, conditioned)[0]["verdict"] == "supported"
    assert rows_of("conditioned_influence_predicts_failure", failure, averaged, conditioned)[0]["verdict"] == (
        "contradicted"
    )


def test_a_variant_that_never_reaches_mid_training_is_not_evaluable_and_a_missing_table_not_run():
    failure = failure_rows(rise=0.0).assign(failures=lambda t: t.n // 2)  # chance at every checkpoint
    averaged, conditioned = influence_rows({0: "planted", MID: "planted"})
    (row,) = rows_of("averaged_influence_predicts_failure", failure, averaged, conditioned)
    assert row["verdict"] == "inconclusive" and row["method"].startswith("not evaluable: mid-training undefined")
    inputs = claims.Inputs(variants=VARIANTS, model={}, failure=failure_rows())
    (row,) = claims.evaluate_claim(claims.CLAIMS_BY_NAME["conditioned_influence_predicts_failure"], inputs, EV)
    assert row["method"] == "not run: table answer_influence not given"


def test_influence_and_failure_of_different_seeds_are_one_clear_error():
    averaged, conditioned = influence_rows({0: "planted", MID: "planted"}, seeds=range(3))
    with pytest.raises(claims.EvidenceError, match="hold different seeds"):
        rows_of("averaged_influence_predicts_failure", failure_rows(seeds=range(4)), averaged, conditioned)


def test_a_constant_profile_has_no_ranking_and_counts_as_rho_zero():
    assert statistics.rank_correlation([1.0, 1.0, 1.0], [0.1, 0.5, 0.2]) == 0.0
    assert statistics.rank_correlation([3.0, 2.0, 1.0], [0.0, 0.0, 0.0]) == 0.0
    assert statistics.rank_correlation([3.0, 2.0, 1.0], [0.1, 0.2, 0.3]) == pytest.approx(-1.0)


def test_the_rows_are_corrected_within_their_own_family():
    failure = failure_rows()
    averaged, conditioned = influence_rows({0: "planted", MID: "planted"})
    inputs = claims.Inputs(
        variants=VARIANTS, model={}, failure=failure, influence=averaged, answer_influence=conditioned
    )
    family = [claims.CLAIMS_BY_NAME[name] for name in NAMES]
    table = claims.evidence_table(inputs, EV, claims=family).set_index("claim")
    assert (table.family_size == 4).all() and (table.adjusted_level == 1 - 0.05 / 4).all()
    assert (table.adjusted_low < table.ci_low).all() and (table.adjusted_verdict == "supported").all()


# --------------------------------------------------------------------------- across arms


def arms(direction: int, seeds=range(12), seed=0):
    """Five arms: flatness (log E_inf) 0..4 per arm; the preference rises with it (direction 1) or falls."""
    rng = np.random.default_rng(seed)
    flatness, preference = {}, {}
    for k in range(5):
        flatness[f"arm{k}"] = pd.Series(k + rng.normal(0, 0.3, len(seeds)), index=list(seeds))
        preference[f"arm{k}"] = pd.Series(direction * 0.05 * k + rng.normal(0, 0.02, len(seeds)), index=list(seeds))
    return flatness, preference


def test_an_arms_flatness_predicts_its_preference_when_planted_and_not_when_reversed():
    found = statistics.flatness_predicts_preference(*arms(+1), n_resamples=500)
    assert found.estimate == pytest.approx(1.0) and found.low > 0 and "jointly" in found.method
    reversed_ = statistics.flatness_predicts_preference(*arms(-1), n_resamples=500)
    assert reversed_.estimate == pytest.approx(-1.0) and reversed_.high < 0
    assert statistics.flatness_predicts_preference(*arms(+1), n_resamples=500) == found  # seeded: the same interval
    with pytest.raises(ValueError, match="three or more arms"):
        statistics.flatness_predicts_preference({"a": found}, {"a": found})


def test_the_arms_flatness_and_preference_are_read_at_each_arms_own_mid_training():
    failure = pd.concat([failure_rows("baseline"), failure_rows("flat", rise=0.5)])
    metrics = pd.DataFrame(
        [
            dict(variant=v, L=L, depth=DEPTH, seed=s, step=step, delta=EV.delta, E_inf=e)
            for v, e in (("baseline", 4.0), ("flat", 0.5))
            for s in SEEDS
            for step in (0, MID)
        ]
    )
    inputs = claims.Inputs(variants={"baseline": {}, "flat": {}}, model={}, failure=failure, metrics=metrics)
    flatness, preference = inf.arm_flatness_and_preference(inputs, EV, ["baseline", "flat"], L, DEPTH)
    assert flatness["baseline"].mean() == pytest.approx(np.log(4.0)) and flatness["flat"].mean() == pytest.approx(
        np.log(0.5)
    )
    assert preference["baseline"].mean() > preference["flat"].mean() > 0


def across_arms_inputs(direction: int) -> claims.Inputs:
    """Four arms at their mid-training: E_inf 1, 2, 4, 8 (flatter first); the late-minus-early preference
    rises with E_inf (direction 1: the flatter arm prefers early flags less) or falls (direction -1)."""
    rises = {f"arm{k}": 1.25 + direction * 0.5 * (k - 1.5) for k in range(4)}  # 0.5 .. 2: all reach 0.75
    failure = pd.concat([failure_rows(arm, rise=rise, seed=k) for k, (arm, rise) in enumerate(rises.items())])
    metrics = pd.DataFrame(
        [
            dict(variant=arm, L=L, depth=DEPTH, seed=s, step=step, delta=EV.delta, E_inf=2.0**k)
            for k, arm in enumerate(rises)
            for s in SEEDS
            for step in (0, MID)
        ]
    )
    return claims.Inputs(variants={arm: {} for arm in rises}, model={}, failure=failure, metrics=metrics)


@pytest.mark.parametrize("direction, verdict", [(1, "supported"), (-1, "contradicted")])
def test_across_arms_a_planted_link_is_supported_and_a_reversed_one_contradicted(direction, verdict):
    row = claims.evidence_table(
        across_arms_inputs(direction), EV, claims=[claims.CLAIMS_BY_NAME["flatness_predicts_preference"]]
    ).iloc[0]
    assert row.claim == "flatness_predicts_preference" and row.verdict == verdict, row.note
    assert row.estimate == pytest.approx(direction * 1.0) and "arm3 (2.08" in row.note
    assert row.family_size == 0  # outside the influence family: its adjusted interval is its own
