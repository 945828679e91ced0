"""Training-time remedies of DESIGN.md section 6: Algorithms 1-3 as training objectives.

Each remedy is a ``TaskObjective`` registered in ``lostmid.objectives.OBJECTIVES`` under its
``remedy.kind``, so a remedy is just another variant of the same training chain and every
downstream stage runs on it unchanged. (The fourth remedy, the fitted attention-logit bias,
changes the model, not the loss: see ``lostmid.bias_fit``.)

- ``balance``  (Algorithm 1): task loss + (beta/2) E_inf(nu) of the batch's normalized
  input-adjoint energies, differentiated through (second order, create_graph).
- ``reweight`` (Algorithm 2): every K steps the risk r(f) per flag position on a probe set,
  target law tau(f) ~ r(f)^eta, per-sequence loss weights w(f) = tau(f) / pi(f).
- ``observability`` (Algorithm 3): Hutchinson estimates of the traces of the positional
  observability Gramians from forward-mode JVPs, on monitored positions subsampled with
  inverse-probability weights; penalty (lam/2) on the normalized trace profile.

Objectives that draw random numbers (probe sets, probe vectors, monitored positions) own a
dedicated ``torch.Generator`` seeded from the run seed; its state travels through
``state_dict`` into the checkpoint, so chained segments equal one uninterrupted run and the
training data stream is never touched.
"""

from __future__ import annotations

import logging
import math
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F

from lostmid import task
from lostmid.adjoint import density, energy
from lostmid.errors import ConfigError
from lostmid.model import explicit_attention
from lostmid.objectives import OBJECTIVES, TaskObjective

if TYPE_CHECKING:  # pandas is imported where the tables are built, not by the training path
    import pandas as pd

log = logging.getLogger(__name__)

# Remedy kinds and the parameters each accepts, with their defaults (None: required).
PARAMETERS = {
    "none": {},
    "bias": {},
    "balance": {"beta": None, "target": "uniform", "sequences": 0},
    "reweight": {"eta": None, "every": 25, "probe_per_position": 8},
    "observability": {"lam": None, "probes": 2, "monitored": 8},
}
STRENGTH = {"balance": "beta", "reweight": "eta", "observability": "lam"}
TARGETS = ("uniform", "late", "early")


def remedy_settings(remedy: dict) -> dict:
    """The remedy block with defaults filled in; a bad value is a ConfigError naming the key.

    The schema (workflow/schemas/config.schema.yaml) checks the same bounds when the
    workflow starts; this check guards library use without Snakemake.
    """
    kind = remedy.get("kind", "none")
    if kind not in PARAMETERS:
        raise ConfigError(f"config key remedy.kind: unknown remedy {kind!r}; known: {sorted(PARAMETERS)}")
    allowed = PARAMETERS[kind]
    unknown = sorted(set(remedy) - set(allowed) - {"kind"})
    if unknown:
        raise ConfigError(f"config key remedy.{unknown[0]}: not a parameter of remedy kind {kind!r} (allowed: {sorted(allowed)})")
    settings = {"kind": kind}
    for key, default in allowed.items():
        if key not in remedy and default is None:
            raise ConfigError(f"config key remedy.{key}: required for remedy kind {kind!r}")
        settings[key] = remedy.get(key, default)
    for key in ("beta", "eta", "lam"):
        if key in settings and not (isinstance(settings[key], (int, float)) and settings[key] >= 0):
            raise ConfigError(f"config key remedy.{key}: the strength must be a number >= 0, got {settings[key]!r}")
    positive = {"every": "K", "probe_per_position": "probe sequences per position", "probes": "R"}
    for key, name in positive.items():
        if key in settings and not (isinstance(settings[key], int) and settings[key] >= 1):
            raise ConfigError(f"config key remedy.{key}: {name} must be an integer >= 1, got {settings[key]!r}")
    for key in ("sequences",):
        if key in settings and not (isinstance(settings[key], int) and settings[key] >= 0):
            raise ConfigError(f"config key remedy.{key}: must be an integer >= 0 (0: the whole batch), got {settings[key]!r}")
    if "target" in settings and settings["target"] not in TARGETS:
        raise ConfigError(f"config key remedy.target: unknown target density {settings['target']!r}; known: {list(TARGETS)}")
    if "monitored" in settings:
        monitored = settings["monitored"]
        ok = (isinstance(monitored, int) and monitored >= 1) or (isinstance(monitored, float) and 0 < monitored <= 1)
        if isinstance(monitored, bool) or not ok:
            raise ConfigError(
                f"config key remedy.monitored: the monitored set must be non-empty: a count >= 1 or a fraction in (0, 1], got {monitored!r}"
            )
    return settings


# ----------------------------------------------------------------------------------------------
# Target densities and the influence imbalance (Algorithm 1)


def target_density(L: int, name: str = "uniform", dtype=torch.float32, device=None) -> torch.Tensor:
    """Target density nu over the L positions, mean 1.

    ``uniform``: nu = 1. ``late``: nu_i = 2 p_i (linear ramp toward the end, recency).
    ``early``: nu_i = 2 (1 - p_i) (primacy). p_i = (i - 1/2) / L, so both ramps have mean 1.
    """
    p = (torch.arange(1, L + 1, dtype=torch.float64) - 0.5) / L
    if name == "uniform":
        nu = torch.ones(L, dtype=torch.float64)
    elif name == "late":
        nu = 2 * p
    elif name == "early":
        nu = 2 * (1 - p)
    else:
        raise ConfigError(f"config key remedy.target: unknown target density {name!r}; known: {list(TARGETS)}")
    return nu.to(dtype=dtype, device=device)


def influence_imbalance(adjoint: torch.Tensor, nu: torch.Tensor) -> torch.Tensor:
    """E_inf(nu) = mean_i (m_i - nu_i)^2 of the batch's input adjoint (batch, L, d); differentiable.

    m is a ratio of batch means, I(i) / mean_j I(j): a consistent but (for small batches)
    biased estimate of the population density (ratio-of-expectations bias, DESIGN.md 6).
    """
    return (density(energy(adjoint)) - nu).square().mean()


def input_adjoint_with_logits(model, tokens, targets, weights=None):
    """(mean loss, logits, P_0) with the graph kept, so functions of P_0 can be differentiated.

    Like ``lostmid.adjoint.input_adjoint`` but returns the logits and the mean loss of the
    same forward pass, so the trainer's task loss and the penalty share one graph.
    """
    L, d = tokens.shape[1], model.config.d_model
    tap = torch.zeros(tokens.shape[0], L, d, dtype=model.token_embedding.weight.dtype, device=tokens.device, requires_grad=True)
    with explicit_attention(model):
        logits = model(tokens, taps=[tap] + [None] * len(model.steps))
        loss = model.loss(logits, targets, weights)
        (p0,) = torch.autograd.grad(loss * tokens.shape[0], tap, create_graph=True)
    return loss, logits, p0


class BalanceObjective(TaskObjective):
    """Algorithm 1: loss + (beta/2) E_inf(nu), E_inf from the batch's input adjoint P_0.

    ``sequences`` > 0 computes the penalty on the first ``sequences`` of the batch only (a
    cheaper second-order pass); 0 uses the whole batch in the task loss's own graph.
    """

    def __init__(self, spec: dict):
        super().__init__(spec)
        self.settings = remedy_settings(spec["remedy"])
        self.nu = target_density(spec["model"]["seq_len"], self.settings["target"], dtype=torch.float64)

    def penalized(self, model, tokens, targets):
        """(total loss, task loss, E_inf, logits) of one batch."""
        beta, n = self.settings["beta"], self.settings["sequences"]
        if n == 0 or n >= tokens.shape[0]:
            loss, logits, p0 = input_adjoint_with_logits(model, tokens, targets)
        else:
            logits = model(tokens)
            loss = model.loss(logits, targets)
            _, _, p0 = input_adjoint_with_logits(model, tokens[:n], targets[:n])
        e_inf = influence_imbalance(p0, self.nu.to(p0))
        return loss + 0.5 * beta * e_inf, loss, e_inf, logits

    def __call__(self, model, tokens, targets, flags, step: int):
        total, _, _, logits = self.penalized(model, tokens, targets)
        return total, logits


# ----------------------------------------------------------------------------------------------
# Positional reweighting (Algorithm 2)


def reweighting_weights(risk: torch.Tensor, law: torch.Tensor, eta: float) -> torch.Tensor:
    """Per-flag-position loss weights w(f) = tau(f) / pi(f), tau(f) ~ r(f)^eta.

    ``risk`` and ``law`` (pi) are indexed by the flag positions 2..L. Since tau sums to one,
    E_pi[w] = sum_f pi(f) tau(f) / pi(f) = 1: the weights only move mass between positions.
    A zero risk is floored at 1e-12 so that tau stays defined for eta > 0.
    """
    risk = risk.double().clamp_min(1e-12)
    tau = risk.pow(eta)
    tau = tau / tau.sum()
    return tau / law.double()


def sequence_seed(seed: int, salt: int) -> int:
    """Seed of a remedy's own generator: distinct from the data seed (1_000_003 seed + 17)."""
    return 2_000_003 * seed + salt


class ReweightObjective(TaskObjective):
    """Algorithm 2: sequences weighted by w(f) = tau(f)/pi(f), refreshed every K steps.

    The risk r(f) is the mean cross-entropy at flag position f on a probe set of
    ``probe_per_position`` fresh sequences per position, drawn from the objective's own
    generator (never the training stream). The weights are updated at steps 1, K+1, 2K+1, ...
    """

    def __init__(self, spec: dict):
        super().__init__(spec)
        self.settings = remedy_settings(spec["remedy"])
        L = spec["model"]["seq_len"]
        self.law = task.flag_law(L, spec["train"]["flag_law"])
        self.weights = torch.ones(L - 1, dtype=torch.float64)
        self.generator = torch.Generator().manual_seed(sequence_seed(spec["seed"], 29))

    @torch.no_grad()
    def position_risk(self, model, device) -> torch.Tensor:
        """Mean cross-entropy per flag position 2..L on a fresh stratified probe set."""
        L = self.spec["model"]["seq_len"]
        n = self.settings["probe_per_position"]
        flags = task.flag_positions(L).repeat_interleave(n)
        tokens, targets = task.sequences_with_flags(flags, L, self.generator)
        logits = model(tokens.to(device))
        if logits.dim() == 3:
            logits = logits[:, -1]
        ce = F.cross_entropy(logits.double(), targets.to(device), reduction="none").cpu()
        return ce.view(L - 1, n).mean(1)

    def update(self, model, device) -> None:
        risk = self.position_risk(model, device)
        self.weights = reweighting_weights(risk, self.law, self.settings["eta"])
        log.debug("reweight: risk %.3g..%.3g, weights %.3g..%.3g", risk.min(), risk.max(), self.weights.min(), self.weights.max())

    def __call__(self, model, tokens, targets, flags, step: int):
        if (step - 1) % self.settings["every"] == 0:
            self.update(model, tokens.device)
        logits = model(tokens)
        w = self.weights.to(device=tokens.device, dtype=logits.dtype)[flags - 2]
        return model.loss(logits, targets, w), logits

    def state_dict(self) -> dict:
        return {"weights": self.weights.clone(), "generator": self.generator.get_state()}

    def load_state_dict(self, state: dict) -> None:
        self.weights = state["weights"].to(torch.float64).clone()
        self.generator.set_state(state["generator"])


# ----------------------------------------------------------------------------------------------
# Observability balancing (Algorithm 3)


def monitored_count(L: int, monitored) -> int:
    """|S| from a count (int) or a fraction of L (float), at least 1 and at most L."""
    if isinstance(monitored, float):
        return max(1, min(L, math.ceil(monitored * L)))
    return max(1, min(L, int(monitored)))


def strata(L: int, size: int) -> torch.Tensor:
    """Boundaries of ``size`` contiguous, near-equal strata of the positions 0..L-1 (size + 1 ints)."""
    return torch.div(torch.arange(size + 1) * L, size, rounding_mode="floor")


def sample_monitored(L: int, size: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Monitored positions S (0-based) and their inclusion probabilities q_i.

    Stratified sampling: the positions are cut into ``size`` contiguous strata and one
    position is drawn uniformly from each, so S covers the whole sequence and q_i =
    1 / (size of i's stratum) is known exactly. The inverse-probability weights 1/q_i make
    sums over S unbiased for sums over all L positions (Horvitz-Thompson).
    """
    bounds = strata(L, size)
    widths = bounds[1:] - bounds[:-1]
    offsets = (torch.rand(size, generator=generator, dtype=torch.float64) * widths).long()
    return bounds[:-1] + offsets, 1.0 / widths.double()


def observability_traces(model, x0: torch.Tensor, positions: torch.Tensor, probes: torch.Tensor) -> torch.Tensor:
    """One-probe Hutchinson estimates of tr G_i, one per slot (sequence, position, probe).

    G_i(x) = sum_k h_{k-1} (C_k J_{k<-0} E_i)^T (C_k J_{k<-0} E_i), k = 1..M, where J_{k<-0} is
    the Jacobian of the residual state X_k with respect to the input embeddings X_0 of the
    sequence x, E_i injects a vector at position i and C_k reads the state at the last
    position L. With xi ~ N(0, I_d), E ||C_k J E_i xi||^2 = ||C_k J E_i||_F^2, so
    t = sum_k h ||C_k J_{k<-0} E_i xi||^2 is unbiased for tr G_i. All slots go through ONE
    batched forward-mode pass (torch.func.jvp), differentiable with respect to the parameters.

    x0: (N, L, d) input embeddings of each slot's sequence; positions: (N,) 0-based;
    probes: (N, d). Returns (N,).
    """
    L = x0.shape[1]
    # The tangent is zero except at the slot's monitored position.
    tangent = F.one_hot(positions, L).to(x0.dtype)[:, :, None] * probes[:, None, :]
    h = torch.tensor([model.step_size(k) for k in range(len(model.steps))], dtype=x0.dtype, device=x0.device)

    def last_states(x):
        bias = model.logit_bias()
        out = []
        for k in range(len(model.steps)):
            x = model.advance(k, x, bias)
            out.append(x[:, -1])
        return torch.stack(out, 1)  # (N, M, d): C_k X_k for k = 1..M

    with explicit_attention(model):
        _, jv = torch.func.jvp(last_states, (x0.contiguous(),), (tangent,))
    return (jv.square().sum(-1) * h).sum(-1)


def trace_imbalance(traces: torch.Tensor, q: torch.Tensor, L: int) -> torch.Tensor:
    """E_obs = (1/L) sum_i (tau_i - 1)^2 of the trace density tau_i = L t_i / sum_j t_j.

    Estimated from the monitored traces t (s,) with inclusion probabilities q (s,):
    T = sum_S t_j / q_j (unbiased for sum_j t_j) and (1/L) sum_S (tau_j - 1)^2 / q_j. With every
    position monitored (q = 1) it is the exact imbalance; it equals L times DESIGN.md's
    sum_S (t_i / sum_j t_j - 1/|S|)^2 in that case, so lam plays the role of beta in Algorithm 1.
    """
    q = q.to(traces)
    total = (traces / q).sum()
    tau = L * traces / total
    return ((tau - 1).square() / q).sum() / L


class ObservabilityObjective(TaskObjective):
    """Algorithm 3: loss + (lam/2) E_obs of the Hutchinson trace profile.

    Each step draws |S| monitored positions (stratified, inverse-probability weighted) and R
    Gaussian probes per position from the objective's generator; each of the |S| R probe
    slots uses its own sequence of the batch, so the cost is |S| R JVP tangents.
    """

    def __init__(self, spec: dict):
        super().__init__(spec)
        self.settings = remedy_settings(spec["remedy"])
        self.L = spec["model"]["seq_len"]
        self.size = monitored_count(self.L, self.settings["monitored"])
        self.generator = torch.Generator().manual_seed(sequence_seed(spec["seed"], 31))

    def penalty(self, model, tokens) -> torch.Tensor:
        """(1/2-less) penalty E_obs of this batch: |S| x R slots, one JVP tangent each."""
        R = self.settings["probes"]
        positions, q = sample_monitored(self.L, self.size, self.generator)
        probes = torch.randn(self.size * R, model.config.d_model, generator=self.generator)
        # Slot (i, r) reads its own sequence of the batch (cycling if the batch is smaller),
        # so the mean over r estimates E_x tr G_i(x) over data and probes at once.
        rows = torch.arange(self.size * R, device=tokens.device) % tokens.shape[0]
        x0 = model.embed(tokens[rows])
        slots = positions.repeat_interleave(R).to(tokens.device)
        traces = observability_traces(model, x0, slots, probes.to(x0))
        return trace_imbalance(traces.view(self.size, R).mean(1), q.to(tokens.device), self.L)

    def __call__(self, model, tokens, targets, flags, step: int):
        logits = model(tokens)
        loss = model.loss(logits, targets)
        if self.settings["lam"] == 0:
            return loss, logits
        return loss + 0.5 * self.settings["lam"] * self.penalty(model, tokens), logits

    def state_dict(self) -> dict:
        return {"generator": self.generator.get_state()}

    def load_state_dict(self, state: dict) -> None:
        self.generator.set_state(state["generator"])


def exact_traces(model, x0: torch.Tensor) -> torch.Tensor:
    """Exact tr G_i for every position (mean over the sequences of x0): a reference for tests.

    Uses the full Jacobian of the last-position states with respect to X_0 (torch.func.jacfwd),
    so it is only for tiny models.
    """
    h = torch.tensor([model.step_size(k) for k in range(len(model.steps))], dtype=x0.dtype)

    def last_states(x):  # one sequence (L, d) -> (M, d)
        x = x[None]
        bias = model.logit_bias()
        out = []
        for k in range(len(model.steps)):
            x = model.advance(k, x, bias)
            out.append(x[0, -1])
        return torch.stack(out)

    with explicit_attention(model), torch.no_grad():
        jac = torch.func.vmap(torch.func.jacfwd(last_states))(x0)  # (n, M, d, L, d)
    return (jac.square().sum((2, 4)) * h[None, :, None]).sum(1).mean(0)


OBJECTIVES.update(balance=BalanceObjective, reweight=ReweightObjective, observability=ObservabilityObjective)


# ----------------------------------------------------------------------------------------------
# Aggregation: the results/remedies table (one row per run and checkpoint)

REMEDY_COLUMNS = ("remedy", "strength", "target", "every", "probe_per_position", "probes", "monitored")


def remedy_columns(variants: dict) -> "pd.DataFrame":
    """One row per variant: its remedy kind and parameters (NaN / None where not applicable)."""
    import pandas as pd

    rows = []
    for name, remedy in variants.items():
        settings = remedy_settings(remedy or {"kind": "none"})
        kind = settings["kind"]
        rows.append(
            {
                "variant": name,
                "remedy": kind,
                "strength": float(settings[STRENGTH[kind]]) if kind in STRENGTH else float("nan"),
                "target": settings.get("target"),
                "every": settings.get("every"),
                "probe_per_position": settings.get("probe_per_position"),
                "probes": settings.get("probes"),
                "monitored": None if "monitored" not in settings else str(settings["monitored"]),
            }
        )
    return pd.DataFrame(rows, columns=["variant", *REMEDY_COLUMNS]).astype({"every": "Int64", "probe_per_position": "Int64", "probes": "Int64"})


def steps_to_threshold(train: "pd.DataFrame", threshold: float = 0.99, window: int = 20) -> "pd.DataFrame":
    """First step at which the rolling mean (``window`` steps) of the batch accuracy reaches
    ``threshold``, per run; NaN if it never does."""
    import pandas as pd

    keys = ["variant", "L", "depth", "seed"]
    out = []
    for run, group in train.sort_values([*keys, "step"]).groupby(keys, sort=False):
        rolling = group["accuracy"].rolling(window, min_periods=window).mean()
        hit = group["step"][rolling >= threshold]
        out.append((*run, float(hit.iloc[0]) if len(hit) else float("nan")))
    return pd.DataFrame(out, columns=[*keys, "steps_to_99"])


BENCH_PATH = r"(?P<variant>[A-Za-z][A-Za-z0-9_-]*)/L(?P<L>\d+)_M(?P<depth>\d+)_seed(?P<seed>\d+)_step(?P<step>\d+)\.tsv$"


def read_benchmarks(paths) -> "pd.DataFrame":
    """Snakemake's benchmark records of the training segments: seconds and max_rss (MB) per run."""
    import re

    import pandas as pd

    rows = []
    for path in paths:
        match = re.search(BENCH_PATH, str(path))
        if not match:
            raise ConfigError(f"benchmark file {path} does not follow results/benchmarks/train/<run>_step<step>.tsv")
        record = pd.read_csv(path, sep="\t").iloc[-1]
        keys = match.groupdict()
        rows.append({"variant": keys["variant"], **{k: int(keys[k]) for k in ("L", "depth", "seed", "step")},
                     "bench_seconds": float(record["s"]), "max_rss_mb": pd.to_numeric(record["max_rss"], errors="coerce")})
    return pd.DataFrame(rows)


def remedy_table(metrics, failure, train, benchmarks, variants: dict, baseline: str = "baseline",
                 delta: float = 0.2, threshold: float = 0.99, window: int = 20) -> "pd.DataFrame":
    """The results/remedies table: one row per run and checkpoint.

    Columns: grid keys; remedy parameters; accuracy (stratified evaluation set) and
    final_accuracy; steps_to_99 (training-batch accuracy, rolling mean); Delta, LIM, E_inf, Z at
    the checkpoint (influence metrics at scale ``delta``); seconds_per_step (median of the
    trainer's per-step timing), peak_mem_mb (the library's per-run peak when the training log
    has it, else NaN), max_rss_mb (Snakemake benchmark, max over segments); and the overhead
    ratios against the ``baseline`` variant of the same (L, depth, seed).
    """
    import numpy as np

    keys = ["variant", "L", "depth", "seed"]
    at_delta = metrics[np.isclose(metrics["delta"], delta)]
    if at_delta.empty:
        raise ConfigError(f"config key remedies.delta: the influence metrics have no rows at delta={delta} (found {sorted(metrics['delta'].unique())})")
    table = at_delta[[*keys, "step", "Delta", "SC", "LIM", "E_inf", "Z"]]
    accuracy = failure.groupby([*keys, "step"], as_index=False).agg(failures=("failures", "sum"), n=("n", "sum"))
    accuracy["accuracy"] = 1 - accuracy.failures / accuracy.n
    table = table.merge(accuracy[[*keys, "step", "accuracy"]], on=[*keys, "step"], how="outer")
    last = table.groupby(keys)["step"].transform("max")
    final = table[table.step == last][[*keys, "accuracy"]].rename(columns={"accuracy": "final_accuracy"})
    per_run = final.merge(steps_to_threshold(train, threshold, window), on=keys, how="left")
    timing = train.groupby(keys).agg(seconds_per_step=("seconds_per_step", "median"))
    if "peak_mem_mb" in train:
        timing["peak_mem_mb"] = train.groupby(keys)["peak_mem_mb"].max()
    else:
        timing["peak_mem_mb"] = np.nan
    if len(benchmarks):
        timing = timing.join(benchmarks.groupby(keys).agg(max_rss_mb=("max_rss_mb", "max")))
    else:
        timing["max_rss_mb"] = np.nan
    per_run = per_run.merge(timing.reset_index(), on=keys, how="left")
    base = per_run[per_run.variant == baseline].drop(columns=["variant", "final_accuracy", "steps_to_99"])
    base = base.rename(columns={c: f"_base_{c}" for c in ("seconds_per_step", "peak_mem_mb", "max_rss_mb")})
    per_run = per_run.merge(base, on=["L", "depth", "seed"], how="left")
    for column, ratio in (("seconds_per_step", "time_ratio"), ("peak_mem_mb", "peak_mem_ratio"), ("max_rss_mb", "max_rss_ratio")):
        per_run[ratio] = per_run[column] / per_run[f"_base_{column}"]
    per_run = per_run.drop(columns=[c for c in per_run if c.startswith("_base_")])
    table = table.merge(per_run, on=keys, how="left").merge(remedy_columns(variants), on="variant", how="left")
    ordered = [*keys, "step", *REMEDY_COLUMNS, "accuracy", "final_accuracy", "steps_to_99", "Delta", "SC", "LIM", "E_inf", "Z",
               "seconds_per_step", "peak_mem_mb", "max_rss_mb", "time_ratio", "peak_mem_ratio", "max_rss_ratio"]
    return table[ordered].sort_values([*keys, "step"]).reset_index(drop=True)


def seed_summary(table: "pd.DataFrame", values=("accuracy", "final_accuracy", "steps_to_99", "Delta", "LIM", "E_inf", "Z",
                                                   "seconds_per_step", "time_ratio", "peak_mem_mb", "max_rss_mb")) -> "pd.DataFrame":
    """Mean over seeds with a 95% t-interval, per (variant, L, depth, step) and quantity (long format)."""
    import numpy as np
    import pandas as pd
    from scipy import stats

    long = table.melt(id_vars=["variant", "L", "depth", "seed", "step"], value_vars=list(values), var_name="quantity").dropna(subset=["value"])
    rows = []
    for key, group in long.groupby(["variant", "L", "depth", "step", "quantity"]):
        x = group["value"].to_numpy(dtype=float)
        mean = float(x.mean())
        half = float(stats.t.ppf(0.975, len(x) - 1) * x.std(ddof=1) / np.sqrt(len(x))) if len(x) > 1 else float("nan")
        rows.append((*key, len(x), mean, mean - half, mean + half))
    return pd.DataFrame(rows, columns=["variant", "L", "depth", "step", "quantity", "n_seeds", "mean", "ci_low", "ci_high"])
