"""Influence profiles of real causal-LM architectures against the two rollout theories (docs/architectures.md).

    models    Hugging Face GPT-2, Llama and Qwen2 built from configuration keyword arguments
              (random init, stated seeds), loaded from a local folder or GGUF file or the packaged
              SmolLM2, and their random-init twins; positional encodings learned / rope / none
    measure   the measured influence profile (one backward pass per batch) and the per-layer
              lambda_t and head-averaged attention A_t recorded by forward hooks
    theory    Cesaro N^H, the rollouts with measured lambda_t, and the comparison metrics
    settings  the ``architectures`` section and its ``flag`` subsection (torch-free)
    bounded   the memory-bounded per-sequence measurement (sdpa gradients, lambda_t, blockwise rollout)
    text      the corpus (an installed package's text) and its windows of exactly n tokens
    intervals bootstrap intervals over sequences and the power-law decay exponent
    sweep     the configured random-init sweep and the flag-recall checkpoints
    pretrained the pretrained entries and their twins on real text; the notebook entry point
    positional_bias an attention-logit bias put on a loaded Llama-family model and taken off: the blog's
              fitted table and Found-in-the-Middle's calibration (docs/positional_bias.md)

The stage's figures are drawn by ``lostmid.plots.architectures``.
"""
