"""Subcommands of the ``lostmid`` command line, one module per workflow stage.

Each module registers its commands with ``lostmid.cli.command``; importing it is enough.
"""

from lostmid.commands import (
    algebraic,  # noqa: F401
    channels,  # noqa: F401
    check_config,  # noqa: F401
    influence,  # noqa: F401
    remedies,  # noqa: F401
    summaries,  # noqa: F401
    training,  # noqa: F401
)
