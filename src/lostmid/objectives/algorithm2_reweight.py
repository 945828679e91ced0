"""Algorithm 2, positional reweighting (an outer loop): every K steps the risk r(f) per flag
position on a probe set, a target law tau(f) ~ r(f)^eta, and per-sequence loss weights
w(f) = tau(f) / pi(f).

The probe sets come from the objective's own generator (seeded from the run seed, state in
the checkpoint), never from the training stream.
"""

from __future__ import annotations

import logging

import torch
import torch.nn.functional as F

from lostmid.core import task
from lostmid.objectives.settings import remedy_settings
from lostmid.objectives.task_loss import TaskObjective, sequence_seed

log = logging.getLogger(__name__)


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


class ReweightObjective(TaskObjective):
    """Algorithm 2: sequences weighted by w(f) = tau(f)/pi(f), refreshed every K steps.

    The risk r(f) is the mean cross-entropy at flag position f on a probe set of
    ``probe_per_position`` fresh sequences per position, drawn from the objective's own
    generator (never the training stream). The weights are updated at steps 1, K+1, 2K+1, ...
    """

    def __init__(self, spec: dict):
        super().__init__(spec)
        self.settings = remedy_settings(spec["remedy"], spec["variant"])
        L = spec["model"]["seq_len"]
        self.law = task.flag_law(L, spec["train"]["flag_law"])
        self.weights = torch.ones(L - 1, dtype=torch.float64)
        self.generator = torch.Generator().manual_seed(sequence_seed(spec["seed"], 29))

    @torch.no_grad()
    def position_risk(self, model, device) -> torch.Tensor:
        """Mean cross-entropy per flag position 2..L on a fresh stratified probe set."""
        L = self.spec["model"]["seq_len"]
        n = self.settings.probe_per_position
        flags = task.flag_positions(L).repeat_interleave(n)
        tokens, targets = task.sequences_with_flags(flags, L, self.generator)
        logits = model(tokens.to(device))
        if logits.dim() == 3:
            logits = logits[:, -1]
        ce = F.cross_entropy(logits.double(), targets.to(device), reduction="none").cpu()
        return ce.view(L - 1, n).mean(1)

    def update(self, model, device) -> None:
        risk = self.position_risk(model, device)
        self.weights = reweighting_weights(risk, self.law, self.settings.eta)
        log.debug(
            "reweight: risk %.3g..%.3g, weights %.3g..%.3g",
            risk.min(),
            risk.max(),
            self.weights.min(),
            self.weights.max(),
        )

    def sequence_weights(self, model, tokens, flags, step: int) -> torch.Tensor:
        """w(f) of each sequence's flag position, the law refreshed at steps 1, K+1, 2K+1, ..."""
        if (step - 1) % self.settings.every == 0:
            self.update(model, tokens.device)
        return self.weights.to(device=tokens.device, dtype=model.token_embedding.weight.dtype)[flags - 2]

    def state_dict(self) -> dict:
        return {"weights": self.weights.clone(), "generator": self.generator.get_state()}

    def load_state_dict(self, state: dict) -> None:
        self.weights = state["weights"].to(torch.float64).clone()
        self.generator.set_state(state["generator"])
