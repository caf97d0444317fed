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
asynchronous.  Its future, asked for from Python (DDP's communication
hooks chain on it), gives the npu tensors, as NCCL's gives the CUDA tensors
it was handed, not their host aliases.  gloo does every reduction torch
defines for it on every dtype, AVG and bf16 included; NCCL's PREMUL_SUM is
a sum of scaled inputs (premul_sum.py).
"""

import os
import threading
import warnings
import weakref

import torch
import torch.distributed as dist
from torch._C._distributed_c10d import ProcessGroup, Work

from ... import _C
from . import premul_sum, register_kernel


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

# The tensors of each collective, by its Work, for as long as the Work is
# alive: its future gives the npu tensors (_get_future).
_tensors_of = weakref.WeakKeyDictionary()


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
        _hold(result[1] if returns_tensors else result, (held, host, result), flat)
        if returns_tensors:
            return args[0], result[1]
        return result

    run.__name__ = run.__qualname__ = f"npu_{op.__name__}"
    return run


def _alltoall(outputs, inputs, process_group, async_op=True, timeout=-1):
    """The PrivateUse1 kernel of ``c10d::alltoall_`` (``dist.all_to_all``,
    lists of tensors), through ``c10d::alltoall_base_``: gloo has no list
    form on every torch line, and the flat one serves all.  Each list goes
    as one buffer, split by its tensors' sizes; the outputs are filled once
    the exchange is complete, so the Work returned is a completed one."""
    send = torch.cat([t.reshape(-1) for t in inputs]) if inputs else torch.empty(0, device=_NPU)
    receive = torch.empty(sum(t.numel() for t in outputs), dtype=send.dtype, device=send.device)
    work = torch.ops.c10d.alltoall_base_.default(
        receive, send, process_group, [t.numel() for t in outputs],
        [t.numel() for t in inputs], async_op, timeout)
    Work.unbox(work).wait()
    for out, part in zip(outputs, receive.split([t.numel() for t in outputs])):
        out.copy_(part.view(out.shape))
    return outputs, work


def _hold(boxed_work, tensors, flat):
    """Keep ``tensors`` until the collective of ``boxed_work`` is complete;
    let go of those of the collectives that are."""
    work = Work.unbox(boxed_work)
    _tensors_of[work] = tensors[:2] + (flat,)
    with _in_flight_lock:
        before = _in_flight[:]
        _in_flight[:] = [held for held in before if not held[0].is_completed()]
        _in_flight.append((work, tensors))
    # `before` goes here, outside the lock: freeing tensors runs Python.


def _npu_value(work):
    """What the future of ``work`` gives as NCCL's would, from what gloo's
    gives (host aliases): a function of gloo's value, or None when ``work``
    is not one of ours."""
    found = _tensors_of.get(work)
    if found is None:
        return None
    args, host, flat = found
    if flat:
        # One output tensor, which gloo received in chunks.
        return lambda value: [args[0]]
    pairs = {}

    def pair(npu, alias):
        if isinstance(npu, torch.Tensor) and isinstance(alias, torch.Tensor):
            pairs[id(alias)] = (alias, npu)  # the alias kept: its id stays its own
        elif isinstance(npu, list) and isinstance(alias, list):
            for n, a in zip(npu, alias):
                pair(n, a)

    pair(args, host)

    def as_npu(value):
        if isinstance(value, torch.Tensor):
            found = pairs.get(id(value))
            return found[1] if found is not None and found[0] is value else value
        if isinstance(value, list):
            return [as_npu(v) for v in value]
        return value

    return as_npu


def _get_future(original):
    """Work.get_future: for a collective on npu tensors, a future of the npu
    tensors, chained on gloo's.  Made only when asked for: its callback runs
    on a gloo thread, which a collective still running at exit must not do,
    and hooks wait for theirs."""
    def get_future(work):
        future = original(work)
        as_npu = _npu_value(work)
        if as_npu is None:
            return future
        return future.then(lambda done: as_npu(done.value()))

    get_future.__wrapped__ = original
    return get_future


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
    if not hasattr(Work.get_future, "__wrapped__"):
        Work.get_future = _get_future(Work.get_future)
    premul_sum.install()
    lib = torch.library.Library("c10d", "IMPL")
    ops = list(_ops())
    with warnings.catch_warnings():
        # torch warns that its own PrivateUse1 kernels are overridden: that
        # is the point.
        warnings.simplefilter("ignore")
        for name, op in ops:
            register_kernel(lib, name, _alltoall if name == "alltoall_" else _kernel(op),
                            "PrivateUse1")
    _libraries.append(lib)
