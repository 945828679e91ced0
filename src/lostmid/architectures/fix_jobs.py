"""Issue 55's fix run (study/fix_plan.yaml; docs/positional_bias.md, "The fix run"): the blog's bias fitted and
Found-in-the-Middle's calibration measured on the plan's reserved windows, the calibration's strength chosen on
them, and both fixes evaluated on the held-out windows, as the retrieval stage's block jobs: each window's
examples written to the run's record as soon as it is done, a stopped job resuming at the windows it lacks.
The plan's recipe, windows and files: ``fix_plan`` (torch-free, for the workflow).

    fit_blog(plan, device)               fits/blog.pt (the bias) and fits/blog.json (its windows, loss, trace)
    calibrate_fitm(plan, device)         fits/fitm.pt (the calibration at strength 1) and fits/fitm.json
    selection_block(plan, n, device)     the calibration at each strength of the grid on the selection windows
    choose_strength(plan)                fits/fitm_strength.json: the strength at each n, and the means it chose by
    none_check(plan, device)             fits/none_check.json: a zero bias gives the none record's answers
    fix_block(plan, arm, n, block, ...)  windows/<arm>_n<n>_w<k>.parquet of the held-out windows of one job
    gate_block(plan, n, device)          gate/n<n>_w<k>.parquet: each arm's profile flatness on the gate windows
                                         (and at the calibration's n, its content-free attention's distance
                                         from uniform)

The retrieval settings (model, corpus, draw, tasks, fractions, BOS, prefix reuse) are the none arm's record's
(``run.none_record``, its overlay), so that the fix arms' examples are that record's examples with a bias on.
Every file a job writes names the windows it came from: the draw's k and the corpus window's index.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from lostmid import io
from lostmid.architectures import bounded, models, text
from lostmid.architectures import positional_bias as pb
from lostmid.architectures.fix_plan import ARMS, block_draws, none_path, record, selection_path, window_path
from lostmid.architectures.retrieval import leading_ids, window_order
from lostmid.architectures.retrieval_jobs import recorded, window_examples
from lostmid.errors import ConfigError, InputError


def retrieval_settings(plan: dict):
    """The none arm's record's RetrievalSettings (its overlay, checked against its manifest)."""
    from lostmid.architectures.retrieval_record import record_settings

    return record_settings(Path(plan["run"]["none_record"]))


def loaded(settings, device):
    """(arch, tokenizer, token stream) of the none record's model and corpus, on ``device``."""
    key = "retrieval.model"
    arch, tokenizer = models.load_pretrained(models.model_source(settings.model, key), key=key)
    if tokenizer is None:
        raise ConfigError(f"config key {key}: the model has no tokenizer; the retrieval tasks are written as text")
    arch.model.to(device)
    return arch, tokenizer, text.corpus_ids(tokenizer, settings.corpus, "retrieval.corpus")


def corpus_windows(stream: np.ndarray, settings, n: int, draws) -> list[int]:
    """The corpus windows' indices of the draw's windows k = ``draws`` at n (``retrieval.window_order``)."""
    order = window_order(len(stream), n, settings.seed + n)
    if max(draws) >= len(order):
        raise ConfigError(f"fix plan: window {max(draws)} at n = {n}; the corpus holds {len(order)} there")
    return [int(order[k]) for k in draws]


def reserved_contexts(stream: np.ndarray, tokenizer, settings, n: int, draws) -> torch.Tensor:
    """(len(draws), n): BOS (``settings.bos``) then the first n - len(lead) tokens of each drawn window."""
    lead = torch.tensor(leading_ids(tokenizer, settings.bos), dtype=torch.long)
    rows = [torch.from_numpy(stream[i * n : (i + 1) * n]) for i in corpus_windows(stream, settings, n, draws)]
    return torch.stack([torch.cat([lead, row])[:n] for row in rows])


def save_bias(bias: pb.PositionalBias, path: Path) -> None:
    """The bias's form and parameters in one file (``load_bias`` reads it back)."""
    form = dict(
        layers=bias.layers,
        max_length=int(round(float(np.expm1(bias.grid[-1].item())))) + 1,
        buckets=bias.grid.numel(),
        per_layer=bias.per_layer,
        forms=list(bias.forms),
    )
    state = {k: v.detach().cpu() for k, v in bias.state_dict().items()}
    with io.atomic_path(path) as tmp:
        torch.save({"form": form, "state": state}, tmp)


def load_bias(path: Path, strength: float = 1.0) -> pb.PositionalBias:
    """The bias saved by ``save_bias``, its parameters times ``strength`` (the calibration is linear in it)."""
    saved = torch.load(path, weights_only=True)
    bias = pb.PositionalBias(**saved["form"])
    bias.load_state_dict(saved["state"])
    with torch.no_grad():
        for p in bias.parameters():
            p.mul_(strength)
    return bias


def sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def windows_record(stream, settings, n: int, draws) -> dict:
    return {"n": n, "draws": list(draws), "corpus_windows": corpus_windows(stream, settings, n, draws)}


def recorded_bias(plan: dict, arm: str, recipe: dict, device, make) -> Path:
    """fits/<arm>.pt and fits/<arm>.json: ``make(arch, tokenizer, settings, contexts)`` -> (bias, what its record
    says) on the recipe's windows (``reserved_contexts``), saved with the windows' draws and corpus indices and the
    bias file's SHA-256. A bias already recorded is kept (the record's; delete both files to make it again)."""
    out = record(plan) / "fits"
    if (out / f"{arm}.pt").exists() and (out / f"{arm}.json").exists():
        return out / f"{arm}.pt"
    settings = retrieval_settings(plan)
    arch, tokenizer, stream = loaded(settings, device)
    contexts = reserved_contexts(stream, tokenizer, settings, recipe["n"], recipe["windows"]).to(device)
    bias, said = make(arch, tokenizer, settings, contexts)
    save_bias(bias, out / f"{arm}.pt")
    summary = {
        "arm": arm,
        "plan": plan["path"],
        "windows": windows_record(stream, settings, recipe["n"], recipe["windows"]),
        **said,
        "bias_sha256": sha256(out / f"{arm}.pt"),
    }
    io.write_text(json.dumps(summary, indent=1) + "\n", out / f"{arm}.json")
    return out / f"{arm}.pt"


def fit_blog(plan: dict, device) -> Path:
    """The blog's bias (``positional_bias.fit_flat``) on the plan's fitting windows (``recorded_bias``): its record
    holds the loss, none's loss, whether B is not 0 and the trace."""
    fit = plan["arms"]["blog"]["fit"]

    def make(arch, tokenizer, settings, contexts):
        options = {k: fit[k] for k in ("buckets", "per_layer", "steps", "restarts", "lr", "scale", "seed")}
        found = pb.fit_flat(arch, contexts, forms=tuple(fit["forms"]), **options)
        fitted = any(bool(p.detach().abs().sum() > 0) for p in found.bias.parameters())  # B is not 0
        trace = [list(t) for t in found.trace]
        return found.bias, {"loss": found.loss, "none": found.none, "fitted": fitted, "trace": trace}

    return recorded_bias(plan, "blog", fit, device, make)


def calibrate_fitm(plan: dict, device) -> Path:
    """Found-in-the-Middle's calibration (``positional_bias.calibrate``, strength 1) on the plan's calibration
    windows shuffled (``recorded_bias``); a strength t is applied as the parameters times t."""
    calibration = plan["arms"]["fitm"]["calibration"]

    def make(arch, tokenizer, settings, contexts):
        dummy = pb.shuffled(contexts, calibration["shuffle_seed"], lead=len(leading_ids(tokenizer, settings.bos)))
        bias = pb.calibrate(arch, dummy, 1.0, buckets=calibration["buckets"], rows=calibration["rows"])
        return bias, {"strength": 1.0}

    return recorded_bias(plan, "fitm", calibration, device, make)


def window_hash(settings, arm: str, bias_file: Path, strength: float) -> str:
    """The stamp of a fix window's rows: the retrieval settings' hash, the arm, its bias file and strength."""
    chosen = [settings.record_hash(), arm, sha256(bias_file), strength]
    return hashlib.sha256(json.dumps(chosen).encode()).hexdigest()[:12]


def biased_windows(arch, tokenizer, stream, settings, n: int, draws, bias, stamp: str, paths, weights: str) -> None:
    """Each drawn window's examples with ``bias`` on, stamped, written to its path, unless recorded; rows as the
    none record's (model named as there, ``weights`` the arm)."""
    missing = [(k, path) for k, path in zip(draws, paths) if not recorded(path, stamp)]
    with pb.applied(arch.model, bias.to(next(arch.model.parameters()).device)):
        for k, path in missing:
            examples = window_examples(arch, tokenizer, settings, stream, n, k, weights, k + 1, 0)  # no share
            io.write_parquet(examples.assign(draw=k, config_hash=stamp), path)


def selection_block(plan: dict, n: int, device) -> list[Path]:
    """The calibration at every strength of the plan's grid on the selection windows at n (retrieval examples,
    one file per (strength, window); resumable)."""
    calibration = plan["arms"]["fitm"]["calibration"]
    draws = calibration["selection_windows"][n]
    settings = retrieval_settings(plan)
    bias_file = record(plan) / "fits" / "fitm.pt"
    arch, tokenizer, stream = loaded(settings, device)
    paths = []
    for strength in calibration["grid"]:
        chosen = [selection_path(plan, n, strength, k) for k in draws]
        stamp = window_hash(settings, "fitm", bias_file, strength)
        bias = load_bias(bias_file, strength)
        biased_windows(arch, tokenizer, stream, settings, n, draws, bias, stamp, chosen, f"fitm_t{strength:g}")
        paths += chosen
    return paths


def choose_strength(plan: dict) -> Path:
    """fits/fitm_strength.json: {n: the strength with the highest mean log p(answer) over the selection windows
    (ties: the smaller)}, and each strength's mean."""
    calibration = plan["arms"]["fitm"]["calibration"]
    chosen, means = {}, {}
    for n, draws in calibration["selection_windows"].items():
        means[n] = {}
        for strength in calibration["grid"]:
            rows = pd.concat([pd.read_parquet(selection_path(plan, n, strength, k)) for k in draws])
            means[n][strength] = float(rows.logprob.mean())
        best = max(means[n].values())
        chosen[n] = min(t for t, m in means[n].items() if m == best)
    found = {"strength": chosen, "mean_logprob": means, "plan": plan["path"]}
    io.write_text(json.dumps(found, indent=1) + "\n", record(plan) / "fits" / "fitm_strength.json")
    return record(plan) / "fits" / "fitm_strength.json"


def arm_bias(plan: dict, arm: str, n: int) -> tuple[Path, float]:
    """(the arm's bias file, its strength at n): blog at 1; fitm at the strength chosen at n."""
    fits = record(plan) / "fits"
    if arm == "blog":
        return fits / "blog.pt", 1.0
    if arm == "fitm":
        strengths = json.loads((fits / "fitm_strength.json").read_text())["strength"]
        return fits / "fitm.pt", float(strengths[str(n)])
    raise ConfigError(f"fix: unknown arm {arm!r} (the fix arms: {', '.join(ARMS)})")


def fix_block(plan: dict, arm: str, n: int, block: int, size: int, device) -> list[Path]:
    """The held-out windows of one job of a fix arm at n, each written as soon as it is done; those recorded are
    skipped (a window recorded under another bias or strength is one line, never overwritten)."""
    draws = block_draws(plan, n, block, size)
    settings = retrieval_settings(plan)
    bias_file, strength = arm_bias(plan, arm, n)
    stamp = window_hash(settings, arm, bias_file, strength)
    paths = [window_path(plan, arm, n, k) for k in draws]
    if all(recorded(path, stamp) for path in paths):
        return paths
    arch, tokenizer, stream = loaded(settings, device)
    biased_windows(arch, tokenizer, stream, settings, n, draws, load_bias(bias_file, strength), stamp, paths, arm)
    return paths


def none_check(plan: dict, device, k: int = 0) -> Path:
    """The fix run's evaluation with a zero bias of the blog's form on held-out window k at the plan's first n gives
    the none record's answers there (success equal, log p within 1e-4): fits/none_check.json; one line otherwise
    (the fix arms' windows would not be paired with the none arm's)."""
    settings = retrieval_settings(plan)
    n, fit = min(plan["run"]["windows_by_n"]), plan["arms"]["blog"]["fit"]
    arch, tokenizer, stream = loaded(settings, device)
    layers = len(pb.attention_modules(arch.model))
    zero = pb.PositionalBias(layers, fit["n"], fit["buckets"], fit["per_layer"], tuple(fit["forms"]))
    path = record(plan) / "fits" / f"none_check_n{n}_w{k}.parquet"
    biased_windows(arch, tokenizer, stream, settings, n, [k], zero, settings.record_hash(), [path], "zero")
    mine, theirs = (pd.read_parquet(p).sort_values(["task", "q"]) for p in (path, none_path(plan, n, k)))
    gap = float(np.abs(mine.logprob.to_numpy() - theirs.logprob.to_numpy()).max())
    same = bool((mine.success.to_numpy() == theirs.success.to_numpy()).all() and gap <= 1e-4)
    found = {"n": n, "draw": k, "same": same, "max_logprob_gap": gap, "none_record": str(none_path(plan, n, k))}
    if not same:
        raise InputError(f"fix: a zero bias does not give {none_path(plan, n, k)}'s answers (log p gap {gap:.2g})")
    io.write_text(json.dumps(found, indent=1) + "\n", record(plan) / "fits" / "none_check.json")
    return record(plan) / "fits" / "none_check.json"


def content_free_distance(maps: torch.Tensor, rows: int) -> float:
    """The mean over layers and ``rows`` evenly spaced query rows of the total variation distance between a row of
    head-averaged attention (``positional_bias.attention_maps``: (layers, m, m)) and the uniform over its keys."""
    m = maps.shape[-1]
    queries = torch.unique(torch.linspace(1, m - 1, min(rows, m - 1)).round().long())
    keys = torch.arange(m)
    causal = (keys[None] <= queries[:, None]).double()
    uniform = causal / causal.sum(1, keepdim=True)
    return float((0.5 * (maps[:, queries].double() - uniform).abs().mul(causal).sum(-1)).mean())


def gate_path(plan: dict, n: int, k: int) -> Path:
    return record(plan) / "gate" / f"n{n}_w{k}.parquet"


def gate_block(plan: dict, n: int, device) -> list[Path]:
    """The gates' readings on the plan's gate windows at n (the first held-out windows), one file per window
    (resumable): the flatness (``positional_bias.flatness``) of the task-free profile of BOS + the window's first
    n - 1 tokens under each arm (layers recomputed from ``checkpoint_from``), and at the calibration's n the
    content-free attention's distance from uniform (``content_free_distance``) of the window shuffled, without and
    with the calibration."""
    gates, calibration = plan["run"]["gates"], plan["arms"]["fitm"]["calibration"]
    draws = range(gates["windows_by_n"][n])
    paths = [gate_path(plan, n, k) for k in draws]
    missing = [(k, path) for k, path in zip(draws, paths) if not path.exists()]
    if not missing:
        return paths
    settings = retrieval_settings(plan)
    arch, tokenizer, stream = loaded(settings, device)
    biases = {"none": None, **{arm: load_bias(*arm_bias(plan, arm, n)).to(device) for arm in ARMS}}
    layers = [layer for layer, _ in models.layers(arch)] if n >= settings.checkpoint_from else []
    lead = len(leading_ids(tokenizer, settings.bos))
    for k, path in missing:
        context = reserved_contexts(stream, tokenizer, settings, n, [k]).to(device)
        rows = []
        for arm, bias in biases.items():
            with pb.applied(arch.model, bias) if bias is not None else contextlib.nullcontext():
                with bounded.checkpointed(layers):
                    flatness = float(pb.flatness(pb.gradient_norms(arch, context[0])))
                distance = np.nan
                if n == calibration["n"] and arm != "blog":
                    dummy = pb.shuffled(context, gates["shuffle_seed"], lead=lead)
                    distance = content_free_distance(pb.attention_maps(arch, dummy).cpu(), calibration["rows"])
            rows.append({"arm": arm, "n": n, "draw": k, "flatness": flatness, "content_free_distance": distance})
        io.write_parquet(pd.DataFrame(rows).assign(window=corpus_windows(stream, settings, n, [k])[0]), path)
    return paths
