"""Errors a user can fix: they reach the command line as one clear message."""


class LostmidError(Exception):
    """Base class of user-facing errors."""


class ConfigError(LostmidError, ValueError):
    """A config key or value is wrong; the message names the key."""


class CheckpointError(LostmidError):
    """A checkpoint is missing, corrupt, truncated or belongs to another run."""
