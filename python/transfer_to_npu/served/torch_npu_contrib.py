"""torch_npu.contrib on the virtual NPU: a package, whose module
transfer_to_npu (Ascend's one-liner) is torch_npu_transfer.py."""

from .. import _served

__path__ = []  # a package: torch_npu.contrib.transfer_to_npu (_served.py)


def __getattr__(name):
    return _served.submodule("torch_npu.contrib", name)
