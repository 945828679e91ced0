"""Names of the adjoint's three channels and their pairs, for modules that must not import torch
(the condition tests' tables and figures read them; lostmid.analysis.channels computes the channels)."""

CHANNELS = ("res", "cone", "loc")
PAIRS = (("res", "cone"), ("res", "loc"), ("cone", "loc"))


def pair_name(pair) -> str:
    return "-".join(pair)
