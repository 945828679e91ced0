"""Training objectives: the task loss and the paper's remedies, one module per algorithm
(``algorithm1_balance``, ``algorithm2_reweight``, ``algorithm3_observability``); ``registry``
maps a run's ``remedy.kind`` to its objective; ``settings`` (torch-free) builds a remedy block's settings."""
