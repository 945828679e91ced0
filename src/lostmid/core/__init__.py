"""The foundation: the flag-recall ``task``, the ``model``, its ``adjoint`` (the one owner of the
zero-valued taps that turn one backward pass into every adjoint), the influence ``density`` (the
density, positions and imbalance formulas every layer above uses, torch-free), the ``optim``izer
and the ``devices`` choice. Imports nothing else of lostmid but ``errors``."""
