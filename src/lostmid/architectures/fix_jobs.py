"""Issue 55's fix run (study/fix_plan.yaml; docs/positional_bias.md, "The fix run"): F fits of the blog's bias and
F calibrations of Found-in-the-Middle's, fit i on the plan's reserved window i alone (the fit a random draw), each
calibration's strength chosen on its own window, and both fixes evaluated on the held-out windows, window k under
fit k mod F, as the retrieval stage's block jobs: each window's examples written to the run's record as soon as
it is done, a stopped job resuming at the windows it lacks. The plan's recipe, fits, windows and files:
``fix_plan`` (torch-free, for the workflow).

    fit_blog(plan, fit, device)          fits/blog_<i>.pt (the bias) and fits/blog_<i>.json (its window, loss, trace)
    calibrate_fitm(plan, fit, device)    fits/fitm_<i>.pt (the calibration at strength 1) and fits/fitm_<i>.json
                                         (its window and its strength t_i, chosen on that window at the grid's
                                         strengths: selection/fitm_<i>_t<t>_n<n>_w<k>.parquet)
    none_check(plan, device)             fits/none_check.json: a zero bias gives the none record's answers
    fix_block(plan, arm, n, block, ...)  windows/<arm>_n<n>_w<k>.parquet of the held-out windows of one job, each
                                         under its own fit's bias
    gate_block(plan, n, device)          gate/n<n>_w<k>.parquet: each arm's profile flatness on the gate windows
                                         under the window's fit (and at the calibration's n, its content-free
                                         attention's distance from uniform)

The retrieval settings (model, corpus, draw, tasks, fractions, BOS, prefix reuse) are the none arm's record's
(``run.none_record``, its overlay), so that the fix arms' examples are that record's examples with a bias on.
Every file a job writes names the windows it came from: the draw's k and the corpus window's index.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from lostmid import io
from lostmid.architectures import bounded, models, text
from lostmid.architectures import positional_bias as pb
from lostmid.architectures.fix_plan import (
    ARMS,
    bias_path,
    block_draws,
    fit_of,
    fit_window,
    gate_windows,
    none_path,
    record,
    selection_path,
    window_path,
)
from lostmid.architectures.retrieval import leading_ids, window_order
from lostmid.architectures.retrieval_jobs import recorded, window_examples
from lostmid.errors import ConfigError, InputError

log = logging.getLogger(__name__)


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


def recorded_bias(plan: dict, arm: str, fit: int, recipe: dict, seed: int, device, make, then=None) -> Path:
    """fits/<arm>_<fit>.pt and .json: ``make(arch, tokenizer, settings, stream, context, seed)`` -> (bias, what its
    record says) on fit ``fit``'s reserved window (``reserved_contexts``), saved with the window's draw and corpus
    index, the seed, what ``then(path, arch, tokenizer, stream, settings)`` says once the bias is saved, and the
    bias file's SHA-256. A fit already recorded is kept (the record's; delete both files to make it again)."""
    path = bias_path(plan, arm, fit)
    if path.exists() and path.with_suffix(".json").exists():
        return path
    settings = retrieval_settings(plan)
    arch, tokenizer, stream = loaded(settings, device)
    draws = [fit_window(plan, fit)]
    context = reserved_contexts(stream, tokenizer, settings, recipe["n"], draws).to(device)
    bias, said = make(arch, tokenizer, settings, stream, context, seed)
    save_bias(bias, path)
    said |= then(path, arch, tokenizer, stream, settings) if then else {}
    summary = {
        "arm": arm,
        "fit": fit,
        "plan": plan["path"],
        "seed": seed,
        "windows": windows_record(stream, settings, recipe["n"], draws),
        **said,
        "bias_sha256": sha256(path),
    }
    io.write_text(json.dumps(summary, indent=1) + "\n", path.with_suffix(".json"))
    return path


def fit_by_recipe(arch, context: torch.Tensor, recipe: dict, seed: int, **changes) -> pb.Fit:
    """``positional_bias.fit_flat`` on ``context`` with the plan's blog recipe (form, knots, steps, restarts, lr,
    scale), any of them replaced by ``changes`` (the pilot's)."""
    options = {k: recipe[k] for k in ("buckets", "per_layer", "steps", "restarts", "lr", "scale")} | changes
    return pb.fit_flat(arch, context, forms=tuple(recipe["forms"]), seed=seed, **options)


def fit_blog(plan: dict, fit: int, device) -> Path:
    """The blog's bias fit ``fit`` (``positional_bias.fit_flat``, seed: the plan's + fit) on its one reserved
    window (``recorded_bias``): its record holds the loss, none's loss, whether B is not 0 and the trace."""
    recipe = plan["arms"]["blog"]["fit"]

    def make(arch, tokenizer, settings, stream, context, seed):
        found = fit_by_recipe(arch, context, recipe, seed)
        fitted = any(bool(p.detach().abs().sum() > 0) for p in found.bias.parameters())  # B is not 0
        trace = [list(t) for t in found.trace]
        return found.bias, {"loss": found.loss, "none": found.none, "fitted": fitted, "trace": trace}

    return recorded_bias(plan, "blog", fit, recipe, int(recipe["seed"]) + fit, device, make)


def calibrate_fitm(plan: dict, fit: int, device) -> Path:
    """Found-in-the-Middle's calibration ``fit`` (``positional_bias.calibrate``, strength 1) on its reserved window
    shuffled (seed: the plan's + fit), and its strength t chosen on that same window (``choose_strength``), all in
    its record (``recorded_bias``); a strength t is applied as the parameters times t."""
    calibration = plan["arms"]["fitm"]["calibration"]

    def make(arch, tokenizer, settings, stream, context, seed):
        dummy = pb.shuffled(context, seed, lead=len(leading_ids(tokenizer, settings.bos)))
        bias = pb.calibrate(arch, dummy, 1.0, buckets=calibration["buckets"], rows=calibration["rows"])
        return bias, {}

    def then(path, arch, tokenizer, stream, settings):
        return choose_strength(plan, fit, path, arch, tokenizer, stream, settings)

    return recorded_bias(plan, "fitm", fit, calibration, int(calibration["shuffle_seed"]) + fit, device, make, then)


def choose_strength(plan: dict, fit: int, bias_file: Path, arch, tokenizer, stream, settings) -> dict:
    """{strength, mean_logprob, selection_n}: the retrieval tasks on calibration ``fit``'s own window at the
    calibration's n under the calibration (``bias_file``) at every strength t of the plan's grid (one file each,
    resumable), and the t with the highest mean log p(answer) over every task and q (ties: the smaller). The t is
    carried to every n, as the bias is (no choice at 4096)."""
    calibration = plan["arms"]["fitm"]["calibration"]
    n, k = int(calibration["n"]), fit_window(plan, fit)
    means = {}
    for strength in calibration["grid"]:
        path = selection_path(plan, fit, strength)
        stamp = window_hash(settings, "fitm", bias_file, strength)
        bias = load_bias(bias_file, strength)
        biased_windows(arch, tokenizer, stream, settings, n, [k], bias, stamp, [path], f"fitm_t{strength:g}")
        means[float(strength)] = float(pd.read_parquet(path).logprob.mean())
    best = max(means.values())
    return {"strength": min(t for t, m in means.items() if m == best), "mean_logprob": means, "selection_n": n}


def window_hash(settings, arm: str, bias_file: Path, strength: float) -> str:
    """The stamp of a fix window's rows: the retrieval settings' hash, the arm, its bias file and strength."""
    chosen = [settings.record_hash(), arm, sha256(bias_file), strength]
    return hashlib.sha256(json.dumps(chosen).encode()).hexdigest()[:12]


def held_out_window(arch, tokenizer, stream, settings, n: int, k: int, weights: str) -> pd.DataFrame:
    """The examples of held-out window k at n with whatever bias the model has on, as the none record's rows (the
    model named as there, ``weights`` the arm), without the share (the fix reads accuracy only)."""
    return window_examples(arch, tokenizer, settings, stream, n, k, weights, k + 1, 0)


def biased_windows(arch, tokenizer, stream, settings, n: int, draws, bias, stamp: str, paths, weights: str) -> None:
    """Each drawn window's examples (``held_out_window``) with ``bias`` on, stamped, written to its path, unless
    recorded."""
    missing = [(k, path) for k, path in zip(draws, paths) if not recorded(path, stamp)]
    with pb.applied(arch.model, bias.to(next(arch.model.parameters()).device)):
        for k, path in missing:
            examples = held_out_window(arch, tokenizer, stream, settings, n, k, weights)
            io.write_parquet(examples.assign(draw=k, config_hash=stamp), path)


def arm_bias(plan: dict, arm: str, fit: int) -> tuple[Path, float]:
    """(the arm's bias file of fit ``fit``, its strength): blog at 1; fitm at the strength chosen for that fit on its
    own window (at the calibration's n, carried to every n)."""
    if arm not in ARMS:
        raise ConfigError(f"fix: unknown arm {arm!r} (the fix arms: {', '.join(ARMS)})")
    path = bias_path(plan, arm, fit)
    if arm == "blog":
        return path, 1.0
    fitted = path.with_suffix(".json")
    if not fitted.is_file():
        raise InputError(f"{fitted}: missing: calibration {fit} and its strength are not recorded")
    return path, float(json.loads(fitted.read_text())["strength"])


def fix_block(plan: dict, arm: str, n: int, block: int, size: int, device) -> list[Path]:
    """The held-out windows of one job of a fix arm at n, window k under fit k mod F (its bias file and strength),
    each written as soon as it is done; those recorded are skipped (a window recorded under another bias or strength
    is one line, never overwritten)."""
    draws = block_draws(plan, n, block, size)
    settings = retrieval_settings(plan)
    by_fit = {}
    for k in draws:
        by_fit.setdefault(fit_of(plan, k), []).append(k)
    jobs = []
    for fit, ks in sorted(by_fit.items()):
        bias_file, strength = arm_bias(plan, arm, fit)
        stamp = window_hash(settings, arm, bias_file, strength)
        jobs.append((ks, bias_file, strength, stamp, [window_path(plan, arm, n, k) for k in ks]))
    paths = [window_path(plan, arm, n, k) for k in draws]
    if all(recorded(path, stamp) for _, _, _, stamp, chosen in jobs for path in chosen):
        return paths
    arch, tokenizer, stream = loaded(settings, device)
    for ks, bias_file, strength, stamp, chosen in jobs:
        bias = load_bias(bias_file, strength)
        biased_windows(arch, tokenizer, stream, settings, n, ks, bias, stamp, chosen, arm)
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


def gate_window(plan: dict, n: int, window: int, device) -> list[Path]:
    """The gates' readings on one gate window at n (``gate_block``'s, for that window alone): one job a window,
    so that they run side by side; the gate's job then finds them all recorded and computes nothing."""
    if window not in gate_windows(plan, n):
        raise ConfigError(f"fix gate: window {window} at n = {n}; the gate windows there are {gate_windows(plan, n)}")
    return gate_block(plan, n, device, [window])


def gate_block(plan: dict, n: int, device, windows=None) -> list[Path]:
    """The gates' readings on the plan's gate windows at n (the first 2F held-out windows: each fit's first two;
    ``windows``: only those), one file per window (resumable), gate window k under its fit k mod F (column
    ``fit``): the flatness (``positional_bias.flatness``) of the task-free profile of BOS + the window's first
    n - 1 tokens under each arm (layers recomputed from ``checkpoint_from``), and at the calibration's n the
    content-free attention's distance from uniform (``content_free_distance``) of the window shuffled, without and
    with the calibration."""
    gates, calibration = plan["run"]["gates"], plan["arms"]["fitm"]["calibration"]
    draws = gate_windows(plan, n) if windows is None else windows
    paths = [gate_path(plan, n, k) for k in draws]
    missing = [(k, path) for k, path in zip(draws, paths) if not path.exists()]
    if not missing:
        return paths
    settings = retrieval_settings(plan)
    arch, tokenizer, stream = loaded(settings, device)
    layers = [layer for layer, _ in models.layers(arch)] if n >= settings.checkpoint_from else []
    lead = len(leading_ids(tokenizer, settings.bos))
    for done, (k, path) in enumerate(missing, 1):
        start = time.perf_counter()
        context = reserved_contexts(stream, tokenizer, settings, n, [k]).to(device)
        fit = fit_of(plan, k)
        biases = {"none": None, **{arm: load_bias(*arm_bias(plan, arm, fit)).to(device) for arm in ARMS}}
        rows = []
        for arm, bias in biases.items():
            with pb.applied(arch.model, bias) if bias is not None else contextlib.nullcontext():
                with bounded.checkpointed(layers):
                    flatness = float(pb.flatness(pb.gradient_norms(arch, context[0])))
                distance = np.nan
                if n == calibration["n"] and arm != "blog":
                    dummy = pb.shuffled(context, gates["shuffle_seed"], lead=lead)
                    distance = content_free_distance(pb.attention_maps(arch, dummy).cpu(), calibration["rows"])
            rows.append({"arm": arm, "n": n, "draw": k, "fit": fit, "flatness": flatness})
            rows[-1]["content_free_distance"] = distance
        io.write_parquet(pd.DataFrame(rows).assign(window=corpus_windows(stream, settings, n, [k])[0]), path)
        flat = ", ".join(f"{row['arm']} {row['flatness']:.3f}" for row in rows)
        seconds = time.perf_counter() - start
        log.info(
            "gate n=%d window %d (%d of the %d missing): flatness %s, %.1f s", n, k, done, len(missing), flat, seconds
        )
    return paths
