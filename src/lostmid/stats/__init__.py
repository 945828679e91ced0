"""Statistics every stage reads, below the stages that read them: per-unit effects and their intervals over
seeds, windows and bootstrap draws (``statistics``), and a primary's effect with its p-value (``effects``);
the second study's estimators (``study2``: Firth's slope, the fit as the unit, two one-sided tests)."""
