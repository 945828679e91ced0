"""A positional bias added to a Llama-family model's attention logits at inference: the blog's fitted table
and Found-in-the-Middle's calibration (Hsieh et al. 2024), put on and taken off a loaded Hugging Face model
without editing transformers (docs/positional_bias.md has the forms, the recipes and the costs).

Entry points:

    PositionalBias(layers, max_length, ...)   the bias B_l(i, j) = f_l(i - j) + g_l(j) of query i, key j in
        layer l, f and g piecewise linear in log(1 + x) between log-spaced knots (parameters: their values
        at the knots, per layer or shared); zero parameters: B = 0
    applied(model, bias) / apply(model, bias).remove()    B added to every layer's attention logits for the
        block / until removed (a forward pre-hook on each attention module that hands it an additive float
        mask: the causal mask, or the model's own mask, plus B); the model's logits are the same, bit for
        bit, with a zero bias and after removal
    fit_flat(arch, contexts, ...)   the blog's recipe: B chosen so that the task-free influence profile on
        the fitting contexts is flat (``flatness``), with restarts and a convergence trace
    calibrate(arch, contexts, strength)   Found-in-the-Middle's calibration: the attention bias measured on
        content-free (``shuffled``) contexts, subtracted at inference, ``strength`` its one hyperparameter

Example (a tiny random Llama; the real use loads SmolLM2 with ``models.load_pretrained``):

    >>> import torch
    >>> from transformers import LlamaConfig, AutoModelForCausalLM
    >>> from lostmid.architectures import models, positional_bias as pb
    >>> config = LlamaConfig(hidden_size=16, intermediate_size=32, num_hidden_layers=2, num_attention_heads=4,
    ...                      num_key_value_heads=2, max_position_embeddings=64, vocab_size=50)
    >>> _ = torch.manual_seed(0)
    >>> arch = models.Arch("llama", "rope", AutoModelForCausalLM.from_config(config, attn_implementation="sdpa").eval())
    >>> contexts = torch.randint(0, 50, (4, 32), generator=torch.Generator().manual_seed(1))
    >>> before = arch.model(contexts[:1]).logits
    >>> fit = pb.fit_flat(arch, contexts[:2], steps=3, restarts=1)
    >>> with pb.applied(arch.model, fit.bias):
    ...     changed = arch.model(contexts[:1]).logits
    >>> bool(torch.equal(arch.model(contexts[:1]).logits, before)), bool(torch.equal(changed, before))
    (True, False)
    >>> calibration = pb.calibrate(arch, pb.shuffled(contexts[2:], seed=0), strength=0.5)
    >>> handle = pb.apply(arch.model, calibration)
    >>> handle.remove()
    >>> bool(torch.equal(arch.model(contexts[:1]).logits, before))
    True
"""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import nn
from torch.nn.attention import SDPBackend, sdpa_kernel

from lostmid.architectures import measure, models
from lostmid.errors import ConfigError

log = logging.getLogger(__name__)

FORMS = ("distance", "key")  # B as a function of the distance i - j, and of the key position j


def knots(max_length: int, buckets: int) -> torch.Tensor:
    """``buckets`` knots in log(1 + x) for x in 0 .. max_length - 1: x = 0 and ``buckets`` - 1 log-spaced
    x from 1 to max_length - 1 (fine near 0, where attention changes fastest, coarse far away)."""
    if buckets < 2:
        raise ConfigError(f"positional bias: {buckets} buckets; at least 2 (the value at 0 and at max_length)")
    spaced = np.geomspace(1, max(max_length - 1, 2), buckets - 1)
    return torch.from_numpy(np.log1p(np.concatenate([[0.0], spaced])))


def interpolate(values: torch.Tensor, grid: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """The piecewise-linear function through (grid_k, values_k) at log(1 + x), constant beyond the last knot;
    linear in ``values`` (K, ...) (so the gradient flows to them); shape x.shape + values.shape[1:]."""
    u = torch.log1p(x.to(grid.dtype)).clamp(max=float(grid[-1]))
    right = torch.searchsorted(grid, u).clamp(1, len(grid) - 1)
    left = right - 1
    weight = ((u - grid[left]) / (grid[right] - grid[left])).to(values.dtype)
    weight = weight.reshape(weight.shape + (1,) * (values.dim() - 1))  # values (K, ...): a function per column
    return values[left] * (1 - weight) + values[right] * weight


class PositionalBias(nn.Module):
    """B_l(i, j) = f_l(i - j) + g_l(j) (``forms``: which of f, g), each piecewise linear in log(1 + x) between
    ``buckets`` knots (``knots``); parameters ``distance`` and ``key`` (rows, buckets), one row per layer
    (``per_layer``) or one shared. Zero parameters: B = 0 everywhere."""

    def __init__(self, layers: int, max_length: int, buckets: int = 12, per_layer: bool = True, forms=FORMS):
        super().__init__()
        bad = sorted(set(forms) - set(FORMS))
        if bad or not forms:
            raise ConfigError(f"positional bias: forms {list(forms)}; give some of {', '.join(FORMS)}")
        self.layers, self.per_layer, self.forms = layers, per_layer, tuple(forms)
        self.register_buffer("grid", knots(max_length, buckets))
        rows = layers if per_layer else 1
        for form in FORMS:
            setattr(self, form, nn.Parameter(torch.zeros(rows, buckets)) if form in forms else None)

    def forward(self, layer: int, queries: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
        """B_layer (len(queries), len(keys)) at the absolute query and key positions (0 where j > i: the
        causal mask removes those)."""
        row = layer if self.per_layer else 0
        bias = torch.zeros((), dtype=next(self.parameters()).dtype, device=queries.device)
        if self.distance is not None:  # f at every distance once, then looked up: one gather over the (q, kv) grid
            table = interpolate(self.distance[row], self.grid, torch.arange(int(queries.max()) + 1, device=keys.device))
            bias = bias + table[(queries[:, None] - keys[None]).clamp(min=0)]
        if self.key is not None:
            bias = bias + interpolate(self.key[row], self.grid, keys)[None]
        return bias.expand(len(queries), len(keys))

    def causal(self, layer: int, past: int, q: int) -> torch.Tensor:
        """B_layer (q, past + q) at the queries past .. past + q - 1 and every key, -inf where j > i: the same
        values as ``forward`` with the causal mask applied, without its (q, k) grid of distances. f at each
        distance is laid out once along a vector and read as a (q, k) strided view of it (row i's distances
        past + i, .., 0, then beyond the query -inf), then g(j) is added: two passes over the grid, not seven
        (at n = 4096 the grid is 16.8 M pairs a layer, and building it dominated a biased forward pass)."""
        row = layer if self.per_layer else 0
        keys = past + q
        parameter = next(self.parameters())
        line = torch.full((q + keys - 1,), float("-inf"), dtype=parameter.dtype, device=parameter.device)
        # line[s] = f(past + q - 1 - s): row i of the view, taken bottom up (q - 1 - i), starts at s = q - 1 - i
        distances = torch.arange(keys - 1, -1, -1, device=parameter.device)
        line[:keys] = 0.0 if self.distance is None else interpolate(self.distance[row], self.grid, distances)
        bias = line.as_strided((q, keys), (1, 1)).flip(0)
        if self.key is not None:
            bias = bias + interpolate(self.key[row], self.grid, torch.arange(keys, device=parameter.device))[None]
        return bias

    def basis(self, queries: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
        """(len(queries), len(keys), parameters per row): B of one layer is this times its parameters,
        ``distance`` then ``key`` (B is linear in them; ``calibrate`` solves for them)."""
        eye = torch.eye(self.grid.numel(), dtype=self.grid.dtype, device=queries.device)
        columns = []
        if self.distance is not None:
            columns.append(interpolate(eye, self.grid, (queries[:, None] - keys[None]).clamp(min=0)))
        if self.key is not None:
            columns.append(interpolate(eye, self.grid, keys)[None].expand(len(queries), -1, -1))
        return torch.cat(columns, -1)


def attention_modules(model) -> list:
    """Every decoder layer's attention module of a Llama-family Hugging Face model, input side first."""
    layers = getattr(getattr(model, "model", model), "layers", None)
    if layers is None or not all(hasattr(layer, "self_attn") for layer in layers):
        raise ConfigError(
            f"positional bias: {type(model).__name__} has no model.layers[*].self_attn; a Llama-family model needed"
        )
    return [layer.self_attn for layer in layers]


def biased_mask(bias: PositionalBias, layer: int, hidden: torch.Tensor, mask, past: int) -> torch.Tensor:
    """The additive float mask (batch or 1, 1, q, past + q) of one layer: the model's own ``mask`` (None:
    causal; boolean: True where attended; float: added) plus B at the query positions past .. past + q - 1."""
    q = hidden.shape[1]
    if not torch.is_grad_enabled() and (mask is None or (mask.dtype == torch.bool and mask.shape[-1] == past + q)):
        # no gradient (retrieval): the causal layout, the same values in two passes; a pass with gradients keeps the
        # differentiable grid below, so that a fit's and a profile's gradients are what they were
        causal = bias.causal(layer, past, q).to(hidden.dtype)
        return causal[None, None] if mask is None else causal.masked_fill(~mask, float("-inf"))
    queries = torch.arange(past, past + q, device=hidden.device)
    keys = torch.arange(past + q if mask is None else mask.shape[-1], device=hidden.device)
    added = bias(layer, queries, keys).to(hidden.dtype)
    if mask is None:
        return added.masked_fill(keys[None] > queries[:, None], float("-inf"))[None, None]
    if mask.dtype == torch.bool:
        return added.masked_fill(~mask, float("-inf"))
    return mask + added


@dataclass
class Handle:
    """The hooks that add a bias to a model's attention; ``remove`` takes them off (the model as it was)."""

    hooks: list = field(default_factory=list)

    def remove(self) -> None:
        for hook in self.hooks:
            hook.remove()
        self.hooks.clear()


def apply(model, bias: PositionalBias) -> Handle:
    """Add ``bias`` to the attention logits of every layer of ``model`` (a Hugging Face Llama-family model or
    an ``Arch``) until the returned handle's ``remove``. Each attention module gets a forward pre-hook that
    replaces its ``attention_mask`` argument by ``biased_mask``: the sdpa and eager attention functions add a
    float mask to the logits before the softmax. Works with a key-value cache (queries at their absolute
    positions). A bias shared by the layers, in a pass without gradients, is built once per forward pass and handed
    to every layer (a pre-hook on the decoder clears it); with gradients each layer builds its own, so that a fit's
    gradients are what they were."""
    model = model.model if isinstance(model, models.Arch) else model
    modules = attention_modules(model)
    if bias.per_layer and bias.layers != len(modules):
        raise ConfigError(f"positional bias: fitted for {bias.layers} layers, the model has {len(modules)}")

    built = {}  # this forward pass's mask of a shared bias, by the layer's query offset

    def hook_of(layer: int):
        def hook(module, args, kwargs):
            hidden = kwargs["hidden_states"] if "hidden_states" in kwargs else args[0]
            cache = kwargs.get("past_key_values")
            past = cache.get_seq_length(layer) if cache is not None else 0
            mask = kwargs.get("attention_mask")
            if bias.per_layer or torch.is_grad_enabled():
                kwargs["attention_mask"] = biased_mask(bias, layer, hidden, mask, past)
            else:
                if past not in built:
                    built[past] = biased_mask(bias, layer, hidden, mask, past)
                kwargs["attention_mask"] = built[past]
            return args, kwargs

        return hook

    decoder = getattr(model, "model", model)  # the layers' parent: every pass (and a gradient's base pass) enters it
    hooks = [decoder.register_forward_pre_hook(lambda module, args: built.clear())]
    return Handle(hooks + [m.register_forward_pre_hook(hook_of(k), with_kwargs=True) for k, m in enumerate(modules)])


@contextlib.contextmanager
def applied(model, bias: PositionalBias):
    """``bias`` on ``model``'s attention logits for the block (``apply``), taken off after it, error or not."""
    handle = apply(model, bias)
    try:
        yield model
    finally:
        handle.remove()


@contextlib.contextmanager
def attention_implementation(model, name: str):
    """The model's attention run by ``name`` (eager: weights returned) for the block, restored after."""
    before = model.config._attn_implementation
    model.set_attn_implementation(name)
    try:
        yield model
    finally:
        model.set_attn_implementation(before)


def gradient_norms(arch: models.Arch, context: torch.Tensor, create_graph: bool = False) -> torch.Tensor:
    """||g_j|| for j = 0 .. m-1 of one context (m,): g_j the gradient of the ``top1`` target at its last
    position with respect to token j's input embedding (the task-free influence of ``retrieval``'s ``bare``
    share, whose shares are these norms over their sum). ``create_graph``: differentiable in whatever the
    forward pass depends on besides the frozen weights (a bias's parameters)."""
    base, head, embedding = arch.model.base_model, arch.model.get_output_embeddings(), arch.model.get_input_embeddings()
    with models.frozen(arch.model), torch.enable_grad():
        x = embedding(context[None]).detach().requires_grad_(True)  # (1, m, d)
        hidden = base(inputs_embeds=x, use_cache=False).last_hidden_state
        (g,) = torch.autograd.grad(measure.target_sum("top1", head(hidden[:, -1])), x, create_graph=create_graph)
    return g[0].norm(dim=-1)


def flatness(norms: torch.Tensor, first: int = 1) -> torch.Tensor:
    """The variance over positions first .. m-2 of log ||g_j||: 0 for a flat profile. The log's variance is
    the variance of the log share (the shares are the norms over their sum), so it does not depend on the
    target's scale; it weighs a tenfold deficit in the middle like a tenfold excess at the ends (the U is
    multiplicative), where a squared share would be ruled by the few largest positions. Position 0 (BOS, the
    attention sink: ``first``) and the last position (the target's own token, reached through the residual
    stream, which no attention bias changes) are left out."""
    return norms[first:-1].log().var()


def profile_flatness(arch: models.Arch, contexts: torch.Tensor, bias: PositionalBias | None = None, first: int = 1):
    """The mean ``flatness`` over ``contexts`` (W, m) of the model, with ``bias`` applied (None: as it is)."""
    with applied(arch.model, bias) if bias is not None else contextlib.nullcontext():
        return float(np.mean([float(flatness(gradient_norms(arch, c), first)) for c in contexts]))


@dataclass
class Fit:
    """A fitted bias, its fitting loss (mean ``flatness`` over the fitting contexts), the loss with no bias,
    and the trace: one (restart, step, loss) a step; the best restart's bias is kept."""

    bias: PositionalBias
    loss: float
    none: float
    trace: list


def fit_flat(
    arch: models.Arch,
    contexts: torch.Tensor,
    *,
    buckets: int = 8,
    per_layer: bool = False,
    forms=FORMS,
    steps: int = 50,
    restarts: int = 3,
    lr: float = 0.1,
    scale: float = 0.5,
    first: int = 1,
    seed: int = 0,
) -> Fit:
    """The blog's recipe: B (``PositionalBias``) chosen so that the task-free influence profile of the model
    on the fitting ``contexts`` (W, m) is flat, by Adam on the mean ``flatness`` over them.

    The loss is the variance of log ||g_j||, g_j an input gradient, so its gradient with respect to B is a
    gradient of a gradient: double backward through the model (exact, about three times a backward pass;
    ``gradient_norms`` with ``create_graph``; sdpa's math kernel, since the fused ones on a GPU have no double
    backward), not a surrogate: the influence that is flattened is the one the
    retrieval record reports. Restart 0 starts from B = 0, the others from N(0, ``scale``^2) parameters drawn
    with (``seed``, restart); each runs ``steps`` full-batch steps and the restart with the lowest final loss
    is kept (its parameters at their best step). Nothing is fitted where the loss does not fall below none's:
    the zero bias is returned then. Each step accumulates the gradient context by context, so memory is one
    context's double backward (about 9 GB for SmolLM2 at n = 1024: runs/fix_plan/cost.yaml), whatever W."""
    model = arch.model
    m = contexts.shape[1]
    none = profile_flatness(arch, contexts, first=first)
    best, trace = None, []
    for restart in range(restarts):
        bias = PositionalBias(len(attention_modules(model)), m, buckets, per_layer, forms).to(contexts.device)
        if restart:
            generator = torch.Generator().manual_seed(seed * 1000 + restart)
            with torch.no_grad():
                for p in bias.parameters():
                    p.copy_(torch.randn(p.shape, generator=generator, dtype=p.dtype) * scale)
        optimizer = torch.optim.Adam(bias.parameters(), lr=lr)
        with applied(model, bias), sdpa_kernel(SDPBackend.MATH):  # the fused kernels have no double backward
            for step in range(steps):
                optimizer.zero_grad()
                value = 0.0
                for c in contexts:  # the mean's gradient, one context's double-backward graph held at a time
                    loss = flatness(gradient_norms(arch, c, create_graph=True), first) / len(contexts)
                    loss.backward()
                    value += float(loss.detach())
                trace.append((restart, step, value))
                log.info(
                    "fit: restart %d of %d, step %d of %d, flatness %.4g", restart + 1, restarts, step + 1, steps, value
                )
                if best is None or value < best[0]:
                    best = (value, {k: v.detach().clone() for k, v in bias.state_dict().items()})
                optimizer.step()
    kept = PositionalBias(len(attention_modules(model)), m, buckets, per_layer, forms).to(contexts.device)
    if best[0] < none:
        kept.load_state_dict(best[1])
    return Fit(kept, min(best[0], none), none, trace)


def shuffled(contexts: torch.Tensor, seed: int, lead: int = 1) -> torch.Tensor:
    """Content-free contexts: each context's tokens after the first ``lead`` (BOS) in a random order drawn with
    (``seed``, row), so that the words stay and their sense goes (the calibration's dummy text)."""
    out = contexts.clone()
    for row in range(len(out)):
        order = torch.from_numpy(np.random.default_rng([seed, row]).permutation(out.shape[1] - lead))
        out[row, lead:] = contexts[row, lead:][order.to(contexts.device)]
    return out


def attention_maps(arch: models.Arch, contexts: torch.Tensor) -> torch.Tensor:
    """(layers, m, m): each layer's attention weights averaged over heads and ``contexts`` (W, m), no bias."""
    with torch.no_grad(), attention_implementation(arch.model, "eager"):
        total = 0
        for context in contexts:
            weights = arch.model(context[None], output_attentions=True, use_cache=False).attentions
            total = total + torch.stack([w[0].double().mean(0) for w in weights])
    return total / len(contexts)


def calibrate(
    arch: models.Arch,
    contexts: torch.Tensor,
    strength: float = 1.0,
    *,
    buckets: int = 12,
    rows: int = 256,
) -> PositionalBias:
    """Found-in-the-Middle's calibration (Hsieh et al. 2024) as a ``PositionalBias``: the model's positional
    attention bias measured on content-free ``contexts`` (W, m) (``shuffled`` windows; the paper's dummy
    documents) and subtracted from its attention at inference, ``strength`` (t) its one hyperparameter.

    The measured bias of layer l is A_l(i, j), the attention of query i on key j averaged over heads and
    contexts (``attention_maps``); the calibration adds -t log A_l(i, j) to the logits, which with t = 1
    makes the content-free attention uniform over each query's keys (the bias subtracted) and leaves the
    relevance, what the attention to a key has beyond its position, as it was. It is stored in the
    ``PositionalBias`` form, f_l(i - j) + g_l(j) per layer, by least squares over the causal triangle (``rows``
    query rows, evenly spaced, each row's mean removed: softmax ignores a constant per query), so that it
    applies at any length up to m and costs what the fitted bias costs.

    Where it departs from the paper: the paper subtracts the dummy document's attention in probability space
    and rescales the documents' attention of the generated token with a temperature; here the bias is
    subtracted in logit space (log A, so that a mask can carry it) for every query, not only the answer's,
    over token positions rather than documents, in every layer (the paper: the last 16 of 32)."""
    maps = attention_maps(arch, contexts)  # (L, m, m)
    m = maps.shape[-1]
    bias = PositionalBias(maps.shape[0], m, buckets, per_layer=True).to(contexts.device)
    queries = torch.unique(torch.linspace(1, m - 1, min(rows, m - 1)).round().long()).to(contexts.device)
    keys = torch.arange(m, device=contexts.device)
    causal = (keys[None] <= queries[:, None]).double()  # (r, m)
    count = causal.sum(1, keepdim=True)
    design = bias.basis(queries, keys)  # (r, m, P)
    design = (design - (design * causal[..., None]).sum(1, keepdim=True) / count[..., None]) * causal[..., None]
    solved = []
    for layer in range(maps.shape[0]):
        target = -strength * maps[layer][queries].clamp(min=torch.finfo(torch.float64).tiny).log()
        target = (target - (target * causal).sum(1, keepdim=True) / count) * causal
        inside = causal.bool()
        solved.append(torch.linalg.lstsq(design[inside], target[inside][:, None], driver="gelsd").solution[:, 0])
    solved = torch.stack(solved)  # (L, P)
    with torch.no_grad():
        bias.distance.copy_(solved[:, : bias.grid.numel()])
        bias.key.copy_(solved[:, bias.grid.numel() :])
    return bias
