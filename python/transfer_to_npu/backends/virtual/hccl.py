"""``hccl`` on the virtual NPU: a process-group backend whose collectives
run by gloo on the npu tensors' host memory.

``init_process_group('hccl')`` (and ``'nccl'``, migrated) makes torch's own
``ProcessGroup`` with a gloo backend registered for the ``npu`` device, so
what torch builds on process groups (DDP's reducer, FSDP's ``fully_shard``,
DeviceMesh, ``new_group``, object collectives) works as with any C++
backend.

A collective on npu tensors reaches torch's c10d op (``c10d::allreduce_``,
``c10d::broadcast_`` ...) under the PrivateUse1 key, whose kernel here
aliases every npu tensor as a cpu tensor over the same bytes
(``_C.to_host``: no copy) and calls the op again: its cpu kernel hands the
aliases to the backend that the group registered for ``npu``.  gloo writes
its results into the aliases, that is, into the npu tensors themselves, and
the ``Work`` it returns is returned unchanged, so ``async_op=True`` stays
asynchronous.  gloo does every reduction torch defines for it on every
dtype, AVG and bf16 included.
"""

import os
import threading
import warnings
import weakref

import torch
import torch.distributed as dist
from torch._C._distributed_c10d import ProcessGroup, Work

from ... import _C
from . import register_kernel


_NPU = torch.device("npu")
_CPU = torch.device("cpu")

# The group each process group's npu collectives run on (see _route), by
# process group; dropped with the group.
_routes = weakref.WeakKeyDictionary()

# Registrations live as long as this library does.
_libraries = []

# Collectives that may still be running, with the tensors they were given
# (the npu tensors and their host aliases).  Whoever drops the last
# reference to one of these runs Python (torch frees a tensor's Python
# object, then ours free the npu memory), taking the interpreter lock.  On
# a gloo thread after the interpreter has begun to finalise, that ends the
# thread in the middle of a C++ destructor, and the process aborts
# ("terminate called without an active exception") after the script
# itself has finished.  So the last reference stays here, on a Python
# thread, until the collective is seen complete; those still running at
# exit are kept for good (keep_running_at_exit).
_in_flight = []
_in_flight_lock = threading.Lock()


def _after_fork_in_child():
    global _in_flight_lock
    _in_flight_lock = threading.Lock()  # a thread holding it is not in the child


os.register_at_fork(after_in_child=_after_fork_in_child)


def create(opts, backend_options):
    """The backend of one process group for the npu: gloo, on the group's
    store, ranks and timeout."""
    gloo = dist.ProcessGroupGloo(opts.store, opts.group_rank, opts.group_size, opts.timeout)
    # What torch records for its own gloo groups (debug and trace output).
    gloo.options.global_ranks_in_group = list(opts.global_ranks_in_group)
    gloo.options.group_name = opts.group_id
    return gloo


def _no_npu_backend(pg):
    try:
        name = dist.get_backend(pg)
    except (RuntimeError, ValueError):
        name = "?"
    return RuntimeError(
        f"process group {pg.group_name!r} (backend {name!r}) has no backend for npu tensors: "
        f"create it with backend='hccl' (or 'nccl', which is migrated to it), or "
        f"'cpu:gloo,npu:hccl' for both cpu and npu tensors")


def _route(boxed):
    """A group whose cpu backend is ``boxed``'s npu backend: the c10d ops'
    cpu kernels, given host aliases, then run on the backend the group has
    for npu tensors (not on its cpu one: 'cpu:gloo,npu:hccl' keeps them
    apart, and a group may have no cpu backend at all)."""
    pg = ProcessGroup.unbox(boxed)
    route = _routes.get(pg)
    if route is None:
        if _NPU not in pg._device_types:
            raise _no_npu_backend(pg)
        backend = pg._get_backend(_NPU)
        route = ProcessGroup(pg.rank(), pg.size())
        # Registering a backend gives it the group's bound device: keep the
        # one the real group gave it.
        route.bound_device_id = pg.bound_device_id
        route._set_default_backend(ProcessGroup.BackendType.CUSTOM)
        route._register_backend(_CPU, ProcessGroup.BackendType.CUSTOM, backend)
        # Kept as the Python ProcessGroup, boxed per call: when the route
        # outlives its group, it is the last owner of gloo, whose destructor
        # joins gloo's threads, and a ProcessGroup (unlike a boxed one) lets
        # go of the interpreter lock while that runs.
        _routes[pg] = route
    return route.boxed()


def _host(value):
    if isinstance(value, torch.Tensor):
        return _C.to_host(value) if value.device.type == "npu" else value
    if isinstance(value, list):
        return [_host(v) for v in value]
    return value


# The collectives "into a tensor" (all_gather_into_tensor,
# reduce_scatter_tensor and their coalesced forms), whose output and input
# NCCL takes as flat memory: an output of any shape with world_size times
# the input's elements.  gloo splits the output along its first dimension
# and wants each part shaped like the input, so both go to it flattened.
_FLAT = frozenset({"c10d::_allgather_base_", "c10d::_reduce_scatter_base_",
                   "c10d::allgather_into_tensor_coalesced_",
                   "c10d::reduce_scatter_tensor_coalesced_"})


def _flat(value):
    if isinstance(value, torch.Tensor):
        # A view, so that gloo writes into the npu tensor's bytes; NCCL
        # refuses non-contiguous tensors, and so will gloo.
        return value.view(-1) if value.is_contiguous() else value
    return [_flat(v) for v in value]


def _kernel(op):
    """The PrivateUse1 kernel of one c10d op."""
    names = [a.name for a in op._schema.arguments]
    group = names.index("process_group")
    # Ops that return their first argument (the tensors written) and a Work.
    returns_tensors = len(op._schema.returns) == 2
    flat = op._schema.name in _FLAT

    def run(*args, **kwargs):
        host = [_host(a) for a in args]
        host[group] = _route(args[group])
        if flat:
            host[0], host[1] = _flat(host[0]), _flat(host[1])
        result = op(*host, **kwargs)
        # Held without the groups: a boxed group kept here could become the
        # last owner of its gloo backend, whose destructor, run then with
        # the interpreter lock held, waits for gloo's threads, one of which
        # may be waiting for that lock to free a tensor's Python object.
        held = list(args)
        held[group] = host[group] = None
        _hold(result[1] if returns_tensors else result, (held, host, result))
        if returns_tensors:
            return args[0], result[1]
        return result

    run.__name__ = run.__qualname__ = f"npu_{op.__name__}"
    return run


def _hold(boxed_work, tensors):
    """Keep ``tensors`` until the collective of ``boxed_work`` is complete;
    let go of those of the collectives that are."""
    work = Work.unbox(boxed_work)
    with _in_flight_lock:
        before = _in_flight[:]
        _in_flight[:] = [held for held in before if not held[0].is_completed()]
        _in_flight.append((work, tensors))
    # `before` goes here, outside the lock: freeing tensors runs Python.


def keep_running_at_exit():
    """At exit, before the interpreter finalises: what collectives still
    hold is never let go of, so no gloo thread drops the last reference."""
    with _in_flight_lock:
        _C.keep_to_exit(list(_in_flight))
        _in_flight.clear()


def _ops():
    """Every c10d op torch gives a PrivateUse1 kernel: the collectives,
    point-to-point ops and barrier that a custom device reaches."""
    for qualified in sorted(torch._C._dispatch_get_registrations_for_dispatch_key("PrivateUse1")):
        if not qualified.startswith("c10d::"):
            continue
        name = qualified[len("c10d::"):]
        op, _, overload = name.partition(".")
        yield name, getattr(getattr(torch.ops.c10d, op), overload or "default")


def register():
    """The c10d kernels that run npu collectives on the host (at the first
    npu tensor: collectives take tensors)."""
    if not dist.is_available():
        return
    lib = torch.library.Library("c10d", "IMPL")
    ops = list(_ops())
    with warnings.catch_warnings():
        # torch warns that its own PrivateUse1 kernels are overridden: that
        # is the point.
        warnings.simplefilter("ignore")
        for name, op in ops:
            register_kernel(lib, name, _kernel(op), "PrivateUse1")
    _libraries.append(lib)
