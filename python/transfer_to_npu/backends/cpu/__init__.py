"""The cpu backend: CUDA code run on the host, for the reference run of
``compare`` where the machine has no GPU (``TRANSFER_TO_NPU_BACKEND=cpu``).

The mapping table is the one the NPU gets, with the host as target
(``TARGETS`` in ``backends/__init__.py``): ``'cuda:N'`` becomes ``'cpu'``,
``'nccl'`` becomes ``'gloo'``, and ``torch.cuda.X`` the ``X`` of this module,
which answers for the host as a GPU machine answers for its GPU: one
device (one per process of a launcher, as a GPU each), ``synchronize``
with nothing to wait for, memory figures of 0, a generator of the device's
own for its seed and state functions, pinned memory (pinned.py) and ``torch.accelerator``
(accelerator.py) as on CUDA, so that the script takes the paths it takes
there.  Autocast keeps the script's precision policy: ``torch.autocast('cuda',
dtype)`` is the host's autocast, casting by CUDA's lists
(``autocast_policy.py``), float16 by default as on CUDA; a GradScaler
scales as on the device.  It builds on nothing but torch's CPU device: not
on the virtual NPU (it runs on every torch the patcher supports) and not
on torch_npu (on an Ascend machine it is the only reference there is).
"""

import functools
import os
import threading
import time

import torch

NAME = "cpu"

#: The device torch reports for a CUDA device on the host.
DEVICE_NAME = "CPU (reference run)"


def install():
    """The host's answers that torch's dispatcher gives: pinning, autocast
    by CUDA's lists (once per process)."""
    global _installed
    if _installed:
        return
    from . import pinned

    pinned.register()
    _register_autocast()
    # CUDA's default autocast dtype, where the host's is bfloat16 (for the
    # main thread, where torch keeps it; autocast_init gives it to every
    # region asked for on 'cuda').
    if hasattr(torch, "set_autocast_dtype"):
        torch.set_autocast_dtype("cpu", torch.float16)
    _installed = True


_installed = False
_libraries = []


def _register_autocast():
    """CUDA's autocast policy for the host's autocast key, in place of the
    CPU's own: its ops cast as on CUDA, and the CPU's others not at all."""
    import warnings

    from ..autocast_policy import Policy

    key = "AutocastCPU"
    kernels = Policy("cpu", key).kernels()
    cpu_ops = [q[len("aten::"):] for q in
               torch._C._dispatch_get_registrations_for_dispatch_key(key)
               if q.startswith("aten::")]
    lib = torch.library.Library("aten", "IMPL")
    with warnings.catch_warnings():
        # torch says once that it replaces a kernel of its own: meant here.
        warnings.simplefilter("ignore")
        # One kernel an op and key a library: CUDA's where it has one.
        for name in cpu_ops:
            if name not in kernels:
                lib.impl(name, torch.library.fallthrough_kernel, key)
        for name, make in kernels.items():
            lib.impl(name, make(), key)
    _libraries.append(lib)


# --- devices ----------------------------------------------------------------

def is_available():
    return True


def is_initialized():
    return True


def init():
    pass


def device_count():
    """One device, or one per process of the node under a launcher (which
    gives each process a GPU of its own)."""
    try:
        return max(1, int(os.environ.get("LOCAL_WORLD_SIZE", "1")))
    except ValueError:
        return 1


def _check(device):
    """A device argument as CUDA's functions take it (None, an index, a
    string, a torch.device), checked; the host has only one to give."""
    if device is None or isinstance(device, int) and not isinstance(device, bool):
        return
    if isinstance(device, str):
        device = torch.device(device)
    if isinstance(device, torch.device):
        if device.type != "cpu":
            raise ValueError(f"expected a cuda device, got {device!r}")
        return
    raise TypeError(f"device must be None, an int, a str or a torch.device, got {device!r}")


def current_device():
    return 0


def set_device(device):
    _check(device)


def synchronize(device=None):
    """Nothing to wait for: host work is done when the call returns."""
    _check(device)


def get_device_name(device=None):
    _check(device)
    return DEVICE_NAME


def get_device_capability(device=None):
    _check(device)
    return (0, 0)


def is_bf16_supported(including_emulation=True):
    return True


class _Properties:
    """What get_device_properties gives, for the host."""

    def __init__(self):
        self.name = DEVICE_NAME
        self.total_memory = _host_memory()
        self.multi_processor_count = os.cpu_count() or 1
        self.major, self.minor = 0, 0
        self.is_integrated = 1


def _host_memory():
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 0


def get_device_properties(device=None):
    _check(device)
    return _Properties()


class device:
    """``with torch.cuda.device(i):``: the host is every device."""

    def __init__(self, device):
        _check(device)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def device_of(obj):
    return device(None)


# --- streams and events: host work is synchronous ---------------------------

class Stream(torch.cpu.Stream):
    """A CUDA stream on the host, made with CUDA's arguments and with its
    methods: host work is done when each call returns, so there is nothing
    to wait for."""

    def __init__(self, device=None, priority=0, **kwargs):
        _check(device)
        super().__init__()
        self.priority = priority

    @staticmethod
    def priority_range():
        """(least, greatest) priority, as CUDA's builds answer: work on the
        host runs in one queue, of one priority."""
        return (0, 0)

    def query(self):
        return True

    def synchronize(self):
        pass

    def record_event(self, event=None):
        event = Event() if event is None else event
        event.record(self)
        return event


_default = []  # the default stream, made at the first ask
_current = threading.local()


def default_stream(device=None):
    _check(device)
    if not _default:
        _default.append(Stream())
    return _default[0]


def current_stream(device=None):
    return getattr(_current, "stream", None) or default_stream(device)


def set_stream(stream):
    if stream is not None:
        _current.stream = stream


class StreamContext:
    """``with torch.cuda.stream(s):``: ``s`` is the current stream (of its
    device: ``_current``, ``_set``) inside the block."""

    def __init__(self, stream):
        self.stream = stream
        self._previous = None

    def __enter__(self):
        if self.stream is not None:
            self._previous = self._current(self.stream)
            self._set(self.stream)
        return self.stream

    def __exit__(self, *exc):
        if self.stream is not None:
            self._set(self._previous)
        return False

    @staticmethod
    def _current(stream):
        return current_stream()

    @staticmethod
    def _set(stream):
        set_stream(stream)


def stream(stream):
    return StreamContext(stream)


class HostEvent:
    """A CUDA event where work is done when each call returns (the host's,
    and the virtual NPU's): its time is taken when it is recorded, and
    there is never anything to wait for."""

    def record(self, stream=None):
        self._time = time.perf_counter()

    def wait(self, stream=None):
        pass

    def query(self):
        return True

    def synchronize(self):
        pass

    def elapsed_time(self, end_event):
        """Milliseconds between this event and ``end_event``."""
        if not (self.enable_timing and end_event.enable_timing):
            raise RuntimeError("elapsed_time: both events must be created with enable_timing=True")
        if self._time is None or end_event._time is None:
            raise RuntimeError("elapsed_time: both events must be recorded first")
        return (end_event._time - self._time) * 1000.0


class Event(HostEvent):
    # external: whether a CUDA graph capturing the event records it as a
    # node of its own; there are no graphs to capture here.
    def __init__(self, enable_timing=False, blocking=False, interprocess=False, external=False):
        self.enable_timing = enable_timing
        self._time = None


# --- memory: host memory is not the device's to count -----------------------

def _zero(device=None):
    _check(device)
    return 0


memory_allocated = max_memory_allocated = memory_reserved = max_memory_reserved = _zero


def _nothing(device=None):
    _check(device)


reset_peak_memory_stats = reset_max_memory_allocated = _nothing
reset_accumulated_memory_stats = empty_cache = _nothing


def memory_stats(device=None):
    _check(device)
    return {}


def memory_summary(device=None, abbreviated=False):
    _check(device)
    return "the host's memory is not counted in the reference run\n"


def mem_get_info(device=None):
    _check(device)
    total = _host_memory()
    try:
        free = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        free = total
    return free, total


# --- random numbers ----------------------------------------------------------

# The device's generator, which torch.cuda's seed and state functions set
# and read (torch.manual_seed() and torch.seed() call them).  Nothing draws
# from it: in a compare each run draws the device's numbers on the host,
# from the host's generator (accuracy/draws.py), which on the host is
# where they come from anyway.
GENERATOR = torch.Generator()


def manual_seed(seed):
    GENERATOR.manual_seed(int(seed))


manual_seed_all = manual_seed


def seed():
    GENERATOR.seed()


seed_all = seed


def initial_seed():
    return GENERATOR.initial_seed()


def get_rng_state(device="cpu"):
    return GENERATOR.get_state()


def set_rng_state(new_state, device="cpu"):
    GENERATOR.set_state(new_state)


def get_rng_state_all():
    return [get_rng_state()]


def set_rng_state_all(new_states):
    for state in new_states[:1]:
        set_rng_state(state)


default_generators = (GENERATOR,)


# --- Tensor.cuda(), Module.cuda() -------------------------------------------

def tensor_cuda(self, device=None, non_blocking=False, memory_format=torch.preserve_format):
    """``Tensor.cuda()`` on the host: the tensor itself (as ``.cpu()``)."""
    _check(device)
    return self.to("cpu", non_blocking=non_blocking, memory_format=memory_format)


def module_cuda(self, device=None):
    """``Module.cuda()`` on the host."""
    _check(device)
    return self.cpu()


# --- autocast, DDP without device ids ---------------------------------------

def autocast_init(original):
    """torch.autocast('cuda', ...) (every spelling reaches it) is the
    host's autocast, in CUDA's default dtype (float16) where none is
    given: the host's own default is bfloat16."""

    @functools.wraps(original)
    def __init__(self, device_type, dtype=None, enabled=True, cache_enabled=None):
        if isinstance(device_type, str) and device_type.split(":")[0] == "cuda":
            device_type = "cpu"
            if dtype is None:
                dtype = torch.float16
        original(self, device_type, dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)

    return __init__


def ddp_init(original):
    """DistributedDataParallel on the host takes no device ids (torch
    refuses them for a CPU module)."""

    @functools.wraps(original)
    def __init__(self, module, device_ids=None, output_device=None, *args, **kwargs):
        original(self, module, None, None, *args, **kwargs)

    return __init__
