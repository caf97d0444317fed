"""Streams and events of the virtual NPU.

Every op of the virtual NPU runs synchronously on the host, so a stream is
an ordering the host already keeps and an event's timestamp is exact: it is
taken when the event is recorded.
"""

import threading

import torch

from ..cpu import HostEvent
from ..cpu import StreamContext as HostStreamContext
from . import devices

__all__ = ["Stream", "Event", "stream", "current_stream", "default_stream", "set_stream",
           "StreamContext"]


class Stream(torch.Stream):
    """A queue of work on a virtual NPU (``torch.npu.Stream``).  A
    ``torch.Stream``, so that ``Tensor.record_stream`` and torch's own
    stream code (FSDP's, DDP's) take it."""

    def __new__(cls, device=None, priority=0, **kwargs):
        return super().__new__(cls, device=devices.as_device(device), priority=priority)

    def __init__(self, device=None, priority=0, **kwargs):
        # Kept here: the C++ stream under it is the host's one stream,
        # whose device index a Python-defined device cannot set.
        self._device = devices.as_device(device)
        self.priority = priority

    @property
    def device(self):
        return self._device

    @property
    def device_index(self):
        return self._device.index

    def query(self):
        return True

    @staticmethod
    def priority_range():
        """(least, greatest) priority, as CUDA's builds answer: work on the
        host runs in one queue, of one priority."""
        return (0, 0)

    def synchronize(self):
        pass

    def wait_event(self, event):
        pass

    def wait_stream(self, stream):
        pass

    def record_event(self, event=None):
        event = Event() if event is None else event
        event.record(self)
        return event

    def set_data_preprocess_stream(self, is_data_preprocess_stream=False):
        """torch_npu's hint that the stream feeds data: nothing to do here."""

    # `with torch.Stream('cuda') as s:` makes it current, as
    # torch.npu.stream(s) does (torch.Stream's own would set torch's).
    def __enter__(self):
        context = StreamContext(self)
        self._contexts = getattr(self, "_contexts", [])
        self._contexts.append(context)
        return context.__enter__()

    def __exit__(self, *exc):
        return self._contexts.pop().__exit__(*exc)

    # Two streams made apart are apart, as on a real device (torch.Stream
    # alone would compare them by the one stream the host really has).
    def __eq__(self, other):
        return isinstance(other, Stream) and other is self

    def __ne__(self, other):
        return not self.__eq__(other)

    def __hash__(self):
        return id(self)

    def __repr__(self):
        return f"<torch.npu.Stream device={self.device} at {id(self):#x}>"


class Event(HostEvent, torch.Event):
    """A point in a stream, with its host time when timing is enabled
    (``torch.npu.Event``; the host's timing, HostEvent).  A ``torch.Event``, so that torch's own stream
    code (``stream.wait_event``) takes it; there is never anything to wait
    for."""

    _name = "torch.npu.Event"

    # external: whether a CUDA graph capturing the event records it as a
    # node of its own; there are no graphs to capture here.
    def __new__(cls, enable_timing=False, blocking=False, interprocess=False, external=False):
        return cls._made(None, enable_timing, blocking, interprocess)

    @classmethod
    def _made(cls, device, enable_timing, blocking, interprocess):
        # Whole when made, with no __init__: torch.Event(device='cuda')
        # reaches __new__ migrated, and __init__ as written.
        device = devices.as_device(device)
        event = torch.Event.__new__(cls, device=device, enable_timing=enable_timing,
                                    blocking=blocking, interprocess=interprocess)
        event._device = device
        event.enable_timing = enable_timing
        event.blocking = blocking
        event.interprocess = interprocess
        event._time = None
        return event

    @property
    def device(self):
        return self._device

    def __repr__(self):
        state = "recorded" if self._time is not None else "not recorded"
        return f"<{self._name} {state}>"


class DeviceEvent(Event):
    """``torch.Event`` on the npu (``torch.Event(device='npu')``, and
    ``torch.Event()`` with the npu as the accelerator), which torch itself
    cannot synchronise or time on a device defined in Python: an npu event
    made with torch.Event's arguments."""

    _name = "torch.Event"

    def __new__(cls, device=None, *, enable_timing=False, blocking=False, interprocess=False):
        return cls._made(device, enable_timing, blocking, interprocess)


_default_streams = {}
_local = threading.local()


def default_stream(device=None):
    index = devices.as_device(device).index
    found = _default_streams.get(index)
    if found is None:
        found = _default_streams.setdefault(index, Stream(index))
    return found


def current_stream(device=None):
    index = devices.as_device(device).index
    current = getattr(_local, "streams", {}).get(index)
    return current if current is not None else default_stream(index)


# The parameters are named as CUDA's and torch_npu's are: code passes them
# by name (torch.cuda.stream(stream=s)).

def set_stream(stream):
    if stream is None:
        return
    if not hasattr(_local, "streams"):
        _local.streams = {}
    _local.streams[stream.device.index] = stream


class StreamContext(HostStreamContext):
    """``with torch.npu.stream(s):``: make ``s`` the current stream of its
    npu (named as CUDA names it, or as torch_npu does: stream_ctx)."""

    def __init__(self, stream=None, *, stream_ctx=None):
        super().__init__(devices.either("stream", stream, "stream_ctx", stream_ctx))

    @staticmethod
    def _current(stream):
        return current_stream(stream.device)

    @staticmethod
    def _set(stream):
        set_stream(stream)


def stream(stream):
    return StreamContext(stream)
