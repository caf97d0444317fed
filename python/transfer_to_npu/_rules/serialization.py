"""Checkpoints: torch.load's map_location."""

from .. import _C
from ._row import row


def rows(torch):
    # torch.load(f, map_location): position 1.  Only device specifications
    # are rewritten; the path in position 0 is never looked at.
    return [row("torch.load", "torch.load", "device_arg", _C.MODE_DEVICE_ARG, torch, "load",
                pos=1, kws=("map_location",))]
