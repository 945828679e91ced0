"""Table work without torch: the grid ``keys`` every table carries, the ``remedies`` table and
the ``summaries`` over seeds."""
