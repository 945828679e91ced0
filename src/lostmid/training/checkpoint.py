"""Training checkpoints: everything needed to continue a run exactly where it stopped.

A checkpoint holds the weights (with the fixed attention bias), the optimizer state, the
data generator's and torch's RNG states, the remedy objective's state, the step, the run spec,
the digests of the run's input files (``inputs``: the fitted attention bias it was initialized
with) and the fingerprint of both. Files are written atomically and read with
``weights_only=True``; a missing, corrupt or foreign checkpoint, one made from another input
file, or one whose stored step is not the step its file name (``step<N>.pt``) promises, is a
CheckpointError (naming the file, so that the command moves a damaged one aside).
"""

from __future__ import annotations

import hashlib
import json
import re
import warnings
from dataclasses import dataclass
from pathlib import Path

import torch

from lostmid import config as cfg
from lostmid import io
from lostmid.core.model import FlagTransformer, ModelConfig
from lostmid.core.optim import AdamW
from lostmid.errors import CheckpointError, InputError
from lostmid.objectives.registry import make_objective
from lostmid.objectives.task_loss import TaskObjective

FORMAT = "lostmid-checkpoint-v1"
REQUIRED = ("format", "step", "spec", "fingerprint", "model", "optimizer", "data_rng", "torch_rng", "objective")


def build_optimizer(params, train: dict) -> AdamW:
    """The run's AdamW over ``params`` (a model's parameters, or a seed batch's stacked ones)."""
    return AdamW(params, lr=train["lr"], betas=(train["beta1"], train["beta2"]), weight_decay=train["weight_decay"])


def data_seed(seed: int) -> int:
    """The training data stream's seed: distinct from the weight-init seed and from eval seeds."""
    return 1_000_003 * seed + 17


def tensor_sha256(tensor: torch.Tensor) -> str:
    """The digest of a tensor's values, shape and dtype (how a checkpoint records an input tensor)."""
    tensor = tensor.detach().cpu().contiguous()
    header = f"{tensor.dtype}{tuple(tensor.shape)}".encode()
    return hashlib.sha256(header + tensor.view(torch.uint8).numpy().tobytes()).hexdigest()


# The kind of input of a bias variant's runs: the fitted attention-logit bias it starts from.
ATTENTION_BIAS = "attention_bias"


@dataclass(frozen=True)
class RunInput:
    """A file a run's weights depend on beyond its spec (the fitted attention bias of a bias variant):
    ``kind`` names it in the checkpoint's ``inputs``, ``sha256`` is the digest of its tensor."""

    kind: str
    path: str
    sha256: str

    @property
    def label(self) -> str:
        return self.kind.replace("_", " ")


def attention_bias_input(path, L: int) -> tuple[torch.Tensor, RunInput]:
    """The fitted bias of ``path`` (read_attention_bias) and the input record a checkpoint keeps of it."""
    bias = read_attention_bias(path, L)
    return bias, RunInput(ATTENTION_BIAS, str(path), tensor_sha256(bias))


def run_inputs(attention_bias, L: int) -> list[RunInput]:
    """The input records a run's checkpoints must have been made from: the fitted bias file
    ``attention_bias`` (None: a run without input files)."""
    return [attention_bias_input(attention_bias, L)[1]] if attention_bias else []


def run_fingerprint(spec: dict, inputs: dict[str, str]) -> str:
    """The fingerprint of a run: its spec's (lostmid.config.fingerprint) and, when the run has input
    files, their digests with it (so a run without inputs keeps the fingerprint of its spec)."""
    return cfg.fingerprint({**spec, "inputs": inputs} if inputs else spec)


@dataclass
class TrainingState:
    spec: dict
    step: int
    model: FlagTransformer
    optimizer: AdamW
    data_generator: torch.Generator
    objective: TaskObjective
    inputs: dict  # kind -> sha256 of the run's input files (RunInput)

    @classmethod
    def initial(cls, spec: dict, device, attention_bias: torch.Tensor | None = None) -> TrainingState:
        """Step 0 of a run: weights drawn from the run's seed, a fresh optimizer and data stream; the
        digest of a fitted ``attention_bias`` is recorded among the run's inputs."""
        torch.manual_seed(spec["seed"])
        model = FlagTransformer(ModelConfig(**spec["model"]))
        inputs = {}
        if attention_bias is not None:
            try:
                model.set_attention_bias(attention_bias)
            except ValueError as err:  # a per-step B of another model's steps or heads
                raise InputError(f"run {spec['variant']} seed {spec['seed']}: {err}") from err
            inputs[ATTENTION_BIAS] = tensor_sha256(attention_bias)
        model.to(device)
        generator = torch.Generator().manual_seed(data_seed(spec["seed"]))
        return cls(
            spec, 0, model, build_optimizer(model.parameters(), spec["train"]), generator, make_objective(spec), inputs
        )

    def save(self, path) -> None:
        expected = path_step(path)
        if expected is not None and expected != self.step:
            raise CheckpointError(f"checkpoint {path} would hold step {self.step}, expected step {expected}")
        io.save_torch(
            {
                "format": FORMAT,
                "step": self.step,
                "spec": cfg.canonical_json(self.spec),
                "inputs": dict(self.inputs),
                "fingerprint": run_fingerprint(self.spec, self.inputs),
                "model": {k: v.detach().cpu() for k, v in self.model.state_dict().items()},
                "optimizer": self.optimizer.state_dict(),
                "data_rng": self.data_generator.get_state(),
                "torch_rng": torch.get_rng_state(),
                "objective": self.objective.state_dict(),
            },
            path,
        )

    @classmethod
    def load(cls, path, spec: dict | None, device, inputs: list[RunInput] | None = None) -> TrainingState:
        """Restore a run from ``path``; ``spec`` (if given) must be the checkpoint's run, ``inputs``
        (if given) the input files it was made from (read)."""
        raw = read(path, spec, inputs)
        spec = json.loads(raw["spec"])
        model = model_from_checkpoint(raw, device)
        optimizer = build_optimizer(model.parameters(), spec["train"])
        objective = make_objective(spec)
        try:
            if raw["optimizer"]:  # step-0 checkpoints of earlier versions saved none
                optimizer.load_state_dict(raw["optimizer"])
            objective.load_state_dict(raw["objective"])
            generator = torch.Generator()
            generator.set_state(raw["data_rng"])
            torch.set_rng_state(raw["torch_rng"])
        except (ValueError, RuntimeError, KeyError, TypeError) as err:
            raise CheckpointError(
                f"checkpoint {path} has an unusable optimizer, RNG or remedy state: {err}", path
            ) from err
        return cls(spec, int(raw["step"]), model, optimizer, generator, objective, dict(raw.get("inputs", {})))


_STEP_NAME = re.compile(r"step(\d+)\.pt")


def path_step(path) -> int | None:
    """The step a checkpoint path promises: N for ``.../step<N>.pt`` (the workflow's names), else None."""
    match = _STEP_NAME.fullmatch(Path(path).name)
    return int(match.group(1)) if match else None


def is_refused_pickle(err: Exception) -> bool:
    """torch's safe loader (weights_only=True) refused an object of the file."""
    return "Weights only load failed" in str(err)


# Sentences of torch's messages that advise loading the file unsafely (or allow-listing its
# classes): never passed on, the file may be a malicious pickle.
_UNSAFE_ADVICE = re.compile(r"weights_only|safe_globals|trust", re.I)


def load_error_cause(err: Exception, limit: int = 200) -> str:
    """Why torch.load failed, in one line: the exception type and the first sentence of torch's
    message, or for a refused pickle what the safe loader refused, without torch's advice to
    load it with ``weights_only=False``."""
    text = str(err)
    refused = re.search(r"WeightsUnpickler error:\s*(.+?)(?:\.\s|\n|$)", text, re.S) if is_refused_pickle(err) else None
    if refused:
        cause = refused.group(1).strip()
    else:
        lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
        sentences = re.split(r"(?<=\.)\s+", lines[0]) if lines else []
        cause = next((sentence.rstrip(".") for sentence in sentences if not _UNSAFE_ADVICE.search(sentence)), "")
    if _UNSAFE_ADVICE.search(cause):
        cause = ""
    if len(cause) > limit:
        cause = cause[:limit].rsplit(" ", 1)[0] + " ..."
    return f"{type(err).__name__}: {cause}" if cause else type(err).__name__


def is_torch_file(path) -> bool:
    """The file starts as torch.save writes a file, whole or truncated: a zip archive's first local header,
    or (torch's legacy format) a pickle's protocol opcode."""
    with open(path, "rb") as f:
        head = f.read(4)
    return head == b"PK\x03\x04" or head[:1] == b"\x80"


def _safe_load(path, error: type, name: str, unloadable):
    """``torch.load`` of ``path`` onto the CPU with the safe loader (``weights_only=True``), torch's
    loader warnings (pickle protocol, ...) silenced: the error says enough. A file that cannot be
    read is ``error("<name> cannot be read: ...")``, one that torch.save never wrote ``error("<name>
    is not a torch file ...", path)``; any other failure (torch raises many types for truncated or
    foreign files, or a pickle of anything but tensors) ``error(unloadable(err), path)``."""
    try:
        torch_file = is_torch_file(path)
        if torch_file:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                return torch.load(path, map_location="cpu", weights_only=True)
    except OSError as err:
        raise error(f"{name} cannot be read: {err.strerror or err}") from err
    except Exception as err:
        raise error(unloadable(err), path) from err
    raise error(f"{name} is not a torch file (neither a zip archive, as torch.save writes, nor a pickle)", path)


def _unloadable_checkpoint(path, err: Exception) -> str:
    if is_refused_pickle(err):
        return (
            f"{path} is not a lostmid checkpoint: it holds Python objects other than tensors, "
            f"which are never loaded ({load_error_cause(err)})"
        )
    return f"checkpoint {path} is corrupt or truncated ({load_error_cause(err)})"


def read(path, spec: dict | None = None, inputs: list[RunInput] | None = None) -> dict:
    """Load a checkpoint file safely and check its format, its step and, if given, its run spec and
    the input files it was made from (``inputs``: each one's digest must be the one it recorded).

    The step stored in the file must be the one its name promises (``step<N>.pt``): a checkpoint
    copied over another of the same run is refused, not read as the step it claims to be.
    """
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"checkpoint {path} does not exist")
    raw = _safe_load(path, CheckpointError, f"checkpoint {path}", lambda err: _unloadable_checkpoint(path, err))
    if not isinstance(raw, dict) or raw.get("format") != FORMAT:
        raise CheckpointError(f"{path} is not a lostmid checkpoint (expected format {FORMAT})", path)
    missing = [key for key in REQUIRED if key not in raw]
    if missing:
        raise CheckpointError(f"checkpoint {path} lacks {missing}: it is incomplete", path)
    recorded = raw.get("inputs", {})
    if spec is not None and raw["fingerprint"] != run_fingerprint(spec, recorded):
        diffs = cfg.spec_differences(spec, json.loads(raw["spec"]))
        raise CheckpointError(
            f"checkpoint {path} belongs to another run; it does not match the config: " + "; ".join(diffs), path
        )
    for needed in inputs or []:
        if recorded.get(needed.kind) != needed.sha256:
            made = (
                f"with {needed.label} sha256 {recorded[needed.kind][:12]}…"
                if needed.kind in recorded
                else f"without an {needed.label}"
            )
            raise CheckpointError(
                f"checkpoint {path} was made {made} but {needed.path} has {needed.sha256[:12]}…", path
            )
    expected = path_step(path)
    if expected is not None and int(raw["step"]) != expected:
        raise CheckpointError(f"checkpoint {path} holds step {int(raw['step'])}, expected step {expected}", path)
    return raw


def read_attention_bias(path, L: int, per_step: bool = True) -> torch.Tensor:
    """A fitted attention-logit bias file, loaded safely (weights_only): an L x L float tensor, or with
    ``per_step`` one L x L table per attention step and head, (steps, heads, L, L) (the model that holds it
    checks its steps and heads: lostmid.core.model.attention_bias_shapes)."""
    bias = _safe_load(
        path,
        InputError,
        f"attention bias file {path}",
        lambda err: f"attention bias file {path} is not a tensor file ({load_error_cause(err)})",
    )
    dims = (2, 4) if per_step else (2,)
    if (
        not isinstance(bias, torch.Tensor)
        or bias.dim() not in dims
        or tuple(bias.shape[-2:]) != (L, L)
        or not bias.is_floating_point()
    ):
        found = (
            f"a {tuple(bias.shape)} {bias.dtype} tensor"
            if isinstance(bias, torch.Tensor)
            else f"a {type(bias).__name__}"
        )
        expected = f"{L}x{L}" + (f" or steps x heads x {L}x{L}" if per_step else "")
        raise InputError(f"attention bias file {path} holds {found}, expected a {expected} floating-point tensor", path)
    return bias


def model_from_checkpoint(raw: dict, device) -> FlagTransformer:
    spec = json.loads(raw["spec"])
    model = FlagTransformer(ModelConfig(**spec["model"]))
    try:
        model.load_state_dict(raw["model"])
    except RuntimeError as err:
        raise CheckpointError(f"checkpoint weights do not fit the model of its own spec: {err}") from err
    return model.to(device)


def load_model(path, spec: dict | None, device, inputs: list[RunInput] | None = None) -> tuple[FlagTransformer, int]:
    """The model of a checkpoint, in eval mode, and its step (for the analysis stages); ``inputs`` as in ``read``."""
    raw = read(path, spec, inputs)
    model = model_from_checkpoint(raw, device)
    model.eval()
    return model, int(raw["step"])


def analyze_run(paths, spec: dict, device, analyze, inputs: list[RunInput] | None = None) -> tuple:
    """Apply ``analyze(model, step)`` to every checkpoint of one run, loaded one at a time (each checked
    against ``spec`` and the ``inputs`` it must have been made from, as in ``read``).

    ``analyze`` returns a tuple of tables for its checkpoint; the result is each of those tables
    concatenated over the checkpoints, with the run's grid keys and the step as first columns.
    """
    import pandas as pd

    from lostmid.tables.keys import with_run_keys

    per_checkpoint = []
    for path in paths:
        model, step = load_model(path, spec, device, inputs)
        per_checkpoint.append([with_run_keys(table, spec, step) for table in analyze(model, step)])
    return tuple(pd.concat(parts, ignore_index=True) for parts in zip(*per_checkpoint))
