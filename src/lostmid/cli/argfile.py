"""A job's arguments in a file beside its log: ``lostmid --log LOG --attempt N @ARGS``.

Every rule of the workflow runs ``lostmid`` with its arguments in the file ``ARGS`` (the log's path
with ``.args`` for ``.log``), one argument a line, as ``lostmid``'s parser reads a file named after
``@`` (argparse's ``fromfile_prefix_chars``). So the shell command Snakemake echoes, for a failed job
too, is one short line, and ``lostmid @ARGS`` reruns the job by hand with its output on the terminal.
The rules write the file when Snakemake formats their shell (``ARGUMENTS_FILE``; workflow/rules/common.smk,
``logged``).
"""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path

# As argparse reads the file (the locale's encoding before Python 3.12, the file system's since: one
# encoding on POSIX), with undecodable bytes of a path carried through.
ENCODING = {"encoding": sys.getfilesystemencoding(), "errors": sys.getfilesystemencodeerrors()}


def path(log: str | os.PathLike) -> Path:
    """The arguments file of the job whose log is ``log``: beside it, ``.args`` in place of ``.log``."""
    log = Path(log)
    return log.with_name(log.name.removesuffix(".log") + ".args")


def write(log: str | os.PathLike, arguments: Sequence[str]) -> Path:
    """Write ``arguments`` to the arguments file of ``log``, one a line, and return its path.

    An argument is one line whatever it holds (spaces, quotes, JSON): the parser takes each line
    whole. A file that already holds these arguments is left as it is, so its time changes only
    with its arguments (Snakemake formats a job's shell more than once: to print it, to run it)."""
    if any("\n" in argument for argument in arguments):
        raise ValueError(f"an argument spans lines, which an arguments file cannot hold: {arguments}")
    target = path(log)
    text = "".join(f"{argument}\n" for argument in arguments)
    if target.is_file() and target.read_text(**ENCODING) == text:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    part = target.with_name(f".{target.name}.{os.getpid()}")  # whole or not at all, for a parallel reader
    part.write_text(text, **ENCODING)
    os.replace(part, target)
    return target


class ArgumentsFile:
    """A format field that writes an arguments file: formatted with the spec ``LOG\\nCOMMAND\\n``, it
    writes the words of COMMAND (split as the shell splits its words: quotes, no expansions) to the
    arguments file of LOG and stands for that file's path (quoted for the shell). A rule's shell puts
    its command in the spec, whose fields Snakemake fills in before the field is formatted."""

    def __format__(self, spec: str) -> str:
        if "\n" not in spec:  # formatted without a command (a report listing a rule's params): nothing to write
            return repr(self)
        log, command = spec.split("\n", 1)
        return shlex.quote(str(write(log, shlex.split(command))))

    def __repr__(self) -> str:
        return "ARGUMENTS_FILE"


ARGUMENTS_FILE = ArgumentsFile()
