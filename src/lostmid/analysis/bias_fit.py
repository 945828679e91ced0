"""The blog's bias correction: a fixed additive attention-logit bias B that flattens the
influence profile at initialization (docs/theory.md §6, docs/remedies.md).

B is one L x L matrix (entries on and below the diagonal; the causal mask hides the rest),
shared by every head and layer (or, ``param: layer_head``, one per attention step and head),
data-independent and fitted once per bias variant, L and depth,
on the model ``fit_model`` names (the variant's own by default; the blog's literal reading fits
on the no-residual network) with its weights at initialization frozen: Adam on B (gradients
through the adjoint), averaged over several random initializations and batches whose seeds are
disjoint from the training seeds. The fitted B is inserted into the variant's own model.

Settings (lostmid.analysis.settings.FitSettings), each a reading the blog leaves open:
- ``target``: the profile flattened. ``loss``: the influence energy E||P_0(j)||^2 of the loss
  (lostmid.core.adjoint.seed_input_energies, one vmapped pass over the initializations);
  ``output_jacobian``: the blog's E||d output_L / d x_j||, power 1
  (lostmid.core.adjoint.output_jacobian_norms, the measure of the initialization sweep).
- ``positions``: ``all``: E_inf of the whole profile, which silencing positions can only raise.
  ``context``: E_inf of positions 1..L-1 renormalized over them, plus the hinge penalty
  (log s_0 - log s)_+^2 on the context's share s of the profile's total (s_0: at B = 0, per
  initialization): renormalized alone, the context is "flat" when all of it is equally tiny, and
  a self-attention spike reaches that; the penalty keeps the context's share at least at its
  B = 0 value (in a residual model the readout position's identity path is out of B's reach).
- ``param``: ``full``: every causal entry free (the blog's table B(i, j)); ``distance``: B_ij =
  c(i - j), L numbers; ``layer_head``: a full table per attention step and head (``theta_shape``).
- ``restarts``: the descent runs from B = 0 and from restarts - 1 random starts; the best start's B
  is kept and every start's trace is in the iterations table (``FitResult.trace_table``).

A fit cannot pass unless it did what it is for: on ``heldout`` further initializations (never
seen by the fit) the imbalance of the fitted profile must fall, the t interval of the per-init
change lying below 0 (``FitResult.accepted``); else the command fails with one line.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from lostmid.analysis.settings import BATCHES, FIT_INITS, HELD_OUT, RESTARTS, FitSettings
from lostmid.core import task
from lostmid.core.adjoint import functional_logits, output_jacobian_norms, seed_input_energies, zero_state
from lostmid.core.density import density, imbalance, positions
from lostmid.core.model import FlagTransformer, ModelConfig, model_at_init
from lostmid.errors import ConfigError
from lostmid.tables.summaries import t_half_width

log = logging.getLogger(__name__)


@dataclass
class FitResult:
    bias: torch.Tensor  # (L, L) or (attention steps, heads, L, L), gauge-fixed, zero above the diagonal
    iterations: pd.DataFrame  # iteration, objective, E_inf_fit, E_inf (and restart with more than one start)
    profiles: pd.DataFrame  # stage (before/after), position, p, density (held-out inits)
    summary: pd.DataFrame  # one row per held-out initialization (see ``summary_table``)
    change: tuple[float, float, float]  # held-out imbalance change after - before: mean, interval low, high
    converged: bool  # the kept start's
    starts: pd.DataFrame  # one row per start (descend_from_starts)

    @property
    def before(self) -> float:
        """Held-out imbalance of the fitted positions at B = 0, mean over the held-out inits."""
        return float(self.summary.imbalance_before.mean())

    @property
    def after(self) -> float:
        """... at the fitted B."""
        return float(self.summary.imbalance_after.mean())

    def trace_table(self) -> pd.DataFrame:
        """What the fit's iterations table holds: every start's trace with its start's ``converged``, keyed by
        ``restart`` when the fit had more than one start (a one-start fit's: iteration, objective, E_inf_fit,
        E_inf, converged)."""
        if "restart" not in self.iterations:
            return self.iterations.assign(converged=self.converged)
        return self.iterations.merge(self.starts[["restart", "converged"]], on="restart", how="left")

    @property
    def accepted(self) -> bool:
        """The guard: the interval of the held-out change lies below 0 (the fit flattened the profile)."""
        return self.change[2] < 0


def fitted_positions(L: int, positions: str) -> slice:
    return slice(0, L - 1) if positions == "context" else slice(0, L)


def fitted_imbalance(energies: torch.Tensor, part: slice) -> torch.Tensor:
    """E_inf (uniform target) of the density renormalized over the positions ``part``
    (``lostmid.core.density``); energies (inits, L) -> (inits,)."""
    return imbalance(density(energies[..., part]))


def context_share(energies: torch.Tensor) -> torch.Tensor:
    """The share of positions 1..L-1 in the profile's total, (inits, L) -> (inits,)."""
    return energies[..., :-1].sum(-1) / energies.sum(-1)


def share_penalty(energies: torch.Tensor, floor: torch.Tensor) -> torch.Tensor:
    """(log floor - log share)_+^2 per initialization: zero while the context keeps at least the share
    ``floor`` (its B = 0 value), growing as the context is silenced."""
    return torch.relu(floor.log() - context_share(energies).log()).square()


def gauge_fix(theta: torch.Tensor) -> torch.Tensor:
    """The causal part of theta (..., L, L) with each row's mean removed (softmax ignores row shifts)."""
    L = theta.shape[-1]
    causal = torch.ones(L, L, dtype=torch.bool).tril()
    b = theta.masked_fill(~causal, 0.0)
    row_mean = b.sum(-1, keepdim=True) / causal.sum(1, keepdim=True)
    return (b - row_mean).masked_fill(~causal, 0.0)


def bias_matrix(theta: torch.Tensor, L: int, param: str) -> torch.Tensor:
    """B from the free parameters: ``full`` theta is L x L; ``distance`` theta[k] is the bias of
    a key k positions back (a Toeplitz B: the same recency preference for every query)."""
    if param == "distance":  # (layer_head: gauge_fix keeps its leading axes)
        lag = (torch.arange(L)[:, None] - torch.arange(L)[None, :]).clamp_min(0)
        theta = theta[lag]
    return gauge_fix(theta)


@dataclass
class Problems:
    """Random initializations of one model, each with its own fixed batch; ``profiles`` gives the
    fitted target's profile of every one under a bias."""

    models: list[FlagTransformer]
    tokens: torch.Tensor  # (inits, batch, L)
    targets: torch.Tensor  # (inits, batch)
    target: str  # loss | output_jacobian

    @classmethod
    def draw(cls, config: ModelConfig, settings: FitSettings, first: int, count: int) -> Problems:
        """``count`` initializations: weights seed + first + j, batches seed + BATCHES + first + j."""
        law = task.flag_law(config.seq_len, "uniform")
        models, batches = [], []
        for j in range(count):
            models.append(model_at_init(config, settings.seed + first + j))
            generator = torch.Generator().manual_seed(settings.seed + BATCHES + first + j)
            batches.append(task.sample_batch(settings.batch, config.seq_len, law, generator))
        return cls(models, torch.stack([b[0] for b in batches]), torch.stack([b[1] for b in batches]), settings.target)

    def profiles(self, bias: torch.Tensor) -> torch.Tensor:
        """The target's profile of every initialization under ``bias``, (inits, L): differentiable
        with respect to ``bias``."""
        if self.target == "loss":
            return seed_input_energies(self.models, self.tokens, self.targets, bias)
        rows = []
        for model, tokens in zip(self.models, self.tokens):
            buffers = {**dict(model.named_buffers()), "attn_bias": bias}
            tap = zero_state(model, tokens).requires_grad_()
            logits = functional_logits(model, dict(model.named_parameters()), buffers, tokens, taps=[tap])
            rows.append(output_jacobian_norms(logits, tap, create_graph=bias.requires_grad).mean(0))
        return torch.stack(rows)


def theta_shape(config: ModelConfig, param: str) -> tuple[int, ...]:
    """The free parameters of B: ``distance`` (L,), ``full`` (L, L), ``layer_head`` (depth, heads, L, L),
    one table per attention step and head (a richer form than the blog's; the model holds either:
    lostmid.core.model.attention_bias_shapes)."""
    L = config.seq_len
    shapes = {"distance": (L,), "full": (L, L), "layer_head": (config.depth, config.heads, L, L)}
    if param not in shapes:
        raise ConfigError(f"config key bias_fit.param: unknown {param!r}; known: {sorted(shapes)}")
    return shapes[param]


def descend(problems: Problems, settings: FitSettings, theta: torch.Tensor) -> tuple[torch.Tensor, pd.DataFrame, bool]:
    """Adam on the mean over ``problems`` of the objective (module doc) from ``theta``, stopping on the
    relative tolerance: (the final theta, its trace: iteration, objective, E_inf_fit, E_inf, converged)."""
    L = problems.tokens.shape[-1]
    part = fitted_positions(L, settings.positions)
    floor = context_share(problems.profiles(torch.zeros(L, L)).detach())
    theta = theta.clone().requires_grad_()
    optimizer = torch.optim.Adam([theta], lr=settings.lr)
    rows, best, history = [], float("inf"), []
    converged = False
    for iteration in range(settings.max_iter + 1):
        profiles = problems.profiles(bias_matrix(theta, L, settings.param))
        flatness = fitted_imbalance(profiles, part)
        penalty = share_penalty(profiles, floor) if settings.positions == "context" else torch.zeros_like(flatness)
        objective = (flatness + penalty).mean()
        whole = fitted_imbalance(profiles.detach(), slice(0, L)).mean().item()
        rows.append((iteration, objective.item(), flatness.mean().item(), whole))
        best = min(best, objective.item())
        history.append(best)
        if iteration >= settings.patience:
            old = history[-1 - settings.patience]
            if old - best <= settings.tol * abs(old):
                converged = True
                break
        if iteration == settings.max_iter:
            break
        optimizer.zero_grad()
        objective.backward()
        optimizer.step()
    return theta.detach(), pd.DataFrame(rows, columns=["iteration", "objective", "E_inf_fit", "E_inf"]), converged


def fit_bias(config: ModelConfig, settings: FitSettings, inserted: ModelConfig | None = None) -> FitResult:
    """Fit B on the model ``config`` by Adam from ``settings.restarts`` starts (``descend_from_starts``; one: from
    B = 0 alone); judge the best start's B on held-out initializations. ``inserted``: the model B is inserted
    into (default ``config``), whose attention at init the summary reports."""
    if config.attention == "uniform":
        raise ConfigError("config key model.attention: a logit bias has no effect on uniform attention")
    L = config.seq_len
    problems = Problems.draw(config, settings, FIT_INITS, settings.inits)
    shape = theta_shape(config, settings.param)
    theta, traces, starts = descend_from_starts(problems, settings, shape, settings.restarts)
    iterations = traces if settings.restarts > 1 else traces.drop(columns="restart")
    converged = bool(starts.converged[starts.objective.idxmin()])
    bias = bias_matrix(theta, L, settings.param)
    profiles, summary, change = held_out_report(config, settings, bias, inserted)
    log.info(
        "bias fit L=%d: %d starts, %d iterations, held-out imbalance %.4g -> %.4g, change %.4g [%.4g, %.4g]",
        L,
        len(starts),
        len(iterations) - len(starts),
        summary.imbalance_before.mean(),
        summary.imbalance_after.mean(),
        *change,
    )
    return FitResult(bias, iterations, profiles, summary.assign(accepted=change[2] < 0), change, converged, starts)


def descend_from_starts(
    problems: Problems, settings: FitSettings, shape: tuple[int, ...], restarts: int, scale: float = 1.0
) -> tuple[torch.Tensor, pd.DataFrame, pd.DataFrame]:
    """``descend`` from ``restarts`` starts on the same problems: start 0 from theta = 0, start r >= 1 from
    theta ~ N(0, scale^2) entry by entry (its own generator, seed ``settings.seed + RESTARTS + r``). Returns
    the theta of the start with the lowest final objective (the first of equals), every start's trace
    (restart, iteration, objective, E_inf_fit, E_inf) and one row per start (restart, iterations, converged,
    objective: the final one, plateau)."""
    if restarts < 1:
        raise ConfigError(f"bias fit restarts: {restarts}; at least 1")
    traces, starts, best = [], [], None
    for r in range(restarts):
        generator = torch.Generator().manual_seed(settings.seed + RESTARTS + r)
        start = torch.zeros(shape) if r == 0 else scale * torch.randn(shape, generator=generator)
        theta, trace, converged = descend(problems, settings, start)
        final = float(trace.objective.iloc[-1])
        traces.append(trace.assign(restart=r))
        starts.append((r, len(trace) - 1, converged, final, plateau(trace.objective.to_numpy(), settings.patience)))
        if best is None or final < best[0]:
            best = (final, theta)
    columns = ["restart", "iterations", "converged", "objective", "plateau"]
    trace_table = pd.concat(traces, ignore_index=True)[["restart", "iteration", "objective", "E_inf_fit", "E_inf"]]
    return best[1], trace_table, pd.DataFrame(starts, columns=columns)


@dataclass
class Restarts:
    """The fit from several starts (``fit_restarts``): the best start's B and every start's trace."""

    bias: torch.Tensor  # the B of the start with the lowest final objective
    traces: pd.DataFrame  # restart, iteration, objective, E_inf_fit, E_inf (every start)
    starts: pd.DataFrame  # one row per start: restart, iterations, converged, final objective, plateau
    heldout: pd.DataFrame  # the best B on the held-out inits: held_out_tables' summary


def fit_restarts(config: ModelConfig, settings: FitSettings, restarts: int, scale: float = 1.0) -> Restarts:
    """Fit B ``restarts`` times on the same initializations (``descend_from_starts``), keep every start's
    trace and judge the best start's B on the held-out initializations (the pilot's reading: no guard)."""
    L = config.seq_len
    problems = Problems.draw(config, settings, FIT_INITS, settings.inits)
    shape = theta_shape(config, settings.param)
    theta, traces, starts = descend_from_starts(problems, settings, shape, restarts, scale)
    bias = bias_matrix(theta, L, settings.param)
    held_out = Problems.draw(config, settings, HELD_OUT, settings.heldout)
    _, summary = held_out_tables(held_out, bias, fitted_positions(L, settings.positions))
    return Restarts(bias, traces, starts, summary)


def plateau(objective: np.ndarray, window: int) -> float:
    """How far a trace still fell over its last ``window`` iterations: (best before them - best at the
    end) / |best at the end| (0: flat; nan when the trace is not longer than the window)."""
    best = np.minimum.accumulate(objective)
    if best.size <= window:
        return float("nan")
    return float((best[-1 - window] - best[-1]) / abs(best[-1]))


def readout_floor(energies: torch.Tensor) -> torch.Tensor:
    """The least E_inf (uniform target) of any profile whose last position has the density of ``energies``,
    (inits, L) -> (inits,): with r that density, the others share L - r, and E_inf = (r - 1)^2 / L + the
    others' spread, least when they are equal: (r - 1)^2 / (L - 1) (docs/remedies.md, "What B can reach")."""
    L = energies.shape[-1]
    return (density(energies)[..., -1] - 1).square() / (L - 1)


def held_out_report(
    config: ModelConfig, settings: FitSettings, bias: torch.Tensor, inserted: ModelConfig | None = None
) -> tuple[pd.DataFrame, pd.DataFrame, tuple[float, float, float]]:
    """What a bias does on the held-out initializations of ``settings``: the profiles before/after, the
    summary per initialization (``held_out_tables``, the same in the model ``inserted`` B goes into as
    ``inserted_*``, B's shape and the self-attention at init) and the imbalance change with its t interval
    (mean, low, high). For a fitted B and for a control built from one (lostmid.analysis.bias_controls)."""
    part = fitted_positions(config.seq_len, settings.positions)
    held_out = Problems.draw(config, settings, HELD_OUT, settings.heldout)
    profiles, summary = held_out_tables(held_out, bias, part)
    inserted = inserted or config
    # The same measures in the model B is inserted into (equal to the above when it is the fit's own).
    _, in_model = held_out_tables(Problems.draw(inserted, settings, HELD_OUT, settings.heldout), bias, part)
    summary = summary.assign(
        **{f"inserted_{name}": in_model[name] for name in in_model.columns if name != "heldout_init"}
    )
    summary = summary.assign(**bias_summary(bias), **self_attention_at_init(inserted, settings, held_out.tokens, bias))
    differences = (summary.imbalance_after - summary.imbalance_before).to_numpy()
    half = t_half_width(float(differences.std(ddof=1)), differences.size, settings.level)
    change = (float(differences.mean()), float(differences.mean() - half), float(differences.mean() + half))
    return profiles, summary, change


def held_out_tables(problems: Problems, bias: torch.Tensor, part: slice) -> tuple[pd.DataFrame, pd.DataFrame]:
    """On the held-out initializations, B = 0 against the fitted B: the mean density profiles
    (stage, position, p, density, density_fit, E_inf_fit, E_inf) and, per initialization, the
    imbalance of the fitted positions, the context's share and the raw total."""
    L = bias.shape[-1]
    frames, per_init = [], {}
    for stage, b in (("before", torch.zeros(L, L)), ("after", bias)):
        energies = problems.profiles(b).detach().double()
        fit_density = np.full(L, np.nan)
        fit_density[part] = density(energies[:, part]).mean(0).numpy()
        per_init[f"imbalance_{stage}"] = fitted_imbalance(energies, part).numpy()
        per_init[f"context_share_{stage}"] = context_share(energies).numpy()
        per_init[f"total_{stage}"] = energies.sum(-1).numpy()
        frames.append(
            pd.DataFrame(
                {
                    "stage": stage,
                    "position": np.arange(1, L + 1),
                    "p": positions(L),
                    "density": density(energies).mean(0).numpy(),
                    "density_fit": fit_density,
                    "E_inf_fit": per_init[f"imbalance_{stage}"].mean(),
                    "E_inf": fitted_imbalance(energies, slice(0, L)).mean().item(),
                }
            )
        )
    summary = pd.DataFrame({"heldout_init": np.arange(len(problems.models)), **per_init})
    return pd.concat(frames, ignore_index=True), summary


def bias_summary(bias: torch.Tensor) -> dict[str, float]:
    """Two numbers of B that a row's shift cannot change (softmax ignores it, so the gauge does not matter):

    c0         the bias a query gives itself minus its mean bias over its older keys (lags >= 1),
               averaged over the queries 2..L;
    lag_slope  the least-squares slope of B(i, i - k) on the lag k over k >= 1 within each query
               (query fixed effects: every query's values and lags centred on its own means), pooled
               over the queries 3..L; negative: recent keys weighted more. For a Toeplitz B it is
               the slope of c(k) over k >= 1.

    Both are linear in B: of a B per attention step and head, they are the mean of its tables' (that of
    the mean table).
    """
    L = bias.shape[-1]
    B = bias.double().reshape(-1, L, L).mean(0).numpy()
    c0 = np.mean([B[i, i] - B[i, :i].mean() for i in range(1, L)]) if L > 1 else float("nan")
    num = den = 0.0
    for i in range(2, L):
        lags = np.arange(1, i + 1)
        values = B[i, i - lags]
        num += float(((lags - lags.mean()) * (values - values.mean())).sum())
        den += float(((lags - lags.mean()) ** 2).sum())
    return {"c0": float(c0), "lag_slope": num / den if den else float("nan")}


def self_attention_at_init(
    config: ModelConfig, settings: FitSettings, tokens: torch.Tensor, bias: torch.Tensor
) -> dict[str, float]:
    """The mean attention weight a query pays itself (every layer, head and query) in the model B
    is inserted into, at the held-out initializations on their batches: with B and with B = 0."""
    biases = {"self_attention_init": bias, "self_attention_init_b0": torch.zeros_like(bias)}
    diagonals = {name: [] for name in biases}
    for j, batch in enumerate(tokens):
        model = model_at_init(config, settings.seed + HELD_OUT + j)  # built once, measured with each bias
        for name, b in biases.items():
            model.set_attention_bias(b)
            with torch.no_grad():
                maps = torch.stack(model.attention_maps(batch))  # (steps, batch, heads, L, L)
            diagonals[name].append(torch.diagonal(maps, dim1=-2, dim2=-1).mean().item())
    return {name: float(np.mean(values)) for name, values in diagonals.items()}


def bias_long(bias: torch.Tensor) -> pd.DataFrame:
    """B in long format: one row per (query i, key j) on and below the diagonal (1-based); a B per attention
    step and head (attention steps, heads, L, L) has one such block per ``attention_step`` and ``head`` (1-based)."""
    L = bias.shape[-1]
    i, j = torch.tril_indices(L, L)
    if bias.dim() == 2:
        return pd.DataFrame({"query": (i + 1).numpy(), "key": (j + 1).numpy(), "bias": bias[i, j].numpy()})
    blocks = [
        bias_long(table).assign(attention_step=a + 1, head=h + 1)
        for a, per_head in enumerate(bias)
        for h, table in enumerate(per_head)
    ]
    return pd.concat(blocks, ignore_index=True)[["attention_step", "head", "query", "key", "bias"]]
