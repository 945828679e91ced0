"""Errors a user can fix: they reach the command line as one clear message."""


class LostmidError(Exception):
    """Base class of user-facing errors."""


class ConfigError(LostmidError, ValueError):
    """A config key or value is wrong; the message names the key."""


class CheckpointError(LostmidError):
    """A checkpoint is missing, corrupt, truncated or belongs to another run."""


class OutputError(LostmidError, OSError):
    """An output cannot be written (read-only folder, full disk, ...); the message names the file."""

    def __init__(self, path, cause: OSError):
        reason = cause.strerror or str(cause) or type(cause).__name__
        super().__init__(f"cannot write {path}: {reason}")
        self.path, self.cause = path, cause


class FitRejected(LostmidError):
    """A fit did not do what it is for (the bias fit's held-out guard); the message names both numbers."""
