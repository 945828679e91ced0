"""Regional channel energies and the sufficient-condition tests (docs/theory.md §5.2 and §5.3).

Everything is normalized by Zbar = mean_j E||P_0(j)||^2, so that the regional energies add up to
the regional mean density: m_B = sum_a J_a(B) + Xi(B) (by bilinearity; checked on every row).

Tests per checkpoint and delta (one row each; lhs > rhs is the test, ``conclusion_holds`` is
what the test is about, measured directly):

    exact_left / exact_right   sum_a [J_a(E_X) - J_a(E_M)] > Xi(E_M) - Xi(E_X)  <=>  m_X > m_M
    exact                      both sides at once (lhs, rhs = channel-built min(m_L, m_R), m_M)
                               <=> Delta > 0  (Theorem 3.7, first form: an equivalence)
    sufficient_measured        min_X lower_X > upper_M with the measured rho       => Delta > 0
    sufficient_universal       the same with the universal rho = 1                 => Delta > 0
    cone_primacy               kappa_L A_L > K_M A_M                    => J_cone(L) > J_cone(M)
    residual_persistence       (sqrt A_R(P_M) - s_R)_+^2 > (sqrt A_M(P_M) + s_M)^2 => m_R > m_M

A sufficient condition that holds while its conclusion fails, or an equivalence whose two
sides disagree, is a soundness violation: ``flag_violations`` marks the row (column ``violation``,
with the ``tolerance`` it was judged by), the stage logs it loudly and still writes the table, and
the evidence stage's row ``sufficient_conditions_sound`` counts it as a contradiction.

Float tolerance. The densities come from P_0 while the channel energies come from the three
channels, whose sum equals P_0 only up to rounding. So a sufficient condition counts as
holding only when lhs exceeds rhs by more than ``tolerance * max(1, |rhs|)`` (a negligibly
stronger, still sufficient condition, immune to rounding), and an equivalence may disagree
with its conclusion only when |lhs - rhs| is within that tolerance.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from lostmid.analysis import metrics
from lostmid.analysis.channel_names import CHANNELS, PAIRS, pair_name
from lostmid.analysis.settings import ChannelSettings
from lostmid.core.density import positions

if TYPE_CHECKING:  # lostmid.analysis.channels imports torch, which the tables and figures of this module do not need
    from lostmid.analysis.channels import Profiles

REGIONS = ("left", "middle", "right")
EQUIVALENCES = ("exact_left", "exact_right", "exact")
SUFFICIENT = ("sufficient_measured", "sufficient_universal", "cone_primacy", "residual_persistence")
TESTS = EQUIVALENCES + SUFFICIENT
# Relative float tolerances of the identity and of the tests, by the dtype of the adjoints.
TOLERANCE = {"float64": 1e-9, "float32": 1e-4}


class SoundnessError(RuntimeError):
    """The identity m_B = sum J + Xi or the channel split fails: the instrument is broken, no table is written."""


def _numpy(x) -> np.ndarray:
    return x.detach().double().cpu().numpy() if hasattr(x, "detach") else np.asarray(x, dtype=np.float64)


class Regional:
    """Normalized per-position profiles and their regional means at one delta."""

    def __init__(self, profiles: Profiles, delta: float, tolerance: float = TOLERANCE["float64"]):
        energy = _numpy(profiles.energy)
        self.L = energy.size
        self.zbar = float(energy.mean())
        if not self.zbar > 0:
            raise ValueError("influence energy is zero everywhere: the channel energies are undefined")
        self.delta = delta
        self.tolerance = tolerance
        self.p = positions(self.L)
        self.masks = metrics.region_masks(self.L, delta)
        self.density = metrics.normalize(energy)
        self.m = metrics.regional_means(self.density, delta)
        self.delta_gap = metrics.metrics_from_regions(self.m["left"], self.m["middle"], self.m["right"])["Delta"]
        self.q = {a: _numpy(profiles.channel[a]) / self.zbar for a in CHANNELS}  # E||P_a(i)||^2 / Zbar
        cross = {pair: _numpy(profiles.cross[pair]) / self.zbar for pair in PAIRS}  # E<P_a, P_b>(i) / Zbar
        self.J = {b: {a: float(self.q[a][mask].mean()) for a in CHANNELS} for b, mask in self.masks.items()}
        # xi[b][pair] = mean_B 2 E<P_a, P_b> / Zbar; Xi(B) is their sum.
        self.xi = {b: {pair: float(2 * cross[pair][mask].mean()) for pair in PAIRS} for b, mask in self.masks.items()}
        self.n = {b: int(mask.sum()) for b, mask in self.masks.items()}
        self.gronwall = float(profiles.gronwall) / self.zbar  # E[c^2 ||P_M||^2] / Zbar

    def Xi(self, b: str) -> float:
        return sum(self.xi[b].values())

    def total(self, b: str) -> float:
        """The channel reconstruction sum_a J_a(B) + Xi(B) of m_B."""
        return sum(self.J[b].values()) + self.Xi(b)

    def rho(self, b: str, pair) -> float:
        """rho_ab,B = mean_B E<P_a, P_b> / (Zbar sqrt(J_a J_b)); NaN where a channel vanishes on B."""
        denominator = np.sqrt(self.J[b][pair[0]] * self.J[b][pair[1]])
        return self.xi[b][pair] / 2 / denominator if denominator > 0 else float("nan")

    def check_identity(self) -> None:
        """m_B = sum_a J_a(B) + Xi(B) on every region, to the float tolerance."""
        for b in REGIONS:
            error = abs(self.m[b] - self.total(b))
            if error > self.tolerance * max(1.0, abs(self.m[b])):
                raise SoundnessError(
                    f"identity m_B = sum J + Xi fails at delta={self.delta}, region={b}: "
                    f"m_B = {self.m[b]!r}, sum J + Xi = {self.total(b)!r} (error {error:.3g})"
                )

    # Tables -------------------------------------------------------------------------------

    def channel_rows(self) -> list[dict]:
        return [{"delta": self.delta, "region": b, "channel": a, "J": self.J[b][a]} for b in REGIONS for a in CHANNELS]

    def cross_rows(self) -> list[dict]:
        return [
            {
                "delta": self.delta,
                "region": b,
                "pair": pair_name(pair),
                "xi": self.xi[b][pair],
                "rho": self.rho(b, pair),
            }
            for b in REGIONS
            for pair in PAIRS
        ]

    # Tests ---------------------------------------------------------------------------------

    def _holds(self, lhs: float, rhs: float) -> bool:
        """A sufficient condition holds only by more than the float tolerance (see module doc)."""
        return bool(lhs > rhs + self.tolerance * max(1.0, abs(rhs)))

    def lower(self, b: str) -> float:
        """sum_a J_a - 2 sum_{a<b} max(-rho_ab, 0) sqrt(J_a J_b): a lower bound of m_B.

        2 rho_ab sqrt(J_a J_b) is exactly the pair's cross term xi_ab, which stays defined
        where rho is not (a vanishing channel), so the bound is built from xi.
        """
        return sum(self.J[b].values()) - sum(max(-x, 0.0) for x in self.xi[b].values())

    def upper(self, b: str) -> float:
        """sum_a J_a + 2 sum_{a<b} max(rho_ab, 0) sqrt(J_a J_b): an upper bound of m_B."""
        return sum(self.J[b].values()) + sum(max(x, 0.0) for x in self.xi[b].values())

    def lower_universal(self, b: str) -> float:
        """max(0, max_a (sqrt J_a - sum_{c != a} sqrt J_c))^2 <= m_B (reverse triangle inequality)."""
        roots = {a: np.sqrt(self.J[b][a]) for a in CHANNELS}
        best = max(roots[a] - sum(roots[c] for c in CHANNELS if c != a) for a in CHANNELS)
        return float(max(0.0, best) ** 2)

    def upper_universal(self, b: str) -> float:
        """(sum_a sqrt J_a)^2 >= m_B (triangle inequality: rho = 1 for every pair)."""
        return float(sum(np.sqrt(self.J[b][a]) for a in CHANNELS) ** 2)

    def tests(self) -> list[dict]:
        m, J = self.m, self.J
        rows = []

        def row(test, lhs, rhs, conclusion, holds=None):
            holds = self._holds(lhs, rhs) if holds is None else holds
            rows.append(
                {
                    "delta": self.delta,
                    "test": test,
                    "holds": bool(holds),
                    "conclusion_holds": bool(conclusion),
                    "lhs": float(lhs),
                    "rhs": float(rhs),
                }
            )

        gap = self.delta_gap > 0
        # 1. The exact channel comparison: an equivalence, so no tolerance margin on holds.
        for side, b in (("left", "left"), ("right", "right")):
            lhs = sum(J[b][a] - J["middle"][a] for a in CHANNELS)
            rhs = self.Xi("middle") - self.Xi(b)
            row(f"exact_{side}", lhs, rhs, m[b] > m["middle"], holds=lhs > rhs)
        edge = min(self.total("left"), self.total("right"))
        row("exact", edge, self.total("middle"), gap, holds=edge > self.total("middle"))
        # 2. The checkable sufficient condition, measured rho and universal rho = 1.
        row("sufficient_measured", min(self.lower("left"), self.lower("right")), self.upper("middle"), gap)
        row(
            "sufficient_universal",
            min(self.lower_universal("left"), self.lower_universal("right")),
            self.upper_universal("middle"),
            gap,
        )
        # 3. Cone primacy (Prop. 3.4): Q(i) / (1 - p_i)^2 bounded below on E_L and above on E_M.
        weight = (1 - self.p) ** 2
        ratio = self.q["cone"] / weight
        left, middle = self.masks["left"], self.masks["middle"]
        kappa_L, K_M = float(ratio[left].min()), float(ratio[middle].max())
        A_L, A_M = float(weight[left].mean()), float(weight[middle].mean())
        row("cone_primacy", kappa_L * A_L, K_M * A_M, J["left"]["cone"] > J["middle"]["cone"])
        # 4. Residual persistence (Prop. 3.5): A_B(P_M) = J_res(B); s_B = sqrt(E[c^2 ||P_M||^2] / (n_B Zbar)).
        if np.isfinite(self.gronwall):
            s_R, s_M = np.sqrt(self.gronwall / self.n["right"]), np.sqrt(self.gronwall / self.n["middle"])
            lhs = max(np.sqrt(J["right"]["res"]) - s_R, 0.0) ** 2
            rhs = (np.sqrt(J["middle"]["res"]) + s_M) ** 2
            row("residual_persistence", lhs, rhs, m["right"] > m["middle"])
        return rows


def regional_tables(profiles: Profiles, deltas, tolerance: float = TOLERANCE["float64"]):
    """The channels, cross_terms and conditions rows (without grid keys) of one checkpoint.

    Checks the identity m_B = sum J + Xi on every region and delta (raises SoundnessError).
    """
    channel_rows, cross_rows, test_rows = [], [], []
    for delta in deltas:
        regional = Regional(profiles, delta, tolerance)
        regional.check_identity()
        channel_rows += regional.channel_rows()
        cross_rows += regional.cross_rows()
        test_rows += regional.tests()
    return pd.DataFrame(channel_rows), pd.DataFrame(cross_rows), pd.DataFrame(test_rows)


def violations(conditions: pd.DataFrame, tolerance: float = TOLERANCE["float64"]) -> pd.DataFrame:
    """Rows that break soundness: a sufficient test holding with its conclusion failing, or an
    equivalence disagreeing with its conclusion by more than the float tolerance."""
    sufficient = conditions["test"].isin(SUFFICIENT) & conditions["holds"] & ~conditions["conclusion_holds"]
    margin = (conditions["lhs"] - conditions["rhs"]).abs()
    scale = np.maximum(1.0, conditions["rhs"].abs())
    equivalence = (
        conditions["test"].isin(EQUIVALENCES)
        & (conditions["holds"] != conditions["conclusion_holds"])
        & (margin > tolerance * scale)
    )
    return conditions[sufficient | equivalence]


def flag_violations(conditions: pd.DataFrame, tolerance: float) -> pd.DataFrame:
    """The conditions table with the float ``tolerance`` its rows were judged by and a ``violation``
    column (``violations``): a violating row is kept and flagged, so that the claim it refutes can
    be decided (the evidence row ``sufficient_conditions_sound``), not lost with an exception."""
    flagged = conditions.assign(tolerance=float(tolerance))
    flagged["violation"] = flagged.index.isin(violations(flagged, flagged["tolerance"]).index)
    return flagged


# The stage: one checkpoint's three tables --------------------------------------------------


def checkpoint_tables(model, settings: ChannelSettings, device):
    """Channels, cross_terms and conditions rows of one model (no grid keys), and diagnostics.

    The analysis set is the stratified set with ``batch_per_position`` sequences at every
    flag position (seed ``seed``); expectations E are means over it.
    """
    import torch

    from lostmid.analysis.channels import channel_profiles
    from lostmid.core import task

    L = model.config.seq_len
    metrics.check_deltas(L, settings.deltas, "channels.deltas")
    if settings.float64:
        model = model.double()
    tokens, targets, _ = task.stratified_eval_set(L, settings.batch_per_position, settings.seed)
    profiles, diagnostics = channel_profiles(
        model, tokens.to(device), targets.to(device), settings.batch_size, settings.power_iterations, settings.seed
    )
    tolerance = TOLERANCE["float64" if model.token_embedding.weight.dtype == torch.float64 else "float32"]
    if diagnostics["split_error"] > tolerance:
        raise SoundnessError(
            f"P_res + P_cone + P_loc differs from P_0 by {diagnostics['split_error']:.3g} (relative) > {tolerance}"
        )
    channel_rows, cross_rows, test_rows = regional_tables(profiles, settings.deltas, tolerance)
    return channel_rows, cross_rows, test_rows, {**diagnostics, "tolerance": tolerance}
