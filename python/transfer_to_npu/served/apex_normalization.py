"""apex.normalization on the NPU (``_layers.py``)."""

from ._layers import (FusedLayerNorm, FusedRMSNorm, MixedFusedLayerNorm,  # noqa: F401
                      MixedFusedRMSNorm)

__all__ = ["FusedLayerNorm", "FusedRMSNorm", "MixedFusedLayerNorm", "MixedFusedRMSNorm"]
