"""Algorithm 3, observability balancing: Hutchinson estimates of the traces of the positional
observability Gramians from forward-mode JVPs, on monitored positions subsampled with
inverse-probability weights; penalty (lam/2) on the normalized trace profile.

Monitored positions and probe vectors come from the objective's own generator (seeded from the
run seed, state in the checkpoint), never from the training stream.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from lostmid.objectives.settings import remedy_settings
from lostmid.objectives.task_loss import TaskObjective, sequence_seed


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


def last_states(model, x: torch.Tensor) -> torch.Tensor:
    """C_k X_k for k = 1..M: the last position's residual state after every step from X_0 = x
    (N, L, d), with explicit attention (forward-mode AD runs through it); shape (N, M, d)."""
    mask = model.logit_bias()
    out = []
    for k in range(len(model.steps)):
        x = model.advance(k, x, mask, explicit=True)
        out.append(x[:, -1])
    return torch.stack(out, 1)


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
    _, jv = torch.func.jvp(lambda x: last_states(model, x), (x0.contiguous(),), (tangent,))  # (N, M, d)
    return (jv.square().sum(-1) * h).sum(-1)


def trace_imbalance(traces: torch.Tensor, q: torch.Tensor, L: int) -> torch.Tensor:
    """E_obs = (1/L) sum_i (tau_i - 1)^2 of the trace density tau_i = L t_i / sum_j t_j.

    Estimated from the monitored traces t (s,) with inclusion probabilities q (s,):
    T = sum_S t_j / q_j (unbiased for sum_j t_j) and (1/L) sum_S (tau_j - 1)^2 / q_j. With every
    position monitored (q = 1) it is the exact imbalance; it equals L times the theory's (docs/theory.md §6)
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

    Not functional: its penalty reads the model's embedding and residual steps one by one, which
    torch.func.functional_call (forward only) cannot reparametrize, so seed batches of this
    objective train their seeds one after another.
    """

    functional = False

    def __init__(self, spec: dict):
        super().__init__(spec)
        self.settings = remedy_settings(spec["remedy"], spec["variant"])
        self.L = spec["model"]["seq_len"]
        self.size = monitored_count(self.L, self.settings.monitored)
        self.generator = torch.Generator().manual_seed(sequence_seed(spec["seed"], 31))

    def penalty(self, model, tokens) -> torch.Tensor:
        """(1/2-less) penalty E_obs of this batch: |S| x R slots, one JVP tangent each."""
        R = self.settings.probes
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
        if self.settings.lam == 0:
            return loss, logits
        return loss + 0.5 * self.settings.lam * self.penalty(model, tokens), logits

    def state_dict(self) -> dict:
        return {"generator": self.generator.get_state()}

    def load_state_dict(self, state: dict) -> None:
        self.generator.set_state(state["generator"])


def exact_traces(model, x0: torch.Tensor) -> torch.Tensor:
    """Exact tr G_i for every position (mean over the sequences of x0): the reference of the tests
    and the trace profile of trained checkpoints (``lostmid.analysis.influence.observability_profile``).

    Uses the full Jacobian of the last-position states with respect to X_0 (torch.func.jacfwd,
    L d tangents per sequence), so it is for small models (L d in the hundreds).
    """
    h = torch.tensor([model.step_size(k) for k in range(len(model.steps))], dtype=x0.dtype, device=x0.device)

    def sequence_last_states(x):  # one sequence (L, d) -> (M, d)
        return last_states(model, x[None])[0]

    with torch.no_grad():
        jac = torch.func.vmap(torch.func.jacfwd(sequence_last_states))(x0)  # (n, M, d, L, d)
    return (jac.square().sum((2, 4)) * h[None, :, None]).sum(1).mean(0)
