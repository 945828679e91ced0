"""lostmid: positional influence in causal Transformers (Lost-in-the-Middle), as a Snakemake workflow.

The library never imports Snakemake; the workflow calls it through the ``lostmid`` command line.
"""

__version__ = "0.1.0"
