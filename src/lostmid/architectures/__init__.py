"""Influence profiles of real causal-LM architectures against the two rollout theories (docs/architectures.md).

    models    Hugging Face GPT-2, Llama and Qwen2 built from configuration keyword arguments
              (random init, stated seeds) or loaded from a local folder; positional encodings
              learned / rope / none
    measure   the measured influence profile (one backward pass per batch) and the per-layer
              lambda_t and head-averaged attention A_t recorded by forward hooks
    theory    Cesaro N^H, the rollouts with measured lambda_t, and the comparison metrics
    settings  the ``architectures`` block and its ``flag`` sub-block (torch-free)
    sweep     the configured random-init sweep, pretrained folders, and the flag-recall checkpoints

The stage's figures are drawn by ``lostmid.plots.architectures``.
"""
