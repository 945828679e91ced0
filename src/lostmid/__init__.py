"""lostmid: positional influence in causal Transformers (Lost-in-the-Middle), as a Snakemake workflow.

From a notebook:

    import lostmid

    lostmid.pin_numerics()                                 # optional: the jobs' kernels (AVX2, one thread)
    model, tokenizer = lostmid.load_pretrained("smollm2")  # the packaged SmolLM2-135M-Instruct, or a folder, a GGUF
    lostmid.influence_profile(model, "Some text.", tokenizer=tokenizer)  # influence by position, and theories'
    lostmid.retrieval_examples(model, tokenizer, n=256, windows=2)       # retrieval by needle position
    lostmid.findings("runs/default")                       # a run's findings: its evidence table

Each function's docstring holds an example that tests/test_api.py runs. The workflow itself runs through the
``lostmid`` command line (``lostmid --help``), which the Snakemake rules call; the library never imports Snakemake.

Importing lostmid changes nothing in the process and loads neither torch nor numpy (lostmid.api: the
functions above import what they need when called). The numerics pin (lostmid.numerics) is set by the
command line in every job, and by ``pin_numerics()`` on request, before numpy or torch is imported.
"""

from lostmid.api import findings, influence_profile, load_pretrained, retrieval_examples
from lostmid.numerics import pin as pin_numerics

__version__ = "0.1.0"
__all__ = ["pin_numerics", "load_pretrained", "influence_profile", "retrieval_examples", "findings"]
