"""The real Ascend backend: Huawei's ``torch_npu`` package, which registers
the ``npu`` device, ``torch.npu`` and the ``hccl`` process group itself."""

import importlib

NAME = "torch_npu"


def available():
    """Whether torch_npu can be imported, and why not."""
    try:
        importlib.import_module("torch_npu")
    except ImportError as exc:
        return False, exc
    return True, None


def install():
    importlib.import_module("torch_npu")
