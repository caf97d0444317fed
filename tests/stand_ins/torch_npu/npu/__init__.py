"""torch_npu.npu of the stand-in: the virtual NPU's device module, with the
calls tests look for recorded in ``calls``."""
import functools

from transfer_to_npu.backends.virtual import npu as _virtual

calls = []

for _name in dir(_virtual):
    if not _name.startswith("__") and _name != "amp":
        globals()[_name] = getattr(_virtual, _name)

from . import amp  # noqa: E402  (its own, not the virtual NPU's)


def _recorded(fn):
    @functools.wraps(fn)
    def call(*args, **kwargs):
        calls.append(fn.__name__)
        return fn(*args, **kwargs)

    return call


synchronize = _recorded(_virtual.synchronize)
set_device = _recorded(_virtual.set_device)
device_count = _recorded(_virtual.device_count)


class _HF32Switch:
    """torch_npu's ``torch.npu.matmul`` and ``torch.npu.conv``: an
    ``allow_hf32`` switch, each value set recorded in ``history``."""

    def __init__(self, default):
        self._value = default
        self.history = []

    @property
    def allow_hf32(self):
        return self._value

    @allow_hf32.setter
    def allow_hf32(self, value):
        self.history.append(value)
        self._value = value


# torch_npu's defaults: HF32 off for matmuls, on for convolutions.
matmul = _HF32Switch(False)
conv = _HF32Switch(True)
