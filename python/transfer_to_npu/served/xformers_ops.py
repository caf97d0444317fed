"""xformers.ops on the NPU (served as ``xformers.ops``,
``xformers.ops.fmha`` and ``xformers.ops.fmha.attn_bias``, which hold the
same names here)."""

import sys

from ._xformers import (AttentionBias, BlockDiagonalCausalMask,  # noqa: F401
                        BlockDiagonalMask, LowerTriangularFromBottomRightMask,
                        LowerTriangularMask, LowerTriangularMaskWithTensorBias,
                        memory_efficient_attention, memory_efficient_attention_forward)
from ._xformers import __all__  # noqa: F401

__path__ = []  # a package: its other modules are refused by name (_served.py)

# xformers.ops.fmha and .fmha.attn_bias, reached as attributes.
fmha = attn_bias = sys.modules[__name__]
