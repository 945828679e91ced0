"""lostmid: positional influence in causal Transformers (Lost-in-the-Middle), as a Snakemake workflow.

The library never imports Snakemake; the workflow calls it through the ``lostmid`` command line.
Importing it holds the math libraries to the numerics mode (lostmid.numerics) before torch or numpy
computes anything: the same config and seed give the same tables on every machine.
"""

from lostmid import numerics

numerics.pin()

__version__ = "0.1.0"
