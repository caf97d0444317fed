"""Lightning (lightning.pytorch, lightning.fabric and their older
pytorch_lightning / lightning_fabric names): `accelerator="gpu"` or "cuda"
(or "auto" when CUDA is available, which it is once migrated) chooses
Lightning's CUDA accelerator, which hands out `torch.device("cuda", i)`,
now the npu, and then refuses it: its setup_device checks that the device
type is "cuda".  Here it accepts the npu device the migration made and
makes it current; everything else Lightning's accelerator does goes
through torch.cuda, which is migrated.  `devices=N` starts a process per
device without telling each how many there are (torchrun's
LOCAL_WORLD_SIZE): on the virtual NPU the node gets N virtual NPUs when
Lightning checks the devices it was asked for, and the processes it starts
inherit the number (unless TRANSFER_TO_NPU_VIRTUAL_DEVICES fixes it, which
a refusal then names).  The rows wait in the import hook until Lightning is
imported.
"""

import os

from .. import _C
from ._introspect import class_original
from ._row import row

ACCELERATORS = (
    "lightning.pytorch.accelerators.cuda:CUDAAccelerator",
    "pytorch_lightning.accelerators.cuda:CUDAAccelerator",
    "lightning.fabric.accelerators.cuda:CUDAAccelerator",
    "lightning_fabric.accelerators.cuda:CUDAAccelerator",
)


def setup_device(self, device):
    """Make a migrated CUDA device (an npu one) current; Lightning's advice
    on TF32 matmuls is for NVIDIA GPUs and is not given."""
    import torch

    if isinstance(device, torch.device) and device.type == "npu":
        torch.npu.set_device(device)
        return None
    return class_original(self, "setup_device")(self, device)


# Where Lightning checks that the GPUs asked for exist.
DEVICE_PARSERS = ("lightning.fabric.utilities.device_parser",
                  "lightning_fabric.utilities.device_parser")


def sanitize_gpu_ids(original):
    """_sanitize_gpu_ids(gpus, include_cuda, include_mps): first, on the
    virtual NPU, as many virtual NPUs as the CUDA devices asked for."""
    def _sanitize_gpu_ids(gpus, include_cuda=False, include_mps=False):
        import torch

        if not (include_cuda and gpus and getattr(torch.npu, "VIRTUAL", False)):
            return original(gpus, include_cuda, include_mps)
        from ..backends.virtual import devices

        if devices.provide(max(gpus) + 1):
            return original(gpus, include_cuda, include_mps)
        try:
            return original(gpus, include_cuda, include_mps)
        except Exception as error:
            error.args = (f"{error.args[0]}\n (virtual NPUs: TRANSFER_TO_NPU_VIRTUAL_DEVICES="
                          f"{os.environ.get('TRANSFER_TO_NPU_VIRTUAL_DEVICES')})",) + error.args[1:]
            raise

    return _sanitize_gpu_ids


def rows(torch):
    out = [row(f"{spec.replace(':', '.')}.setup_device",
               f"{spec.replace(':', '.')}.setup_device (npu devices)", "method",
               _C.MODE_REDIRECT, spec, "setup_device", setup_device, binds=True, kws=())
           for spec in ACCELERATORS]
    out += [row(f"{module}._sanitize_gpu_ids", f"{module}._sanitize_gpu_ids (npus provided)",
                "function", _C.MODE_REDIRECT, module, "_sanitize_gpu_ids",
                f"{__name__}:sanitize_gpu_ids()", kws=())
            for module in DEVICE_PARSERS]
    return out
