"""Statistics every stage reads, below the stages that read them: per-unit effects and their intervals over
seeds, windows and bootstrap draws (``statistics``), a primary's effect with its p-value (``effects``) and its
outcome read off its interval (``outcomes``); the second study's estimators (``study2``: Firth's slope, the fit as
the unit, two one-sided tests)."""
