"""The public API (``import lostmid``): every function it lists has a docstring example, and each example runs as
written and prints what it shows (doctest). Importing lostmid changes nothing in the process.

The examples load the packaged SmolLM2 with ``lostmid.load_pretrained("smollm2")``; here that call returns the
session's one load (conftest.smollm2, made by the same function), so the suite dequantizes its GGUF file once.
"""

from __future__ import annotations

import doctest
import json
import os
import subprocess
import sys

import pytest

import lostmid

from conftest import REPO


def test_importing_lostmid_changes_no_variable_and_loads_neither_torch_nor_numpy():
    code = (
        "import json, os, sys; before = dict(os.environ); import lostmid; "
        "print(json.dumps([dict(os.environ) == before, sorted({'numpy', 'torch'} & set(sys.modules))]))"
    )
    env = {k: v for k, v in os.environ.items() if k != "LOSTMID_NUMERICS"} | {"MKL_CBWR": "COMPATIBLE"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert json.loads(done.stdout) == [True, []]


def test_help_lists_the_public_functions():
    done = subprocess.run(
        [sys.executable, "-c", "import lostmid; help(lostmid)"], capture_output=True, text=True, check=True
    )
    functions = done.stdout.split("FUNCTIONS", 1)[1]
    for name in lostmid.__all__:
        assert f"\n    {name}" in functions, name


@pytest.mark.slow
@pytest.mark.parametrize("name", lostmid.__all__)
def test_the_docstring_example_runs_as_written(name, request, monkeypatch):
    function = getattr(lostmid, name)
    tests = [t for t in doctest.DocTestFinder().find(function, name, globs={}) if t.examples]
    assert tests, f"lostmid.{name} has no docstring example"
    monkeypatch.chdir(REPO)  # the examples name the repository's run records by relative paths
    if "load_pretrained(" in function.__doc__:
        loaded = request.getfixturevalue("smollm2")
        monkeypatch.setattr(lostmid, "load_pretrained", lambda source: loaded if source == "smollm2" else None)
    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
    for test in tests:
        runner.run(test)
    assert runner.summarize(verbose=False).failed == 0, f"lostmid.{name}: its example printed otherwise (above)"


def test_a_run_without_an_evidence_table_and_a_text_without_its_tokenizer_are_one_line_each(tmp_path):
    from lostmid.errors import ConfigError, InputError

    with pytest.raises(InputError, match=f"^{tmp_path} holds no evidence table"):
        lostmid.findings(str(tmp_path))
    with pytest.raises(ConfigError, match="^influence_profile: a text needs its tokenizer"):
        lostmid.influence_profile(None, "Some text.")
