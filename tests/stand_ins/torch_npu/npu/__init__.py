"""torch_npu.npu of the stand-in: the virtual NPU's device module (or, with
no kernels, the few functions a device module needs), with the calls tests
look for recorded in ``calls`` (names) and ``arguments`` (name -> the last
call's positional arguments)."""
import functools

from .. import KERNELS

calls = []
arguments = {}


def _recorded(fn):
    @functools.wraps(fn)
    def call(*args, **kwargs):
        calls.append(fn.__name__)
        arguments[fn.__name__] = args
        return fn(*args, **kwargs)

    return call


if KERNELS:
    from transfer_to_npu.backends.virtual import npu as _device
else:
    from . import _bare as _device

for _name in dir(_device):
    if not _name.startswith("__") and _name != "amp":
        globals()[_name] = getattr(_device, _name)
if KERNELS:
    from . import amp  # noqa: E402  (its own, not the virtual NPU's)

# torch_npu's names for what CUDA calls otherwise (graphs, the pluggable
# allocator), and its memory module (the allocator's history).
from . import graphs, memory  # noqa: E402
from .graphs import NPUGraph, graph, graph_pool_handle, make_graphed_callables  # noqa: E402
from .memory import NPUPluggableAllocator  # noqa: E402

synchronize = _recorded(_device.synchronize)
set_device = _recorded(_device.set_device)
device_count = _recorded(_device.device_count)


# Where torch_npu names a parameter otherwise than CUDA, so does the
# stand-in: torch_npu's StreamContext(stream_ctx), get_device_name(device_name).
class StreamContext(getattr(_device, "StreamContext", object)):
    def __init__(self, stream_ctx):
        calls.append("StreamContext")
        arguments["StreamContext"] = (stream_ctx,)
        self.stream = stream_ctx
        if KERNELS:
            super().__init__(stream_ctx)

    if not KERNELS:
        def __enter__(self):
            return self.stream

        def __exit__(self, *exc):
            return False


def get_device_name(device_name=None):
    calls.append("get_device_name")
    arguments["get_device_name"] = (device_name,)
    return _device.get_device_name(device_name)


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
