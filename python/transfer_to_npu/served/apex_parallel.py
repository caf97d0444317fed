"""apex.parallel on the NPU (``_layers.py``)."""

from ._layers import DistributedDataParallel, SyncBatchNorm, convert_syncbn_model  # noqa: F401

__all__ = ["DistributedDataParallel", "SyncBatchNorm", "convert_syncbn_model"]
