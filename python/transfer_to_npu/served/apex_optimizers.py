"""apex.optimizers on the NPU (``_optimizers.py``)."""

from ._optimizers import FusedAdam, FusedLAMB, FusedSGD  # noqa: F401

__all__ = ["FusedAdam", "FusedLAMB", "FusedSGD"]
