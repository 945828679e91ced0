"""Algebraic controlled simulations of the paper's section 4: ``settings``, the ``linear_model``,
the three ``remedies`` and Table 1, and the ``probes`` study of Algorithm 3."""
