"""The structural baseline: uniform causal attention and identity maps, measured against its
closed form.

With every attention row uniform over the causal past (Cesaro averaging C) and the value and
output maps the identity, no LayerNorm and no MLP, one residual step is X_{k+1} = N X_k with
N = I + h C (or N = C without the residual path). The adjoint is then P_k = (N^{M-k})^T P_M, so
the input-influence density is known in closed form; the measured one (one backward pass
through the real model) must match it to float rounding.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from lostmid.analysis import metrics
from lostmid.analysis.influence import energies, profile_table
from lostmid.analysis.settings import StructuralSettings
from lostmid.core import task
from lostmid.tables.keys import with_keys


def structural_density(L: int, depth: int, residual: bool, epsilon: float = 1.0, layer: int = 0) -> np.ndarray:
    """Closed-form density of the structural baseline at residual state ``layer``.

    X_{k+1} = N X_k with N = I + h C (residual) or N = C, so P_k = (N^{M-k})^T P_M and, since the
    readout puts P_M at position L only, I^(k)(j) = ((N^{M-k})_{L,j})^2 E||P_M(L)||^2:
    m_j is proportional to ((N^{M-k})_{L,j})^2 whatever the batch and the readout weights.
    """
    N = np.eye(L) + epsilon * metrics.cesaro_matrix(L) if residual else metrics.cesaro_matrix(L)
    row = np.linalg.matrix_power(N, depth - layer)[L - 1]
    return metrics.normalize(row**2)


def structural_model(
    L: int, depth: int, residual: bool, epsilon: float = 1.0, d_model: int = 4, heads: int = 2, seed: int = 0
):
    """A FlagTransformer whose steps are exactly X_{k+1} = X_k + h C X_k (or C X_k): the structural baseline.

    Uniform attention (all logits zero: Cesaro averaging), value and output maps the identity,
    no LayerNorm, no MLP. Embeddings and the readout head keep their random init; they do not
    change the density (see ``structural_density``).
    """
    from lostmid.core.model import ModelConfig, model_at_init

    config = ModelConfig(
        seq_len=L,
        depth=depth,
        d_model=d_model,
        heads=heads,
        mlp_ratio=4,
        block="sequential",
        residual=residual,
        epsilon=epsilon,
        readout="last",
        attention="uniform",
        layernorm=False,
        mlp=False,
    )
    model = model_at_init(config, seed)
    eye = torch.eye(d_model)
    with torch.no_grad():
        for step in model.steps:
            step.attn.qkv.weight[2 * d_model :].copy_(eye)  # the V block of the fused q, k, v map
            step.attn.qkv.bias.zero_()
            step.attn.proj.weight.copy_(eye)
            step.attn.proj.bias.zero_()
    return model


def structural_baseline(settings: StructuralSettings) -> pd.DataFrame:
    """Measured (one backward pass through the model, float64) against closed-form densities.

    Columns: residual, L, depth, layer, position, p, measured, closed_form.
    """
    parts = []
    for residual in (True, False):
        for L in settings.L:
            tokens, targets, _ = task.stratified_eval_set(L, settings.batch_per_position, settings.seed)
            for depth in settings.depths:
                model = structural_model(
                    L, depth, residual, settings.epsilon, settings.d_model, settings.heads
                ).double()
                table = profile_table(energies(model, tokens, targets))
                table["closed_form"] = np.concatenate(
                    [structural_density(L, depth, residual, settings.epsilon, layer) for layer in range(depth + 1)]
                )
                table = table.drop(columns="energy").rename(columns={"density": "measured"})
                parts.append(with_keys(table, residual=residual, L=L, depth=depth))
    return pd.concat(parts, ignore_index=True)
