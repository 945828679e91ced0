"""A job's arguments in a file beside its log (lostmid.cli.argfile): every rule's shell is
``lostmid --log LOG --attempt N @ARGS``, so the shell Snakemake echoes is one short line, also when
the job fails, and ``lostmid @ARGS`` reruns the job by hand."""

from __future__ import annotations

import json
import os
import re
import types

import pytest

from lostmid.cli import argfile
from lostmid.cli.main import parse

from conftest import REPO, lostmid, run_snakemake

SETTINGS = '{"lengths": [8, 16], "note": "two words", "quote": "it\'s"}'


def test_the_file_sits_beside_the_log_and_holds_one_argument_a_line(tmp_path):
    log = tmp_path / "logs" / "length" / "init.log"
    arguments = ["length-init", "--settings", SETTINGS, "--out", "results/a table.parquet"]
    path = argfile.write(log, arguments)
    assert path == tmp_path / "logs" / "length" / "init.args"
    assert path.read_text().splitlines() == arguments  # JSON, spaces and quotes as they are: no shell quoting


def test_lostmid_reads_the_file_named_after_an_at_sign(tmp_path):
    path = argfile.write(
        tmp_path / "init.log",
        ["length-init", "--device", "cpu", "--model", '{"d_model": 8}', "--settings", SETTINGS, "--out", "out.parquet"],
    )
    args = parse(["--log", str(tmp_path / "init.log"), "--attempt", "2", f"@{path}"])
    assert (args.command, args.device, args.out, args.attempt) == ("length-init", "cpu", "out.parquet", 2)
    assert args.model == {"d_model": 8}
    assert args.settings == {"lengths": [8, 16], "note": "two words", "quote": "it's"}


def test_the_same_arguments_leave_the_file_and_its_time_as_they_were(tmp_path):
    """Snakemake formats a job's shell more than once (to print it, to run it): the file changes
    only with its arguments."""
    log = tmp_path / "job.log"
    path = argfile.write(log, ["figures", "--threads", "1"])
    os.utime(path, (1_000_000, 1_000_000))
    argfile.write(log, ["figures", "--threads", "1"])
    assert path.stat().st_mtime == 1_000_000
    argfile.write(log, ["figures", "--threads", "2"])
    assert path.stat().st_mtime > 1_000_000 and path.read_text() == "figures\n--threads\n2\n"
    assert [p.name for p in tmp_path.iterdir()] == ["job.args"]  # no part file left behind


def test_an_argument_that_spans_lines_is_refused(tmp_path):
    with pytest.raises(ValueError, match="spans lines"):
        argfile.write(tmp_path / "job.log", ["evidence", "--settings", "{\n}"])


def test_a_rules_shell_writes_the_file_when_snakemake_formats_it(tmp_path):
    """The shell that workflow/rules/common.smk (``logged``) builds: the command is the format spec
    of the param ``arguments``; Snakemake fills in its fields (``:q`` quotes) and the param writes
    the words of the command to the file and stands for its path."""
    from snakemake.utils import format as snakemake_format

    log = str(tmp_path / "logs" / "init.log")
    params = types.SimpleNamespace(arguments=argfile.ARGUMENTS_FILE, settings=SETTINGS)
    shell = (
        "lostmid --log {log} --attempt 1"
        " @{params.arguments:{log}\nlength-init --settings {params.settings:q} --out {output}\n}"
    )
    echoed = snakemake_format(shell, log=log, params=params, output=["results/init.parquet"])
    assert echoed == f"lostmid --log {log} --attempt 1 @{tmp_path / 'logs' / 'init.args'}"
    assert (tmp_path / "logs" / "init.args").read_text().splitlines() == [
        "length-init",
        "--settings",
        SETTINGS,
        "--out",
        "results/init.parquet",
    ]


@pytest.mark.slow
def test_a_failed_job_shows_its_error_line_and_a_short_shell_line(tmp_path):
    """A training segment whose checkpoint is missing fails: Snakemake's report of the job echoes
    the short shell line, and the job's error line stands out beside it; `lostmid @ARGS` reruns the
    job by hand, with the same error on the terminal."""
    (tmp_path / "config.yaml").write_text((REPO / "tests" / "smoke.yaml").read_text())
    for seed in (0, 1):  # a folder where the block's first checkpoints should be: "does not exist"
        (tmp_path / f"results/checkpoints/baseline/L8_M1_seed{seed}/step0.pt").mkdir(parents=True)
    failed = run_snakemake(tmp_path, "results/checkpoints/baseline/L8_M1_seed0/step10.pt", check=False)
    assert failed.returncode != 0
    log = "results/logs/train/baseline/L8_M1_seeds0-1_step10.log"
    arguments = "results/logs/train/baseline/L8_M1_seeds0-1_step10.args"
    shell = f"lostmid --log {log} --attempt 1 @{arguments}"
    # Snakemake echoes the shell twice: "Command 'set -euo pipefail;  SHELL' returned non-zero exit
    # status 2." and, under "Error in rule ...", the job's shell: entry
    echoed = [line.strip() for line in failed.stderr.splitlines() if "lostmid --log" in line]
    assert len(echoed) == 2 and re.fullmatch(rf"Command '[^']*;\s+{re.escape(shell)}' returned .*", echoed[0])
    assert echoed[1] == shell and len(shell) < 200, echoed
    missing = "results/checkpoints/baseline/L8_M1_seed0/step0.pt"
    error = f"lostmid train: error: checkpoint {missing} does not exist"
    assert f"{error} (log: {log})" in failed.stderr.splitlines()
    words = (tmp_path / arguments).read_text().splitlines()
    assert words[:2] == ["train", "--spec"] and json.loads(words[2])["variant"] == "baseline"
    # by hand, the output goes to the terminal
    by_hand = lostmid(f"@{arguments}", cwd=tmp_path)
    assert by_hand.returncode == 2 and error in by_hand.stderr.splitlines()


def test_formatted_without_a_command_the_field_names_itself_and_writes_nothing(tmp_path, monkeypatch):
    """Snakemake's report lists a rule's params with an empty format spec: no log, no command, no file."""
    monkeypatch.chdir(tmp_path)
    assert format(argfile.ARGUMENTS_FILE, "") == f"{argfile.ARGUMENTS_FILE}" == "ARGUMENTS_FILE"
    assert not any(tmp_path.iterdir())
