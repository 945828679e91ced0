"""Seaborn figures, one module per stage. The Agg backend is chosen here, before any module of
the package imports pyplot: figures are files, never windows."""

import matplotlib

matplotlib.use("Agg")
