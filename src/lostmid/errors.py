"""Errors a user can fix: they reach the command line as one clear message."""


class LostmidError(Exception):
    """Base class of user-facing errors."""


class ConfigError(LostmidError, ValueError):
    """A config key or value is wrong; the message names the key."""


class InputError(LostmidError):
    """An input file is damaged or is not the one the job needs (corrupt, truncated, another run's,
    a table without its declared columns): ``path`` names it, and the command moves it aside
    (lostmid.io.move_aside) so that the next run of the workflow rebuilds it. No ``path``: a
    problem the file's rebuild would not cure (a file that does not exist)."""

    def __init__(self, message: str, path=None):
        super().__init__(message)
        self.path = path


class CheckpointError(InputError):
    """A checkpoint is missing, corrupt, truncated or belongs to another run."""


class TableError(InputError):
    """A result table is unreadable or lacks the columns and types declared for it (lostmid.tables.keys)."""


class OutputError(LostmidError, OSError):
    """An output cannot be written (read-only folder, full disk, ...); the message names the file."""

    def __init__(self, path, cause: OSError):
        reason = cause.strerror or str(cause) or type(cause).__name__
        super().__init__(f"cannot write {path}: {reason}")
        self.path, self.cause = path, cause


class FitRejected(LostmidError):
    """A fit did not do what it is for (the bias fit's held-out guard); the message names both numbers."""
