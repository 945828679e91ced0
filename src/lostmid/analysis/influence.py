"""Adjoint influence of every input position, from one backward pass (docs/theory.md §4).

For a batch of sequences, one forward and one backward pass through zero-valued taps on the
residual states give the adjoint P_k = d loss / d X_k at every step k = 0..M' and every
position (``lostmid.core.adjoint.adjoints``); never one backward pass per position. From them:

    energy     I^(k)(i) = E ||P_k(i)||^2      (mean over the evaluation sequences)
    density    m^(k)_i  = I^(k)(i) / mean_j I^(k)(j)      (mean 1)
    raw total  Z        = sum_i I^(0)(i)

Layer k indexes residual states: k = 0 is the input (P_0, the gradient with respect to the
input embeddings); for ``block: sequential`` each attention and MLP sub-step is its own step,
so layer 2b-1 follows block b's attention and layer 2b its MLP.

The regional metrics of the density (Delta, SC, LIM, E_inf) are ``lostmid.analysis.metrics``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from lostmid.analysis import metrics
from lostmid.analysis.settings import FlowSettings, InfluenceSettings, InitSweepSettings, TraceSettings
from lostmid.core import adjoint, task
from lostmid.core.density import relative_position
from lostmid.tables.keys import with_keys

INFLUENCE_COLUMNS = ["layer", "position", "p", "energy", "density"]
METRIC_COLUMNS = ["delta", "m_left", "m_middle", "m_right", "Delta", "SC", "LIM", "E_inf", "Z"]


def evaluation_batch(L: int, settings: InfluenceSettings | FlowSettings | TraceSettings, device=None):
    """The fixed, seeded influence batch: ``batch_per_position`` sequences at every flag position 2..L;
    for the density flow (FlowSettings) the smaller ``flow_batch_per_position``, for the loss-free
    profiles (TraceSettings) ``trace_batch_per_position``, same seed."""
    per_position = (
        settings.flow_batch_per_position
        if isinstance(settings, FlowSettings)
        else settings.trace_batch_per_position
        if isinstance(settings, TraceSettings)
        else settings.batch_per_position
    )
    tokens, targets, _ = task.stratified_eval_set(L, per_position, settings.seed)
    return tokens.to(device), targets.to(device)


def _accumulated_energies(model, tokens, targets, chunk: int, all_steps: bool, answers: bool):
    """The loop of ``energies`` and ``answer_energies``: per chunk one forward and one backward pass;
    returns (sum over sequences of ||P_k(i)||^2, shape (M'+1, L); with ``answers``, the sum over the
    sequences whose flag is at f of ||P_0(f - 1)||^2, shape (L + 1,), indexed by f, and the number of
    those sequences, (L + 1,); without, two zero tensors).
    """
    model.eval()
    L = tokens.shape[1]
    total = None
    at_answer = torch.zeros(L + 1, dtype=torch.float64)
    counts = torch.zeros(L + 1, dtype=torch.long)
    for part_tokens, part_targets in zip(tokens.split(chunk), targets.split(chunk)):
        with torch.enable_grad():  # the adjoints are gradients, even when called under no_grad
            _, _, states = adjoint.adjoints(model, part_tokens, part_targets, all_steps=all_steps)
        input_energy = states[0].detach().square().sum(-1)  # (chunk, L): ||P_0(i)||^2 of each sequence
        part = torch.stack([input_energy.sum(0)] + [state.detach().square().sum(-1).sum(0) for state in states[1:]])
        total = part if total is None else total + part
        if not answers:
            continue
        # The flag at 1-based f asks for the token at f - 1 (0-based f - 2): its energy in this sequence.
        if not ((part_tokens == task.FLAG).sum(1) == 1).all():
            raise ValueError("every sequence of the influence batch must hold exactly one FLAG")
        flags = (part_tokens == task.FLAG).long().argmax(1).cpu() + 1  # (chunk,), one FLAG per sequence
        answer = input_energy.gather(1, (flags - 2).to(input_energy.device)[:, None])[:, 0]
        at_answer.index_add_(0, flags, answer.double().cpu())
        counts.index_add_(0, flags, torch.ones_like(flags))
    return total, at_answer, counts


def energies(model, tokens, targets, chunk: int = 1024, all_steps: bool = True) -> torch.Tensor:
    """Influence energies I^(k)(i) = E ||P_k(i)||^2, shape (M'+1, L) (or (1, L) with ``all_steps=False``).

    One forward and one backward pass per chunk of sequences; the per-sequence adjoints are
    independent, so chunking changes nothing but the memory held at once.
    """
    total, _, _ = _accumulated_energies(model, tokens, targets, chunk, all_steps, answers=False)
    return (total / tokens.shape[0]).double().cpu()


def answer_energies(model, tokens, targets, chunk: int = 1024, all_steps: bool = True):
    """``energies`` and, from the same passes, the *conditioned* influence of the answer: for every
    flag position f = 2..L, E[||P_0(f - 1)||^2 | flag at f], the input energy at the answer's
    position averaged over the sequences whose flag is at f only; shape (L - 1,), float64.

    Returns (energies (M'+1, L), conditioned energy (L - 1,), sequences per flag position (L - 1,)).
    A flag position without sequences in ``tokens`` is a ValueError (its conditioned energy is undefined).
    """
    total, at_answer, counts = _accumulated_energies(model, tokens, targets, chunk, all_steps, answers=True)
    if (counts[2:] == 0).any():
        missing = (torch.nonzero(counts[2:] == 0)[:, 0] + 2).tolist()
        raise ValueError(f"the influence batch has no sequence with its flag at positions {missing}")
    return (total / tokens.shape[0]).double().cpu(), at_answer[2:] / counts[2:], counts[2:]


ANSWER_COLUMNS = ["flag_pos", "position", "sequences", "energy", "density"]


def answer_table(conditioned, sequences, input_energy) -> pd.DataFrame:
    """Tidy (flag_pos, position, sequences, energy, density) rows of the conditioned influence
    (``answer_energies``): one per flag position f = 2..L, position = f - 1 the answer's, density =
    energy / mean_j I^(0)(j), on the scale of the averaged density m_j (same divisor)."""
    conditioned = np.asarray(conditioned, dtype=np.float64)
    input_energy = np.asarray(input_energy, dtype=np.float64)
    if input_energy.mean() <= 0:
        raise ValueError("influence energy is zero everywhere: the density is undefined")
    flags = np.arange(2, conditioned.size + 2)
    return pd.DataFrame(
        {
            "flag_pos": flags,
            "position": flags - 1,
            "sequences": np.asarray(sequences, dtype=np.int64),
            "energy": conditioned,
            "density": conditioned / input_energy.mean(),
        },
        columns=ANSWER_COLUMNS,
    )


def profile_table(energy: torch.Tensor) -> pd.DataFrame:
    """Tidy (layer, position, p, energy, density) rows from an (M'+1, L) energy array."""
    energy = np.asarray(energy, dtype=np.float64)
    n_layers, L = energy.shape
    layer = np.repeat(np.arange(n_layers), L)
    position = np.tile(np.arange(1, L + 1), n_layers)
    return pd.DataFrame(
        {
            "layer": layer,
            "position": position,
            "p": relative_position(position, L),
            "energy": energy.reshape(-1),
            "density": metrics.normalize(energy).reshape(-1),
        }
    )


def metrics_table(input_energy, deltas, target=None) -> pd.DataFrame:
    """One row per delta: regional averages, Delta, SC, LIM, E_inf of the density of P_0, and raw Z
    (``lostmid.analysis.metrics.influence_metrics``)."""
    rows = [{"delta": float(delta), **metrics.influence_metrics(input_energy, delta, target)} for delta in deltas]
    return pd.DataFrame(rows, columns=METRIC_COLUMNS)


def analyze(model, tokens, targets, deltas, chunk: int = 1024) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Influence profiles at every layer, the metrics table and the conditioned influence of the
    answer (``answer_table``) of one model on one batch, all from one backward pass per chunk."""
    energy, conditioned, sequences = answer_energies(model, tokens, targets, chunk)
    return profile_table(energy), metrics_table(energy[0], deltas), answer_table(conditioned, sequences, energy[0])


# --- The initialization sweep of the blog post --------------------------------------------------


def output_jacobian_norms(model, tokens: torch.Tensor, chunk: int = 1024) -> torch.Tensor:
    """The blog's influence measure: E ||d logits_L / d x_j||, power 1, per input position j; shape (L,).

    ``logits_L`` is the readout at position L (the final output; both answer logits), x_j the
    input embedding of position j (token plus position embedding), E the mean over the sequences
    of ``tokens`` of ``lostmid.core.adjoint.output_jacobian_norms``. Unlike the influence energy
    (squared norm of the loss gradient, ``energies``) it involves no target and no square.
    """
    model.eval()
    total = None
    for part in tokens.split(chunk):
        with torch.enable_grad():
            logits, (x0,) = adjoint.tapped_logits(model, part)
            norms = adjoint.output_jacobian_norms(logits, x0).sum(0)
        total = norms if total is None else total + norms
    return (total / tokens.shape[0]).cpu()


def init_sweep(model_keys: dict, settings: InitSweepSettings, device=None) -> pd.DataFrame:
    """Input influence at initialization for every (residual, depth, seed).

    ``model_keys`` is the config's ``model`` block (d_model, heads, block, ...); seq_len, depth
    and residual are set by the sweep. Columns: residual, depth, seed, position, p, energy,
    density (the squared loss-gradient measure of docs/influence.md) and output_jacobian (the
    blog's measure, ``output_jacobian_norms``: E ||d logits_L / d x_j||, power 1).
    """
    from lostmid.core.model import ModelConfig, model_at_init

    tokens, targets, _ = task.stratified_eval_set(settings.L, settings.batch_per_position, settings.seed)
    tokens, targets = tokens.to(device), targets.to(device)
    parts = []
    for residual in (True, False):
        for depth in settings.depths:
            for seed in settings.seeds:
                config = ModelConfig(**{**model_keys, "seq_len": settings.L, "depth": depth, "residual": residual})
                model = model_at_init(config, seed).to(device)  # the same init as step 0 of a run with this seed
                table = profile_table(energies(model, tokens, targets, all_steps=False)).drop(columns="layer")
                table["output_jacobian"] = output_jacobian_norms(model, tokens).numpy()
                parts.append(with_keys(table, residual=residual, depth=depth, seed=seed))
    return pd.concat(parts, ignore_index=True)


# --- Loss-free profiles of trained checkpoints (the paper's validation list, docs/validation.md) -------

OBSERVABILITY_COLUMNS = ["position", "p", "trace", "trace_density", "output_jacobian", "jacobian_density"]


def observability_profile(model, tokens: torch.Tensor, chunk: int = 64) -> pd.DataFrame:
    """Two position profiles of one model that, unlike the loss-gradient density, do not collapse
    when the loss does: one row per position with

    trace            tr G_i, the exact trace of the positional observability Gramian that
                     Algorithm 3 balances (``lostmid.objectives.algorithm3_observability.exact_traces``:
                     every tangent, no probes), mean over the sequences of ``tokens``;
    trace_density    tr G_i / mean_j tr G_j (its imbalance is Algorithm 3's E_obs with every position monitored);
    output_jacobian  E ||d logits_L / d x_j|| (``output_jacobian_norms``, the blog's measure);
    jacobian_density output_jacobian / its mean over positions.

    The raw totals (sum of ``trace``, of ``output_jacobian``) stand beside the densities. The
    exact traces cost L d forward tangents per sequence (``chunk`` sequences at a time).
    """
    from lostmid.objectives.algorithm3_observability import exact_traces

    model.eval()
    total = None
    for part in tokens.split(chunk):
        with torch.no_grad():
            x0 = model.embed(part)
        traces = exact_traces(model, x0).double() * part.shape[0]
        total = traces if total is None else total + traces
    trace = (total / tokens.shape[0]).cpu().numpy()
    jacobian = output_jacobian_norms(model, tokens, chunk).double().numpy()
    L = tokens.shape[1]
    position = np.arange(1, L + 1)
    return pd.DataFrame(
        {
            "position": position,
            "p": relative_position(position, L),
            "trace": trace,
            "trace_density": metrics.normalize(trace),
            "output_jacobian": jacobian,
            "jacobian_density": metrics.normalize(jacobian),
        },
        columns=OBSERVABILITY_COLUMNS,
    )
