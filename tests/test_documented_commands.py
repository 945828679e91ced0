"""Every `snakemake` command written in the README, the docs and the config files' headers runs as written:
`--configfile` takes every following word as a config file, so a target written after the config files
would be read as one ("No such file or directory: 'length'"). Targets go before `--configfile`."""

from __future__ import annotations

import re
import shlex

import pytest

from conftest import CONFIG_FILES, REPO

DOCUMENTED = sorted([REPO / "README.md", *(REPO / "docs").glob("*.md"), *(REPO / "config").glob("*.md"), *CONFIG_FILES])
# The checkout's folders that hold config files: a word naming a file there must name one that exists.
CONFIG_FOLDERS = ("config/", "runs/", "profiles/", "tests/")


def snakemake_commands(text: str) -> list[str]:
    """The `snakemake ...` commands of a page or a config header, continuation lines joined."""
    lines = [re.sub(r"^\s*#\s?", "", line) if line.lstrip().startswith("#") else line for line in text.splitlines()]
    joined = re.sub(r"\\\s*\n\s*", " ", "\n".join(lines))
    commands = []
    for line in joined.splitlines():
        for match in re.finditer(r"snakemake\s[^`\n]*--configfile[^`\n]*", line):
            commands.append(match.group(0).split(";")[0].split(" #")[0].rstrip(". )"))
    return commands


def config_files_named(command: str) -> list[str]:
    """The words `--configfile` takes: all up to the next option."""
    words = shlex.split(command)
    start = words.index("--configfile") + 1
    named = []
    for word in words[start:]:
        if word.startswith("-"):
            break
        named.append(word)
    return named


@pytest.mark.parametrize("page", DOCUMENTED, ids=lambda path: str(path.relative_to(REPO)))
def test_documented_commands_name_only_config_files_after_configfile(page):
    for command in snakemake_commands(page.read_text()):
        for word in config_files_named(command):
            assert word.endswith((".yaml", ".yml")), f"{page.name}: {word!r} would be read as a config file: {command}"
            if word.startswith(CONFIG_FOLDERS) and not word.startswith("config/my_"):  # my_: the user's own
                assert (REPO / word).exists(), f"{page.name}: no config file {word}: {command}"


def test_a_target_after_the_config_files_is_caught():
    header = "#   snakemake --cores all --configfile config/config.yaml config/length.yaml \\\n#   length"
    (command,) = snakemake_commands(header)
    assert config_files_named(command) == ["config/config.yaml", "config/length.yaml", "length"]
