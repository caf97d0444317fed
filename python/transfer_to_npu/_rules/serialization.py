"""Checkpoints.

* torch.load(f, map_location): a string, torch.device or dict (keys and
  values) naming CUDA is rewritten; a callable that calls storage.cuda()
  works through the storage rows;
* a checkpoint written on a CUDA machine (storages tagged 'cuda:N') loads
  onto the npu with no map_location: the location torch restores to is
  rewritten where torch looks it up.
"""

from .. import _C
from ._row import row


def rows(torch):
    import torch.serialization as serialization

    # torch.load(f, map_location): position 1.  Only device specifications
    # are rewritten; the path in position 0 is never looked at.  The same
    # function is torch.serialization.load: one wrapper for both names.
    return [
        row("torch.load", "torch.load", "device_arg", _C.MODE_DEVICE_ARG, owner, "load",
            pos=1, kws=("map_location",))
        for owner in (torch, serialization)
    ] + [
        row("torch.serialization.default_restore_location",
            "torch.serialization.default_restore_location", "device_arg", _C.MODE_DEVICE_ARG,
            serialization, "default_restore_location", pos=1, kws=("location",)),
    ]
