"""A rule's log with retries: ``lostmid --log LOG --attempt N <command> ...``.

Snakemake deletes a job's log before each attempt (``--retries``; the Slurm profile sets 2), so
every attempt writes ``LOG.attempt<N>`` (under a header line) and the log proper receives the copy
of the attempt that ended the job; a failed or killed attempt's file stays beside it, so a retry
never loses the first attempt's output. Attempt 1 removes the attempt files of the run before.
A failed command prints one line to the terminal: the log's last error line and the log's path.
"""

from __future__ import annotations

import contextlib
import datetime
import os
import platform
import re
import shutil
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path

ERROR = re.compile("error|exception", re.IGNORECASE)


@dataclass
class Outcome:
    status: int = 0


def attempt_path(log: Path, attempt: int) -> Path:
    return log.with_name(f"{log.name}.attempt{attempt}")


def last_error_line(log: Path) -> str:
    """The log's last line naming an error or exception (lostmid's ``lostmid <command>: error: ...``,
    or a traceback's last line)."""
    found = [line for line in log.read_text(errors="replace").splitlines() if ERROR.search(line)]
    return found[-1].strip() if found else "failed"


@contextlib.contextmanager
def attempt_log(log: str | None, attempt: int):
    """Send this process's output (its file descriptors 1 and 2: torch's and the libraries' too) to
    ``log``'s attempt file while the block runs; its status is the Outcome's (an exception: 1, with
    its traceback in the log). Without a log, nothing is redirected."""
    outcome = Outcome()
    if log is None:
        yield outcome
        return
    log = Path(log)
    log.parent.mkdir(parents=True, exist_ok=True)
    if attempt <= 1:
        for old in log.parent.glob(log.name + ".attempt*"):
            old.unlink()
    part = attempt_path(log, attempt)
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    part.write_text(f"== log {log}, attempt {attempt}, {stamp}, host {platform.node()} ==\n")
    sys.stdout.flush()
    sys.stderr.flush()
    terminal = os.dup(1), os.dup(2)
    target = os.open(part, os.O_WRONLY | os.O_APPEND)
    os.dup2(target, 1)
    os.dup2(target, 2)
    os.close(target)
    try:
        yield outcome
    except SystemExit as exit:
        outcome.status = exit.code if isinstance(exit.code, int) else 1
        if isinstance(exit.code, str):
            print(exit.code, file=sys.stderr)
    except BaseException:  # the traceback goes to the log, the terminal gets its last line
        traceback.print_exc()
        outcome.status = 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        for fd, saved in zip((1, 2), terminal, strict=True):
            os.dup2(saved, fd)
            os.close(saved)
    if outcome.status == 0:
        os.replace(part, log)
    else:
        shutil.copyfile(part, log)
        print(f"{last_error_line(log)} (log: {log})", file=sys.stderr)
