"""flash_attn's rotary embedding on the NPU, in torch ops: served as
``flash_attn.layers.rotary`` and ``flash_attn.ops.triton.rotary`` (and
their packages ``flash_attn.layers``, ``flash_attn.ops`` and
``flash_attn.ops.triton``, whose other modules are refused by name)."""

import sys

from ._rotary import (ApplyRotaryEmb, ApplyRotaryEmbKV_, ApplyRotaryEmbQKV_,  # noqa: F401
                      RotaryEmbedding, apply_rotary, apply_rotary_emb, apply_rotary_emb_func,
                      apply_rotary_emb_kv_, apply_rotary_emb_qkv_, apply_rotary_emb_torch,
                      rotate_half)
from ._rotary import __all__  # noqa: F401

__path__ = []  # a package: its other modules are refused by name (_served.py)

# rotary and triton, reached as attributes of the packages this module serves.
rotary = triton = sys.modules[__name__]
