"""`lostmid --help` lists the commands by what a user does with them (run, inspect, pages) on one screen; every
command name the rules and the docs call still parses."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from lostmid.cli.main import GROUPS, build_parser, parse
from lostmid.cli.registry import COMMANDS, PASSES_ON

from conftest import REPO

SCREEN = 40  # lines


def test_every_command_is_in_exactly_one_group():
    grouped = [name for _, names in GROUPS for name in names]
    assert sorted(grouped) == sorted(COMMANDS), "give a new command its place in lostmid.cli.main.GROUPS"


@pytest.mark.parametrize("columns", ["80", "120"])
def test_the_help_fits_one_screen_and_names_every_command(columns):
    env = {**os.environ, "COLUMNS": columns}
    code = "from lostmid.cli.main import run; run()"
    done = subprocess.run([sys.executable, "-c", code, "--help"], capture_output=True, text=True, env=env, cwd=REPO)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) <= SCREEN, done.stdout
    assert all(len(line) <= int(columns) for line in lines), done.stdout
    for title, _ in GROUPS:
        assert any(line.startswith(title.split(":")[0]) for line in lines), title  # a long title wraps
    words = done.stdout.replace(",", " ").split()
    assert all(name in words for name in COMMANDS)


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_command_name_still_parses(name, capsys):
    if name in PASSES_ON:  # every option goes on to another program, --help included
        assert parse([name, "--help"]).passed_on == ["--help"]
        return
    with pytest.raises(SystemExit) as stop:
        build_parser().parse_args([name, "--help"])
    assert stop.value.code == 0 and f"usage: lostmid {name}" in capsys.readouterr().out
