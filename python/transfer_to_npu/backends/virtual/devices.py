"""Which virtual NPUs exist and which one is current.

``TRANSFER_TO_NPU_VIRTUAL_DEVICES`` sets how many the machine has (default
1, or under a launcher such as torchrun or DeepSpeed's one per process of
the node, ``LOCAL_WORLD_SIZE`` or ``LOCAL_SIZE``).
``ASCEND_RT_VISIBLE_DEVICES`` then selects among them as on real hardware:
a comma-separated list of device ids, renumbered from 0 in the order
given; the list ends at its first entry that names no device.  The current
device is per thread, as on real hardware, and kept by the C core, which
places the results of ops that name no device index.
"""

import contextlib
import functools
import itertools
import os
import reprlib
import threading
import warnings

import torch

from ... import _C


def _launched_per_node():
    """The processes a launcher runs on this node (torchrun's and
    torch.distributed.launch's LOCAL_WORLD_SIZE, DeepSpeed's LOCAL_SIZE),
    or None outside one."""
    for name in ("LOCAL_WORLD_SIZE", "LOCAL_SIZE"):
        try:
            n = int(os.environ.get(name, ""))
        except ValueError:
            continue
        return n if 1 <= n <= _C.MAX_DEVICE_INDEX + 1 else None
    return None


@functools.lru_cache(maxsize=None)
def physical_count():
    """Number of virtual NPUs on this 'machine'."""
    raw = os.environ.get("TRANSFER_TO_NPU_VIRTUAL_DEVICES")
    if raw is None:
        # Under a launcher, one per process of the node, as a GPU script
        # launched so expects (it calls set_device(LOCAL_RANK)).
        return _launched_per_node() or 1
    try:
        n = int(raw)
    except ValueError:
        raise ValueError(
            f"TRANSFER_TO_NPU_VIRTUAL_DEVICES must be a positive integer, got {raw!r}") from None
    if not 1 <= n <= _C.MAX_DEVICE_INDEX + 1:
        raise ValueError(
            f"TRANSFER_TO_NPU_VIRTUAL_DEVICES must be between 1 and {_C.MAX_DEVICE_INDEX + 1}, "
            f"got {raw!r}")
    return n


@functools.lru_cache(maxsize=None)
def visible():
    """The physical ids of the visible devices, in their visible order."""
    n = physical_count()
    raw = os.environ.get("ASCEND_RT_VISIBLE_DEVICES")
    if raw is None:
        return tuple(range(n))
    if raw.strip() == "":
        return ()  # as CUDA_VISIBLE_DEVICES="": no device
    ids = []
    for item in raw.split(","):
        item = item.strip()
        if not item.isdigit() or int(item) >= n or int(item) in ids:
            if item.startswith("-") and item[1:].isdigit():
                break  # "-1": no device, on purpose
            warnings.warn(
                f"ASCEND_RT_VISIBLE_DEVICES={raw!r}: {item!r} names no virtual NPU (there "
                f"{'is' if n == 1 else 'are'} {n}, set by TRANSFER_TO_NPU_VIRTUAL_DEVICES); "
                f"the devices before it are visible", RuntimeWarning, stacklevel=2)
            break
        ids.append(int(item))
    return tuple(ids)


def _after_fork_in_child():
    # A launcher that forks its workers (torch elastic's 'fork' start
    # method, as accelerate's notebook_launcher uses it) tells each how many
    # devices the node has (LOCAL_WORLD_SIZE) after the fork: the numbers
    # are read again at their next use (recount()).
    global _provided_lock
    _provided_lock = threading.Lock()  # a thread holding it is not in the child
    physical_count.cache_clear()
    visible.cache_clear()


os.register_at_fork(after_in_child=_after_fork_in_child)


def count():
    """Number of visible virtual NPUs."""
    return len(visible())


# The numbers of virtual NPUs provided for launchers (provide()), by token,
# while they hold; the variable's value as this process set it for them.
_provided = {}
_tokens = itertools.count(1)
_provided_lock = threading.Lock()
_set_for_them = None


def _set_provided():
    global _set_for_them
    if _provided:
        _set_for_them = os.environ["TRANSFER_TO_NPU_VIRTUAL_DEVICES"] = str(max(_provided.values()))
    else:
        if os.environ.get("TRANSFER_TO_NPU_VIRTUAL_DEVICES") == _set_for_them:
            del os.environ["TRANSFER_TO_NPU_VIRTUAL_DEVICES"]
        _set_for_them = None
    physical_count.cache_clear()
    visible.cache_clear()


def provide(n):
    """At least ``n`` virtual NPUs on this node until ``withdraw(token)``,
    for a launcher about to start a process per device without saying how
    many to each (Lightning's ``devices=N``, as torchrun's LOCAL_WORLD_SIZE
    says), unless TRANSFER_TO_NPU_VIRTUAL_DEVICES, set by the user (or by
    the process that started this one), fixes the number.  The processes
    started meanwhile inherit the number.  The token, or None when there
    cannot be ``n``."""
    with _provided_lock:
        token = next(_tokens)
        if n <= count():
            return token
        raw = os.environ.get("TRANSFER_TO_NPU_VIRTUAL_DEVICES")
        if (raw is not None and raw != _set_for_them) or not 1 <= n <= _C.MAX_DEVICE_INDEX + 1:
            return None
        _provided[token] = n
        _set_provided()
    if n <= recount():
        return token
    withdraw(token)  # ASCEND_RT_VISIBLE_DEVICES hides some
    return None


def withdraw(token):
    """The virtual NPUs of provide()'s ``token`` given back; the calling
    thread, if it was on one of them, is on npu:0 again.  Tensors still on
    them stay usable (the C core's count does not shrink)."""
    with _provided_lock:
        if _provided.pop(token, None) is None:
            return
        _set_provided()
    # The job made one of its npus current on this thread (Lightning's
    # setup_device does); the next job finds the node's, npu:0 first.
    if current() >= count():
        set_current(0)


@contextlib.contextmanager
def providing(n):
    """At least ``n`` virtual NPUs while the block runs (provide()); it is
    given whether there are."""
    token = provide(n)
    try:
        yield token is not None
    finally:
        withdraw(token)


def recount():
    """The number of visible npus as read now, the generators of those
    added made: what the C core asks for an index beyond the number it
    has."""
    from . import random

    n = count()
    random.grow(n)
    return n


# The current device is kept per thread by the C core, which also places
# the results of ops that name no device index and serves Tensor.npu().
current = _C.current_device
set_current = _C.set_current_device


def check_index(index):
    """index, if npu:index exists; else RuntimeError ("Invalid device
    ordinal"), as the C core raises for a tensor made there."""
    return _C.check_device_index(index)


def is_negative_index(device):
    """Whether device is a negative int, which CUDA's set_device and device
    context take for 'no change'."""
    return isinstance(device, int) and not isinstance(device, bool) and device < 0


def index_of(device, optional=True):
    """The device index that ``device`` (int, str, torch.device, None) names."""
    if device is None:
        if optional:
            return current()
        raise ValueError("expected an npu device, got None")
    if isinstance(device, bool):
        raise TypeError(f"expected an npu device, got {device!r}")
    if isinstance(device, int):
        return check_index(device)
    if isinstance(device, str):
        device = torch.device(device)
    if isinstance(device, torch.device):
        if device.type != "npu":
            raise ValueError(f"expected an npu device, got {str(device)!r}")
        return current() if device.index is None else check_index(device.index)
    if hasattr(device, "device") and isinstance(device.device, torch.device):
        return index_of(device.device)  # a Stream or a tensor
    # reprlib: a container that nests deep or holds itself still names its
    # value, where repr() would raise RecursionError.
    raise TypeError(f"expected an npu device, got {type(device).__name__} "
                    f"{reprlib.repr(device)}")


def either(name, value, npu_name, npu_value):
    """The argument of a parameter that torch_npu names otherwise than CUDA
    (get_device_name's device, torch_npu's device_name), given under
    either name; under both, a TypeError naming them."""
    if npu_value is None:
        return value
    if value is not None:
        raise TypeError(f"{name}={value!r} and {npu_name}={npu_value!r} name one argument: "
                        f"give one of them")
    return npu_value


def as_device(device=None):
    return torch.device("npu", index_of(device))


def install_autograd_workaround():
    """Run backward on the thread that asks for it, never on a per-device
    worker of torch's autograd engine.

    The engine gives each device index below the device count a worker
    thread and a queue, and a device defined in Python reports a count of
    one: backward through npu:1 and up would trip an internal assert
    (``device.index() < device_ready_queues_.size()``).  With autograd
    multithreading off on a thread (a thread-local switch), the engine runs
    every node on that thread's own queue instead; a graph task keeps the
    switch of the thread that made it, wherever it then runs.  So the
    switch is turned off on every thread that makes graph tasks: this one,
    any thread calling backward() or grad() or distributed autograd's
    backward(), and the RPC agent's threads, on which a process makes the
    graph task of the gradients other processes send it.  (The virtual
    NPU's kernels are the host's anyway: on a worker thread they would only
    contend with the calling thread's idle OpenMP pool for the same
    cores.)"""
    import torch.autograd.graph as graph

    _backward_here()
    run = _backward_here_first(graph._engine_run_backward)
    # backward() and grad() call it by the name torch.autograd imported.
    graph._engine_run_backward = run
    torch.autograd._engine_run_backward = run
    if torch.distributed.is_available() and torch.distributed.rpc.is_available():
        import torch.distributed.autograd as dist_autograd
        import torch.distributed.rpc as rpc

        dist_autograd.backward = _backward_here_first(dist_autograd.backward)
        # init_rpc calls it by its module's name.
        rpc._init_rpc_backend = _rpc_threads_backward_here(rpc._init_rpc_backend)


def _backward_here():
    if torch._C._is_multithreading_enabled():
        torch._C._set_multithreading_enabled(False)


def _backward_here_first(fn):
    """fn, run with the switch off on the calling thread; an exception of a
    Python hook that torch's engine lost on its way out (see
    take_kept_error in src/virtual/callbacks.c) raised as it was, where
    torch raises SystemError."""
    @functools.wraps(fn)
    def backward_here(*args, **kwargs):
        _backward_here()
        _C.take_kept_error()  # one no backward took
        try:
            return fn(*args, **kwargs)
        except SystemError:
            kept = _C.take_kept_error()
            if kept is None:
                raise
        raise kept

    return backward_here


# RPC worker threads waiting for each other: token -> threading.Barrier.
_rpc_barriers = {}
_tokens = itertools.count()


def _rpc_threads_backward_here(init):
    """After the RPC agent starts, one request to itself per worker thread,
    each held until all are running, so that every thread runs one and
    turns the switch off.  The caller does not wait for them."""
    @functools.wraps(init)
    def _init_rpc_backend(*args, **kwargs):
        import torch.distributed.rpc as rpc

        init(*args, **kwargs)
        agent = rpc.api._get_current_rpc_agent()
        n = int(agent.get_metrics().get("agent.thread_pool_size", 0))
        if n <= 0:
            return None
        token = next(_tokens)
        _rpc_barriers[token] = threading.Barrier(n)
        me = agent.get_worker_info().name
        for _ in range(n):
            rpc.rpc_async(me, _on_rpc_thread, args=(token,))
        return None

    return _init_rpc_backend


def _on_rpc_thread(token, timeout=30.0):
    """Run by each RPC worker thread once (see _rpc_threads_backward_here);
    a thread held by a long request leaves the others waiting at most
    ``timeout`` seconds."""
    _backward_here()
    barrier = _rpc_barriers.get(token)
    if barrier is None:
        return
    try:
        if barrier.wait(timeout) == 0:
            _rpc_barriers.pop(token, None)
    except threading.BrokenBarrierError:
        _rpc_barriers.pop(token, None)
