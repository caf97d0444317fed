"""flash_attn on the NPU (served as ``flash_attn`` and
``flash_attn.flash_attn_interface``): FlashAttention 2.8's functions on
torch's attention (virtual NPU) or npu_fusion_attention (torch_npu).  Of
its other modules, ``bert_padding`` and the rotary embedding
(``layers.rotary``, ``ops.triton.rotary``) are served; the others (its
fused layers and norms) fail to import, naming themselves."""

from .. import _served
from ._flash import (flash_attn_func, flash_attn_kvpacked_func,  # noqa: F401
                     flash_attn_qkvpacked_func, flash_attn_varlen_func,
                     flash_attn_varlen_kvpacked_func, flash_attn_varlen_qkvpacked_func,
                     flash_attn_with_kvcache)
from ._flash import __all__  # noqa: F401

__version__ = "2.8.3"  # the interface served
__path__ = []  # a package: its other modules are refused by name (_served.py)


def __getattr__(name):
    return _served.submodule("flash_attn", name)
