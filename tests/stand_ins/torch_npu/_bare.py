"""The ``npu`` device without kernels, as torch's registration API makes it
on every torch from 2.1: PrivateUse1 renamed ``npu``, ``torch.npu``, the
``npu()``/``is_npu`` methods, and an ``hccl`` process group that is gloo on
host tensors."""
import torch
import torch.distributed as dist


def _hccl(store, rank, size, timeout):
    return dist.ProcessGroupGloo(store, rank, size, timeout)


def install(npu):
    torch.utils.rename_privateuse1_backend("npu")
    torch._register_device_module("npu", npu)
    torch.utils.generate_methods_for_privateuse1_backend(for_storage=True)
    if dist.is_available():
        dist.Backend.register_backend("hccl", _hccl, devices=["cpu", "npu"])
