"""Subcommands of the ``lostmid`` command line, one module per workflow stage.

Each module registers its commands with ``lostmid.cli.command``; importing it is enough.
"""

from lostmid.commands import training  # noqa: F401
from lostmid.commands import algebraic  # noqa: F401
