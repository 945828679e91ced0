"""AdamW for the training chain, on torch's own functional AdamW (``torch.optim.adamw.adamw``).

Why not ``torch.optim.AdamW`` itself: every ``Optimizer.step()`` imports ``torch._dynamo``
(to mark the step as a graph break for ``torch.compile``), which costs 1.5 s of CPU per
process on a laptop core. A default training job runs ~5 s of steps, and the default
pipeline has 60 of them. The update arithmetic here is the one ``torch.optim.AdamW.step``
runs, through the same functional call, and the state dict has ``torch.optim.AdamW``'s
layout, so either class resumes the other's checkpoint (tests/test_optim.py checks both).
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
from torch.optim.adamw import adamw

# torch's fused kernels cover these devices; elsewhere the single-tensor loop does the same step.
FUSED_DEVICES = ("cpu", "cuda")


class AdamW:
    def __init__(
        self,
        params: Iterable[torch.nn.Parameter],
        lr: float,
        betas: tuple[float, float],
        weight_decay: float,
        eps: float = 1e-8,
    ):
        self.params = [p for p in params if p.requires_grad]
        self.lr, self.betas, self.weight_decay, self.eps = lr, tuple(betas), weight_decay, eps
        # One fused kernel per step instead of ~10 small ops per tensor: the model is small, so
        # the update is dispatch-bound, and fusing makes it 6x faster on the CPU.
        self.fused = all(p.device.type in FUSED_DEVICES and p.is_floating_point() for p in self.params)
        self.state: dict[int, dict[str, torch.Tensor]] = {}  # parameter index -> step, exp_avg, exp_avg_sq

    def zero_grad(self, set_to_none: bool = True) -> None:
        for p in self.params:
            if set_to_none:
                p.grad = None
            elif p.grad is not None:
                p.grad.zero_()

    def _state(self, index: int, p: torch.Tensor) -> dict[str, torch.Tensor]:
        if index not in self.state:
            self.state[index] = {
                # torch keeps the step count on the parameter's device for the fused kernel, else on the CPU.
                "step": torch.zeros((), dtype=torch.float32, device=p.device if self.fused else "cpu"),
                "exp_avg": torch.zeros_like(p, memory_format=torch.preserve_format),
                "exp_avg_sq": torch.zeros_like(p, memory_format=torch.preserve_format),
            }
        return self.state[index]

    @torch.no_grad()
    def step(self) -> None:
        active = [(i, p) for i, p in enumerate(self.params) if p.grad is not None]
        if not active:
            return
        states = [self._state(i, p) for i, p in active]
        adamw(
            [p for _, p in active],
            # The fused kernel reads a gradient with its parameter's strides: a gradient of another
            # layout (vmap returns some transposed) would be applied to the wrong elements.
            [p.grad.contiguous() if p.is_contiguous() else p.grad for _, p in active],
            [s["exp_avg"] for s in states],
            [s["exp_avg_sq"] for s in states],
            [],
            [s["step"] for s in states],
            foreach=False,
            fused=self.fused,
            amsgrad=False,
            beta1=self.betas[0],
            beta2=self.betas[1],
            lr=self.lr,
            weight_decay=self.weight_decay,
            eps=self.eps,
            maximize=False,
        )

    def state_dict(self) -> dict:
        """torch.optim.AdamW's layout: per-parameter state by index, and one parameter group."""
        group = {
            "lr": self.lr,
            "betas": self.betas,
            "eps": self.eps,
            "weight_decay": self.weight_decay,
            "amsgrad": False,
            "maximize": False,
            "foreach": False,
            "capturable": False,
            "differentiable": False,
            "fused": self.fused,
            "decoupled_weight_decay": True,
            "params": list(range(len(self.params))),
        }
        return {"state": self.state, "param_groups": [group]}

    def load_state_dict(self, state_dict: dict) -> None:
        """Take the moments and step counts of a state dict from this class or torch.optim.AdamW.

        The hyperparameters stay those given to the constructor: the run's spec, which the
        checkpoint's fingerprint has already been checked against.
        """
        groups = state_dict["param_groups"]
        if len(groups) != 1 or len(groups[0]["params"]) != len(self.params):
            raise ValueError(
                f"optimizer state is for {sum(len(g['params']) for g in groups)} parameters "
                f"in {len(groups)} groups, the model has {len(self.params)} in one"
            )
        self.state = {}
        for index, saved in state_dict["state"].items():
            p = self.params[int(index)]
            for key in ("exp_avg", "exp_avg_sq"):
                if tuple(saved[key].shape) != tuple(p.shape):
                    raise ValueError(
                        f"optimizer {key} of parameter {index} has shape {tuple(saved[key].shape)}, "
                        f"the parameter {tuple(p.shape)}"
                    )
            self.state[int(index)] = {
                "step": saved["step"].to(torch.float32).to(p.device if self.fused else "cpu"),
                "exp_avg": saved["exp_avg"].to(p),
                "exp_avg_sq": saved["exp_avg_sq"].to(p),
            }


def warmup_lr(lr: float, step: int, warmup: int) -> float:
    """The learning rate of optimizer step ``step`` (1-based): linear warm-up from lr / warmup to lr
    over the first ``warmup`` steps, then constant; ``warmup`` 0 is the constant lr itself."""
    return lr if step >= warmup else lr * step / warmup
