"""Lightning (lightning.pytorch, lightning.fabric and their older
pytorch_lightning / lightning_fabric names): `accelerator="gpu"` or "cuda"
(or "auto" when CUDA is available, which it is once migrated) chooses
Lightning's CUDA accelerator, which hands out `torch.device("cuda", i)`,
now the npu, and then refuses it: its setup_device checks that the device
type is "cuda".  Here it accepts the npu device the migration made and
makes it current through torch.cuda.set_device, migrated, as it does a
GPU; everything else Lightning's accelerator does goes through torch.cuda.

`devices=N` starts a process per device without telling each how many
there are (torchrun's LOCAL_WORLD_SIZE).  On the virtual NPU the node has
as many virtual NPUs as the devices asked for while Lightning checks them,
while its launcher runs (the processes it starts inherit the number; one
that runs the job's first rank in its own process keeps them) and while
its accelerator holds a device (setup_device to teardown): a later Trainer
finds the node as it was.  TRANSFER_TO_NPU_VIRTUAL_DEVICES fixes the
number, and a refusal then names it.

A checkpoint written on the npu has its storages tagged "npu:N", which
Lightning's default map_location (load_from_checkpoint) does not know as
the migrated CUDA's: they go to the cpu when its CUDA accelerator finds no
device, as "cuda:N" storages do.  The rows wait in the import hook until
Lightning is imported.
"""

import os
import weakref

from .. import _C
from ._introspect import class_original
from ._row import row

ACCELERATORS = (
    "lightning.pytorch.accelerators.cuda:CUDAAccelerator",
    "pytorch_lightning.accelerators.cuda:CUDAAccelerator",
    "lightning.fabric.accelerators.cuda:CUDAAccelerator",
    "lightning_fabric.accelerators.cuda:CUDAAccelerator",
)

# The launchers of a process per device, and how long the virtual NPUs they
# need are kept: while the launcher runs (its processes are all started
# anew), or for the rest of the process (it runs the job's first rank).
LAUNCHERS = {
    f"{package}.strategies.launchers.{module}": keep
    for package in ("lightning.pytorch", "pytorch_lightning", "lightning.fabric",
                    "lightning_fabric")
    for module, keep in (("multiprocessing:_MultiProcessingLauncher", "while_launching"),
                         ("subprocess_script:_SubprocessScriptLauncher", "for_the_process"))
}

# Where Lightning checks that the GPUs asked for exist.
DEVICE_PARSERS = ("lightning.fabric.utilities.device_parser",
                  "lightning_fabric.utilities.device_parser")

# Where Lightning's default map_location for checkpoints is.
SAVING = ("lightning.pytorch.core.saving", "pytorch_lightning.core.saving")

# What each accelerator holds from setup_device to teardown.
_held = weakref.WeakKeyDictionary()
# The number of CUDA devices Lightning last checked (the highest index asked
# for, plus one): what a launcher that cannot name its strategy's devices
# starts processes for.
_asked = [0]


def _virtual_devices():
    """The virtual NPU's devices module, or None on another backend."""
    import torch

    if not getattr(torch.npu, "VIRTUAL", False):
        return None
    from ..backends.virtual import devices

    return devices


def setup_device(self, device):
    """Make a migrated CUDA device (an npu one) current; Lightning's advice
    on TF32 matmuls is for NVIDIA GPUs and is not given."""
    import torch

    if isinstance(device, torch.device) and device.type == "npu":
        devices = _virtual_devices()
        if devices is not None and device.index is not None and self not in _held:
            token = devices.provide(device.index + 1)
            if token is not None:
                _held[self] = token
        torch.cuda.set_device(device)
        return None
    return class_original(self, "setup_device")(self, device)


def teardown(self):
    """The accelerator's teardown; the virtual NPUs its setup_device
    needed given back."""
    token = _held.pop(self, None)
    if token is not None:
        _virtual_devices().withdraw(token)
    return class_original(self, "teardown")(self)


def sanitize_gpu_ids(original):
    """_sanitize_gpu_ids(gpus, include_cuda, include_mps): on the virtual
    NPU, checked against as many virtual NPUs as the CUDA devices asked
    for."""
    def _sanitize_gpu_ids(gpus, include_cuda=False, include_mps=False):
        devices = _virtual_devices() if include_cuda and gpus else None
        if devices is None:
            return original(gpus, include_cuda, include_mps)
        _asked[0] = max(gpus) + 1
        with devices.providing(_asked[0]) as provided:
            if provided:
                return original(gpus, include_cuda, include_mps)
            try:
                return original(gpus, include_cuda, include_mps)
            except Exception as error:
                error.args = (f"{error.args[0]}\n (virtual NPUs: TRANSFER_TO_NPU_VIRTUAL_DEVICES="
                              f"{os.environ.get('TRANSFER_TO_NPU_VIRTUAL_DEVICES')})",
                              ) + error.args[1:]
                raise

    return _sanitize_gpu_ids


def default_map_location(original):
    """_default_map_location(storage, location), as for a CUDA storage when
    the location is the npu's."""
    accelerator = getattr(original, "__globals__", {}).get("CUDAAccelerator")

    def _default_map_location(storage, location):
        if (accelerator is not None and isinstance(location, str)
                and location.startswith("npu") and not accelerator.is_available()):
            return storage.cpu()
        return original(storage, location)

    return _default_map_location


def _launched_for(launcher, trainer):
    """How many virtual NPUs a launch needs: the highest npu index of its
    strategy's devices plus one (none for a job on other devices), or, when
    the launcher cannot name its strategy, as many as Lightning last
    checked."""
    strategy = getattr(launcher, "_strategy", None) or getattr(trainer, "strategy", None)
    if strategy is None:
        return _asked[0]
    indices = [d.index for d in getattr(strategy, "parallel_devices", None) or ()
               if getattr(d, "type", None) == "npu" and d.index is not None]
    return max(indices) + 1 if indices else 0


def while_launching(original):
    """A launcher's launch(), with the virtual NPUs its processes need
    provided while it runs."""
    def launch(self, function, *args, **kwargs):
        devices = _virtual_devices()
        n = _launched_for(self, kwargs.get("trainer"))
        if devices is None or not n:
            return original(self, function, *args, **kwargs)
        with devices.providing(n):
            return original(self, function, *args, **kwargs)

    return launch


def for_the_process(original):
    """A launcher's launch(), which runs the job's first rank in this
    process: the virtual NPUs the job needs are this process's from now
    on, as a launcher's LOCAL_WORLD_SIZE is."""
    def launch(self, function, *args, **kwargs):
        devices = _virtual_devices()
        n = _launched_for(self, kwargs.get("trainer"))
        if devices is not None and n:
            devices.provide(n)
        return original(self, function, *args, **kwargs)

    return launch


def _method_row(spec, name, target, what):
    path = f"{spec.replace(':', '.')}.{name}"
    return row(path, f"{path} ({what})", "method", _C.MODE_REDIRECT, spec, name, target,
               binds=True, kws=())


def rows(torch):
    out = [_method_row(spec, "setup_device", setup_device, "npu devices") for spec in ACCELERATORS]
    out += [_method_row(spec, "teardown", teardown, "the npus provided given back")
            for spec in ACCELERATORS]
    out += [_method_row(spec, "launch", f"{__name__}:{keep}()", "npus provided")
            for spec, keep in LAUNCHERS.items()]
    out += [row(f"{module}._sanitize_gpu_ids", f"{module}._sanitize_gpu_ids (npus provided)",
                "function", _C.MODE_REDIRECT, module, "_sanitize_gpu_ids",
                f"{__name__}:sanitize_gpu_ids()", kws=())
            for module in DEVICE_PARSERS]
    out += [row(f"{module}._default_map_location",
                f"{module}._default_map_location (npu storages)", "function", _C.MODE_REDIRECT,
                module, "_default_map_location", f"{__name__}:default_map_location()", kws=())
            for module in SAVING]
    return out
