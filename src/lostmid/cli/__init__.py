"""The ``lostmid`` command line: ``registry`` (the leaf every stage module imports), one module
per stage, and ``main`` (the parser and the console entry point)."""
