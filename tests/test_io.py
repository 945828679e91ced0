"""Outputs: atomic, readable by the group and others as the umask allows, no stale temp files,
and a write the operating system refuses (read-only folder, full disk) is one clear line."""

from __future__ import annotations

import errno
import json
import os
import stat
import subprocess
import sys

import pytest
import torch

from lostmid import io
from lostmid.cli import main as cli
from lostmid.errors import OutputError

from conftest import REPO, tiny_spec


def forget_umask():
    if hasattr(io, "umask"):  # read once per process: forget it when a test changes it
        io.umask.cache_clear()


@pytest.fixture
def umask_022():
    old = os.umask(0o022)
    forget_umask()
    yield
    os.umask(old)
    forget_umask()


def test_outputs_are_readable_by_group_and_others_under_umask_022(tmp_path, umask_022):
    io.write_text("hello", tmp_path / "a.txt")
    io.save_torch(torch.zeros(2), tmp_path / "b.pt")
    for name in ("a.txt", "b.pt"):
        assert stat.S_IMODE((tmp_path / name).stat().st_mode) == 0o644, name


def test_outputs_honour_a_stricter_umask(tmp_path):
    old = os.umask(0o077)
    forget_umask()
    try:
        io.write_text("hello", tmp_path / "a.txt")
    finally:
        os.umask(old)
        forget_umask()
    assert stat.S_IMODE((tmp_path / "a.txt").stat().st_mode) == 0o600


KILLED_WRITE = """
import os, signal, sys
from lostmid import io
with io.atomic_path(sys.argv[1]) as tmp:
    tmp.write_text("half")
    os.kill(os.getpid(), signal.{signal})
"""


@pytest.mark.parametrize("signal", ["SIGKILL", "SIGTERM"])
def test_the_rerun_of_a_killed_write_leaves_no_temp_file(tmp_path, signal):
    target = tmp_path / "table.parquet"
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"))
    killed = subprocess.run([sys.executable, "-c", KILLED_WRITE.format(signal=signal), str(target)], env=env)
    assert killed.returncode == -getattr(__import__("signal"), signal)
    assert not target.exists() and len(io.stale_temp_files(target)) == 1  # what the kill left
    (tmp_path / ".other.parquet.abc.tmp").write_text("another target's")  # not ours: kept
    io.write_text("whole", target)  # the job's rerun
    assert target.read_text() == "whole"
    assert sorted(p.name for p in tmp_path.iterdir()) == [".other.parquet.abc.tmp", "table.parquet"]


def init_argv(out, *extra):
    return ["init", "--spec", json.dumps(tiny_spec()), "--device", "cpu", "--out", str(out), *extra]


def error_lines(capsys):
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return [line for line in err.splitlines() if line.strip()]


def test_a_read_only_folder_is_one_line_naming_the_file(tmp_path, capsys, monkeypatch):
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o555)
    out = folder / "step0.pt"
    if os.geteuid() == 0:  # root writes anyway: refuse as the kernel refuses everyone else

        def refused(*args, dir=None, **kwargs):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), dir)

        monkeypatch.setattr(io.tempfile, "mkstemp", refused)
    try:
        assert cli.main(init_argv(out)) == 2
    finally:
        folder.chmod(0o755)
    assert error_lines(capsys)[-1] == f"lostmid init: error: cannot write {out}: Permission denied"
    assert not out.exists()


def test_a_full_disk_is_one_line_naming_the_file(tmp_path, capsys, monkeypatch):
    def full(obj, path, *args, **kwargs):
        with open(path, "wb") as f:
            f.write(b"partial")
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(torch, "save", full)
    out = tmp_path / "step0.pt"
    assert cli.main(init_argv(out)) == 2
    assert error_lines(capsys)[-1] == f"lostmid init: error: cannot write {out}: No space left on device"
    assert list(tmp_path.iterdir()) == []  # neither the output nor its temp file


def test_an_os_error_outside_the_outputs_is_one_line_too(tmp_path, capsys):
    missing = tmp_path / "missing.parquet"
    assert (
        cli.main(["figures", "--failure", str(missing), "--figures", "failure_by_position", "--out-dir", str(tmp_path)])
        == 2
    )
    (line,) = [line for line in error_lines(capsys) if line.startswith("lostmid")]
    assert line.startswith("lostmid figures: error: ") and str(missing) in line


def test_output_error_is_an_os_error_and_a_lostmid_error():
    err = OutputError("/x/table.parquet", OSError(errno.ENOSPC, os.strerror(errno.ENOSPC)))
    assert isinstance(err, OSError) and str(err) == "cannot write /x/table.parquet: No space left on device"


@pytest.mark.parametrize(
    "content, found",
    [
        ({"bias": torch.zeros(8, 8)}, "holds a dict"),
        (torch.zeros(4, 4), r"holds a \(4, 4\) torch.float32 tensor"),
        (b"not a tensor file", r"is not a torch file \(neither a zip archive, as torch.save writes, nor a pickle\)"),
    ],
    ids=["dict", "wrong shape", "garbage"],
)
def test_a_bias_file_that_is_not_an_LxL_tensor_is_one_line_naming_it(tmp_path, capsys, content, found):
    bias = tmp_path / "bias.pt"
    if isinstance(content, bytes):
        bias.write_bytes(content)
    else:
        torch.save(content, bias)
    assert cli.main(init_argv(tmp_path / "step0.pt", "--attention-bias", str(bias))) == 2
    line = error_lines(capsys)[-1]
    assert line.startswith(f"lostmid init: error: attention bias file {bias} ")
    import re

    assert re.search(found, line), line
    # a workflow output (results/bias_tensors): moved aside, so that the next run refits it
    assert (
        line.endswith(f"; moved it aside to {tmp_path / '.bias.pt.damaged'}: the next run rebuilds it")
        and not bias.exists()
    )
