"""Subcommands of the ``lostmid`` command line, one module per workflow stage.

Each module registers its commands with ``lostmid.cli.command``; importing it is enough.
"""

from lostmid.commands import training  # noqa: F401
from lostmid.commands import algebraic  # noqa: F401
from lostmid.commands import channels  # noqa: F401
from lostmid.commands import influence  # noqa: F401
from lostmid.commands import remedies  # noqa: F401
from lostmid.commands import summaries  # noqa: F401
