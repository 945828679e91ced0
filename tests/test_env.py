"""envs/lostmid.yaml, the conda environment, is kept in step with pyproject.toml.

Same packages (under their conda-forge/bioconda names) with the same lower bounds, the same
Python floor, the build backend; and the environment installs the lostmid package itself
(its post-deploy script, run by Snakemake), so rules find the `lostmid` command.
"""

from __future__ import annotations

import os
import re
import subprocess

import tomllib
import yaml
from packaging.requirements import Requirement

from conftest import REPO

ENV_FILE = REPO / "envs" / "lostmid.yaml"
POST_DEPLOY = REPO / "envs" / "lostmid.post-deploy.sh"
# PyPI name -> conda name, where they differ.
CONDA_NAMES = {"torch": "pytorch", "snakemake": "snakemake-minimal"}


def conda_dependencies() -> dict[str, str]:
    """Conda package name -> version spec ('>=2.3'), from the environment file."""
    env = yaml.safe_load(ENV_FILE.read_text())
    specs = {}
    for entry in env["dependencies"]:
        assert isinstance(entry, str), f"no pip section expected in {ENV_FILE.name}: {entry}"
        name, spec = re.fullmatch(r"([A-Za-z0-9_.-]+)\s*(.*)", entry.split("#")[0].strip()).groups()
        specs[name.lower()] = spec.replace(" ", "")
    return specs


def pyproject() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text())


def as_conda(requirement: str) -> tuple[str, str]:
    parsed = Requirement(requirement)
    name = parsed.name.lower()
    return CONDA_NAMES.get(name, name), ",".join(sorted(str(s) for s in parsed.specifier))


def test_every_runtime_dependency_is_in_the_conda_env_with_the_same_bounds():
    wanted = dict(as_conda(r) for r in pyproject()["project"]["dependencies"])
    env = conda_dependencies()
    missing = sorted(set(wanted) - set(env))
    assert not missing, f"{ENV_FILE.name} lacks {missing} (pyproject.toml dependencies)"
    different = {name: (spec, env[name]) for name, spec in wanted.items() if env[name] != spec}
    assert not different, f"version bounds differ (pyproject, conda): {different}"


def test_the_conda_env_has_nothing_pyproject_does_not_know():
    project = pyproject()
    known = {as_conda(r)[0] for r in project["project"]["dependencies"] + project["build-system"]["requires"]}
    extra = sorted(set(conda_dependencies()) - known - {"python", "pip"})
    assert not extra, f"{ENV_FILE.name} has {extra}, which pyproject.toml does not list"


def test_python_and_the_build_backend_match():
    project = pyproject()
    env = conda_dependencies()
    assert env["python"] == project["project"]["requires-python"]
    for requirement in project["build-system"]["requires"]:
        name, spec = as_conda(requirement)
        assert env.get(name) == spec, f"the post-deploy step builds lostmid with {requirement}"


def test_the_environment_installs_the_lostmid_package():
    # Snakemake runs <env>.post-deploy.sh (next to the env file) inside the new environment.
    assert POST_DEPLOY.exists() and os.access(POST_DEPLOY, os.X_OK)
    assert re.search(r"pip install .*-e ", POST_DEPLOY.read_text())
    assert yaml.safe_load(ENV_FILE.read_text())["channels"][:2] == ["conda-forge", "bioconda"]


def test_the_post_deploy_step_refuses_a_folder_that_is_not_the_checkout(tmp_path):
    result = subprocess.run(
        ["bash", str(POST_DEPLOY)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=30,
        env=dict(os.environ, LOSTMID_SOURCE=str(tmp_path)),
    )
    assert result.returncode == 1
    assert "is not the lostmid checkout" in result.stderr
