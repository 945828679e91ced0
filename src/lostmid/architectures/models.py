"""Hugging Face causal LMs built from configuration keyword arguments, or loaded from a local folder.

Families and the positional encodings each allows:

    gpt2    learned (absolute position table ``wpe``) | none
    llama   rope | none
    qwen2   rope | none

``none`` (NoPE) is implemented without touching the attention code:

* GPT-2: the position table is set to zero and frozen (``requires_grad = False``), so the
  model adds 0 to every input embedding.
* Llama / Qwen2: the model's rotary module is replaced by ``IdentityRotary``, which returns
  cos = 1 and sin = 0 for every position; ``q cos + rotate_half(q) sin = q``, so the rotation is
  the identity and attention sees no position except through the causal mask.

Random models are built after ``torch.manual_seed(seed)``, so a (family, encoding, depth,
width, seed) names one set of weights. Attention is ``eager`` so that the attention modules
return their weights (the sdpa path returns none). The library never downloads anything:
``HF_HUB_OFFLINE`` and ``TRANSFORMERS_OFFLINE`` are set before transformers is imported and
pretrained folders are read with ``local_files_only=True``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn as nn

from lostmid.errors import ConfigError

ENCODINGS = {"gpt2": ("learned", "none"), "llama": ("rope", "none"), "qwen2": ("rope", "none")}
FAMILIES = tuple(ENCODINGS)
PRETRAINED_ENCODINGS = ("native", "none")


def transformers():
    """The transformers module, imported with the hub switched off (no network, ever)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    import transformers as tf

    return tf


def check_family(family: str, encoding: str, key: str = "architectures.families") -> None:
    """ConfigError naming ``key`` unless ``family`` is known and allows ``encoding``."""
    if family not in ENCODINGS:
        raise ConfigError(f"config key {key}: unknown family {family!r} (known: {', '.join(FAMILIES)})")
    if encoding not in ENCODINGS[family]:
        raise ConfigError(f"config key {key}.{family}: encoding {encoding!r} is not available for {family} (allowed: {', '.join(ENCODINGS[family])})")


class IdentityRotary(nn.Module):
    """Drop-in for a Llama/Qwen2 rotary module that rotates by angle 0: cos = 1, sin = 0.

    ``forward(x, position_ids)`` returns (cos, sin), each (batch, n, head_dim), like the module it replaces.
    """

    def __init__(self, head_dim: int):
        super().__init__()
        self.head_dim = head_dim

    def forward(self, x, position_ids):
        shape = (*position_ids.shape, self.head_dim)  # (batch or 1, n, head_dim)
        return torch.ones(shape, dtype=x.dtype, device=x.device), torch.zeros(shape, dtype=x.dtype, device=x.device)


@dataclass
class Arch:
    """A causal LM and the names that identify it in the tables."""

    family: str
    encoding: str
    model: nn.Module  # a *ForCausalLM in eval mode

    @property
    def depth(self) -> int:
        return len(layers(self))

    @property
    def max_length(self) -> int:
        config = self.model.config
        return int(getattr(config, "n_positions", None) or config.max_position_embeddings)

    @property
    def vocab(self) -> int:
        return int(self.model.config.vocab_size)


def hf_config(family: str, depth: int, d_model: int, heads: int, vocab: int, max_length: int):
    """The transformers config of a ``family`` model: ``depth`` layers, width ``d_model``, MLP 4 d_model,
    ``heads`` attention heads (no grouped keys), no dropout, eager attention."""
    tf = transformers()
    if d_model % heads:
        raise ConfigError(f"config key architectures.d_model={d_model} is not divisible by architectures.heads={heads}")
    common = dict(vocab_size=vocab, bos_token_id=0, eos_token_id=0, attn_implementation="eager")
    if family == "gpt2":
        return tf.GPT2Config(n_embd=d_model, n_layer=depth, n_head=heads, n_inner=4 * d_model, n_positions=max_length,
                             resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, **common)
    cls = {"llama": tf.LlamaConfig, "qwen2": tf.Qwen2Config}[family]
    return cls(hidden_size=d_model, intermediate_size=4 * d_model, num_hidden_layers=depth, num_attention_heads=heads,
               num_key_value_heads=heads, max_position_embeddings=max_length, **common)


def remove_positions(arch: Arch) -> None:
    """Make ``arch`` position-free in place (NoPE, see the module docstring)."""
    model = arch.model
    if arch.family == "gpt2":
        with torch.no_grad():
            model.transformer.wpe.weight.zero_()
        model.transformer.wpe.weight.requires_grad_(False)
    else:
        config = model.config
        head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
        model.model.rotary_emb = IdentityRotary(head_dim)


def build(family: str, encoding: str, depth: int, d_model: int, heads: int, vocab: int, max_length: int, seed: int) -> Arch:
    """A randomly initialized ``family`` model (weights drawn after ``torch.manual_seed(seed)``), in eval mode."""
    check_family(family, encoding)
    tf = transformers()
    config = hf_config(family, depth, d_model, heads, vocab, max_length)
    torch.manual_seed(seed)
    model = tf.AutoModelForCausalLM.from_config(config, attn_implementation="eager")
    arch = Arch(family, encoding, model.eval())
    if encoding == "none":
        remove_positions(arch)
    return arch


def load_pretrained(path, encoding: str = "native", key: str = "architectures.pretrained") -> Arch:
    """The causal LM saved (``save_pretrained``) in the local folder ``path``, eager attention, eval mode.

    ``encoding``: ``native`` keeps the checkpoint's positions; ``none`` removes them as for random models.
    """
    if encoding not in PRETRAINED_ENCODINGS:
        raise ConfigError(f"config key {key}.encoding: {encoding!r} is not one of {', '.join(PRETRAINED_ENCODINGS)}")
    path = Path(path)
    if not (path / "config.json").is_file():
        raise ConfigError(f"config key {key}.path: {path} is not a folder with a config.json (a save_pretrained folder)")
    tf = transformers()
    model = tf.AutoModelForCausalLM.from_pretrained(path, local_files_only=True, attn_implementation="eager")
    family = model.config.model_type
    if family not in ENCODINGS:
        raise ConfigError(f"config key {key}.path: model type {family!r} of {path} is not supported (known: {', '.join(FAMILIES)})")
    native = ENCODINGS[family][0]
    arch = Arch(family, native if encoding == "native" else "none", model.eval())
    if encoding == "none":
        remove_positions(arch)
    return arch


def layers(arch: Arch) -> list[tuple[nn.Module, nn.Module]]:
    """(decoder layer, its self-attention module) for every layer, input side first."""
    model = arch.model
    if arch.family == "gpt2":
        return [(block, block.attn) for block in model.transformer.h]
    return [(layer, layer.self_attn) for layer in model.model.layers]
