"""``ReduceOp.PREMUL_SUM`` on the virtual NPU's ``hccl``: NCCL's reduction
that multiplies each rank's input by a factor, then sums (FSDP2 divides
gradients so, ``set_gradient_divide_factor`` and
``torch.distributed._make_nccl_premul_sum(factor)``).  gloo, which runs the
collectives, has no such op.

The factor lives in the ``ReduceOp`` that Python hands a process group
(a float, or a one-element tensor); the c10d op torch then dispatches
carries only the op's type.  So the process group's methods that take a
reduce op, given PREMUL_SUM for npu tensors, scale what the reduction reads
and sum: the tensors reduced in place (all-reduce) are scaled in place,
inputs that are not written (reduce-scatter, and a rank's tensor that
reduce() does not write) are read from scaled copies.
"""

import torch
import torch.distributed as dist
from torch._C._distributed_c10d import ProcessGroup

# The methods of ProcessGroup that take a reduce op, and where the tensors
# the reduction reads are: 0, the first argument, reduced in place (and
# written by all ranks but reduce's non-roots); 1, the second, inputs never
# written.
_READS = {"allreduce": 0, "allreduce_coalesced": 0, "reduce": 0, "reduce_scatter": 1,
          "_reduce_scatter_base": 1, "reduce_scatter_single": 1,
          "reduce_scatter_single_coalesced": 1, "reduce_scatter_tensor_coalesced": 1}


def _first_tensor(value):
    if isinstance(value, torch.Tensor):
        return value
    if isinstance(value, (list, tuple)):
        for v in value:
            found = _first_tensor(v)
            if found is not None:
                return found
    return None


def _scaled(value, factor):
    """Copies of the tensors of value (nested lists), times factor."""
    if isinstance(value, torch.Tensor):
        return value * factor
    return [_scaled(v, factor) for v in value]


def _scale_(value, factor):
    if isinstance(value, torch.Tensor):
        value.mul_(factor)
    else:
        for v in value:
            _scale_(v, factor)


def _premul_op(args, kwargs):
    """(where the op is, the ReduceOp) for a PREMUL_SUM op among the
    arguments, an op itself or an options object's reduceOp; else None."""
    places = list(enumerate(args)) + list(kwargs.items())
    for key, value in places:
        op = value.reduceOp if hasattr(value, "reduceOp") else value
        if isinstance(op, dist.ReduceOp) and op == dist.ReduceOp.PREMUL_SUM:
            return key, op
    return None


def _factor(op):
    factor = op.__getstate__()[1]  # (type, factor): the supplement NCCL is given
    return factor.reshape(()) if isinstance(factor, torch.Tensor) else factor


def _root(args, kwargs):
    """The root rank of a reduce() call: its options' rootRank, or the
    integer after the tensor."""
    for value in list(args) + list(kwargs.values()):
        if hasattr(value, "rootRank"):
            return value.rootRank
    root = kwargs.get("root", args[1] if len(args) > 1 else None)
    return root if isinstance(root, int) else None


def _with_premul_sum(name, method, reads):
    def call(self, *args, **kwargs):
        found = _premul_op(args, kwargs)
        tensor = _first_tensor(args[reads]) if found and len(args) > reads else None
        if tensor is None or tensor.device.type != "npu":
            return method(self, *args, **kwargs)
        key, op = found
        factor = _factor(op)
        args = list(args)
        if reads == 1 or (name == "reduce" and _root(args, kwargs) != self.rank()):
            args[reads] = _scaled(args[reads], factor)
        else:
            _scale_(args[reads], factor)
        place = kwargs if isinstance(key, str) else args
        holder = place[key]
        if holder is op:
            place[key] = dist.ReduceOp.SUM
            return method(self, *args, **kwargs)
        holder.reduceOp = dist.ReduceOp.SUM  # the caller's options: put back after
        try:
            return method(self, *args, **kwargs)
        finally:
            holder.reduceOp = op

    call.__name__ = call.__qualname__ = name
    call.__wrapped__ = method
    return call


def install():
    """PREMUL_SUM taken by the process group's reducing methods, once."""
    for name, reads in _READS.items():
        method = ProcessGroup.__dict__.get(name)
        if method is not None and not hasattr(method, "__wrapped__"):
            setattr(ProcessGroup, name, _with_premul_sum(name, method, reads))
