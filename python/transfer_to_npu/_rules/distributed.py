"""torch.distributed: NCCL becomes HCCL, CUDA devices become NPUs.

* The ``backend`` argument of the functions that create process groups
  (``init_process_group``, ``new_group``, ``new_subgroups``,
  ``new_subgroups_by_enumeration``) is rewritten by the C core's exact rule:
  ``'nccl'`` -> ``'hccl'`` and, in a ``device:backend`` list, ``cuda`` ->
  ``npu`` and ``nccl`` -> ``hccl``.  Nothing else in the call is looked at:
  an ``init_method`` URL or path that contains "nccl" or "cuda" stays as it
  is.  (``split_group`` has no rule yet: it splits communicators, which the
  virtual NPU's hccl, being gloo, cannot do, so no rule could be tried.)
* ``torch.distributed.is_nccl_available()`` answers whether ``hccl`` is, so
  that ``'nccl' if dist.is_nccl_available() else 'gloo'`` picks the backend
  the migration then turns into ``hccl``.  Only the public name changes:
  torch's own c10d module keeps asking whether NCCL itself is built, since a
  yes there sends it to NCCL's classes (``isinstance(b, ProcessGroupNCCL)``
  in the profiler's and timeouts' code, a NameError without NCCL).
* Device arguments: ``init_process_group(device_id=)``,
  ``new_group(device_id=)``, ``init_device_mesh('cuda', ...)``,
  ``DeviceMesh('cuda', ...)`` and ``DistributedDataParallel(output_device=)``.
  Device lists (``DDP(device_ids=[...])``, ``barrier(device_ids=[...])``)
  hold indices, or strings and devices that torch turns into indices through
  the migrated ``torch.device``; they need no rewriting.  Nor does FSDP's
  ``device_id``: an index or a string becomes a device through the migrated
  ``torch.device`` too.
* On the virtual NPU, DTensor's random ops (the initialisation of sharded
  parameters) draw as ``backends/virtual/random_ops.py`` says: DTensor moves
  CUDA's (seed, offset) generator state, which a host generator lacks.
"""

from .. import _C
from ._introspect import class_original, parameters
from ._row import row

# Functions that create process groups and take a ``backend``.
GROUP_CREATORS = ("init_process_group", "new_group", "new_subgroups",
                  "new_subgroups_by_enumeration")


def _position(fn, name):
    """Index of parameter ``name`` among fn's arguments (self counted for a
    method, as the wrapper sees it), -1 if it is not positional."""
    params = parameters(fn)
    if params is None or name not in params[0]:
        return -1
    return params[0].index(name)


def rows(torch):
    if not torch.distributed.is_available():
        return []
    import torch.distributed.distributed_c10d as c10d

    try:
        import torch.distributed.device_mesh as device_mesh
    except ImportError:  # before torch 2.2, DeviceMesh was private
        device_mesh = None

    from .. import backends

    dist = torch.distributed
    out = []
    # The same function object is bound in both modules; both names are
    # patched with one wrapper and share one table entry.
    for name in GROUP_CREATORS:
        fn = getattr(c10d, name, None)
        if fn is None:
            continue
        params = parameters(fn)
        kws = ("device_id",) if params and "device_id" in params[0] + params[1] else ()
        for owner in (dist, c10d):
            out.append(row(f"torch.distributed.{name}",
                           f"torch.distributed.{name}(backend='hccl')", "backend",
                           _C.MODE_BACKEND, owner, name, pos=_position(fn, "backend"), kws=kws))
    # Replaced by the function itself, not wrapped: a wrapper would also be
    # rebound in c10d's globals, where torch asks whether NCCL itself is
    # built (see the module docstring).
    out.append(row("torch.distributed.is_nccl_available",
                   "torch.distributed.is_backend_available('hccl')", "function", _C.MODE_REPLACE,
                   dist, "is_nccl_available", backends.is_hccl_available, kws=()))

    if device_mesh is not None:
        out += _mesh_rows(dist, device_mesh)

    # The class keeps its identity (isinstance, subclasses, torch's own
    # checks): only its __init__ is wrapped.
    ddp = torch.nn.parallel.DistributedDataParallel
    if backends.target_type() == "cpu":
        out.append(row("torch.nn.parallel.DistributedDataParallel",
                       "torch.nn.parallel.DistributedDataParallel(device_ids=None) (the host)",
                       "method", _C.MODE_REDIRECT, ddp, "__init__",
                       f"{backends.__name__}.cpu:ddp_init()", binds=True, kws=()))
        return out
    out.append(row("torch.nn.parallel.DistributedDataParallel",
                   "torch.nn.parallel.DistributedDataParallel", "device_arg", _C.MODE_DEVICE_ARG,
                   ddp, "__init__", pos=_position(ddp.__init__, "output_device"), binds=True,
                   kws=("output_device",)))
    return out + _dtensor_random_rows()


def distribute_region(self, spec, generator=None):
    """OffsetBasedRNGTracker._distribute_region, npu shards drawing as
    the virtual NPU's random_ops.py says."""
    if self._device.type == "npu":
        from ..backends.virtual import random_ops

        return random_ops.npu_region(self, spec, generator)
    return class_original(self, "_distribute_region")(self, spec, generator)


def _mesh_rows(dist, device_mesh):
    init_mesh = device_mesh.init_device_mesh
    out = [row("torch.distributed.device_mesh.init_device_mesh",
               "torch.distributed.device_mesh.init_device_mesh", "device_arg",
               _C.MODE_DEVICE_ARG, owner, "init_device_mesh",
               pos=_position(init_mesh, "device_type"), kws=("device_type",))
           for owner in (dist, device_mesh)]
    mesh = device_mesh.DeviceMesh
    out.append(row("torch.distributed.device_mesh.DeviceMesh",
                   "torch.distributed.device_mesh.DeviceMesh", "device_arg", _C.MODE_DEVICE_ARG,
                   mesh, "__init__", pos=_position(mesh.__init__, "device_type"), binds=True,
                   kws=("device_type",)))
    return out


def _dtensor_random_rows():
    from .. import backends

    if backends.installed != "virtual":
        return []
    # Waits in the import hook until DTensor is imported.
    return [row("torch.distributed.tensor random ops",
                "torch.distributed.tensor random ops (npu shards seeded by their offset)",
                "method", _C.MODE_REDIRECT, "torch.distributed.tensor._random:OffsetBasedRNGTracker",
                "_distribute_region", distribute_region, binds=True, kws=())]
