"""torch_npu.contrib, and Ascend's one-liner ``from torch_npu.contrib
import transfer_to_npu`` (both served by this module): served only while
this package migrates, so that the line means the migration already on."""

from .. import _served

__path__ = []  # a package: torch_npu.contrib.transfer_to_npu (_served.py)


def __getattr__(name):
    return _served.submodule("torch_npu.contrib", name)
