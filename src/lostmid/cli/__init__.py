"""The ``lostmid`` command line: ``registry`` (the leaf every stage module imports), one module
per stage, ``joblog`` and ``argfile`` (a rule job's log per attempt and its arguments file), and
``main`` (the parser and the console entry point)."""
