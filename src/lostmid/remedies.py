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

import torch
import torch.nn.functional as F

from lostmid import task
from lostmid.adjoint import density, energy, functional_input_adjoint, functional_logits
from lostmid.errors import ConfigError
from lostmid.model import explicit_attention
from lostmid.objectives import OBJECTIVES, TaskObjective
from lostmid.remedy_settings import TARGETS, remedy_settings

log = logging.getLogger(__name__)

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

    def penalized(self, model, tokens, targets, logits_of=None, adjoint_of=input_adjoint_with_logits):
        """(total loss, task loss, E_inf, logits) of one batch.

        ``logits_of(tokens)`` and ``adjoint_of(tokens, targets)`` -> (loss, logits, P_0) are the
        model's own forward and ``input_adjoint_with_logits`` unless the functional form passes
        its pure-function counterparts.
        """
        beta, n = self.settings["beta"], self.settings["sequences"]
        if n == 0 or n >= tokens.shape[0]:
            loss, logits, p0 = adjoint_of(model, tokens, targets)
        else:
            logits = (logits_of or model)(tokens)
            loss = model.loss(logits, targets)
            _, _, p0 = adjoint_of(model, tokens[:n], targets[:n])
        e_inf = influence_imbalance(p0, self.nu.to(p0))
        return loss + 0.5 * beta * e_inf, loss, e_inf, logits

    def __call__(self, model, tokens, targets, flags, step: int):
        total, _, _, logits = self.penalized(model, tokens, targets)
        return total, logits

    def functional_loss(self, model, weights, buffers, tokens, targets, sequence_weights=None):
        def logits_of(x):
            return functional_logits(model, weights, buffers, x)

        def adjoint_of(model, x, y):
            with explicit_attention(model):  # the penalty differentiates through attention twice
                return functional_input_adjoint(model, weights, buffers, x, y)

        total, _, _, logits = self.penalized(model, tokens, targets, logits_of, adjoint_of)
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

    def sequence_weights(self, model, tokens, flags, step: int) -> torch.Tensor:
        """w(f) of each sequence's flag position, the law refreshed at steps 1, K+1, 2K+1, ..."""
        if (step - 1) % self.settings["every"] == 0:
            self.update(model, tokens.device)
        return self.weights.to(device=tokens.device, dtype=model.token_embedding.weight.dtype)[flags - 2]

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

    Not functional: its penalty reads the model's embedding and residual steps one by one, which
    torch.func.functional_call (forward only) cannot reparametrize, so seed batches of this
    objective train their seeds one after another.
    """

    functional = False

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
