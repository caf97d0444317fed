"""Lightning (lightning.pytorch, lightning.fabric and their older
pytorch_lightning / lightning_fabric names): `accelerator="gpu"` or "cuda"
(or "auto" when CUDA is available, which it is once migrated) chooses
Lightning's CUDA accelerator, which hands out `torch.device("cuda", i)`,
now the npu, and then refuses it: its setup_device checks that the device
type is "cuda".  Here it accepts the npu device the migration made and
makes it current; everything else Lightning's accelerator does goes
through torch.cuda, which is migrated.  The rows wait in the import hook
until Lightning is imported.
"""

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


def rows(torch):
    return [row(f"{spec.replace(':', '.')}.setup_device",
                f"{spec.replace(':', '.')}.setup_device (npu devices)", "method",
                _C.MODE_REDIRECT, spec, "setup_device", setup_device, binds=True, kws=())
            for spec in ACCELERATORS]
