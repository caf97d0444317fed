"""Data loading: DataLoader(pin_memory_device='cuda')."""

from .. import _C
from ._row import row


def rows(torch):
    from torch.utils.data import DataLoader

    return [row("torch.utils.data.DataLoader", "torch.utils.data.DataLoader", "device_arg",
                _C.MODE_DEVICE_ARG, DataLoader, "__init__", binds=True,
                kws=("pin_memory_device",))]
