"""Training as chained checkpoints: the ``checkpoint`` format, a ``train`` segment, seed batches
(``seed_batch``) and the failure-by-position evaluation (``evaluate``)."""
