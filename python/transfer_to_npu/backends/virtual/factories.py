"""The kernels of the ops torch sends to the npu by their device argument
(their BackendSelect kernel): the factories, and ``.to()`` (``_to_copy``).

They are the only ops that reach the npu before an npu tensor exists, so
theirs are the only kernels registered at import (``register_at_import``
in the package's __init__), and this module loads at the first call of
one; the others wait for the first npu tensor, in ops.py, which loads with
them.
"""

import torch

from ... import _C
from . import devices

aten = torch.ops.aten


def is_npu(t):
    return isinstance(t, torch.Tensor) and t.device.type == "npu"


def host(t):
    """The host alias of an npu tensor, with its conjugate and negative
    bits, which DLPack does not carry."""
    if not is_npu(t):
        return t
    if t.is_conj():
        return _C.to_host(t.conj()).conj()
    if t.is_neg():
        return _C.to_host(t)._neg_view()
    return _C.to_host(t)


def op_of(qualified):
    """The OpOverload for "aten::name.overload" or "name.overload"."""
    name, _, overload = qualified.rpartition("::")[2].partition(".")
    return getattr(getattr(aten, name), overload or "default")


def to_copy(self, *, dtype=None, layout=None, device=None, pin_memory=None,
            non_blocking=False, memory_format=None):
    """``.to()`` to or from the npu: the host's own _to_copy of the host
    alias.

    A host copy has nothing to wait for, so non_blocking changes nothing;
    torch's composite would stage a non-blocking copy to the cpu in pinned
    memory, which it cannot allocate for a Python-defined device."""
    target = self.device if device is None else torch.device(device)
    copy = aten._to_copy.default(host(self), dtype=dtype, layout=layout,
                                 device=torch.device("cpu"), pin_memory=pin_memory,
                                 memory_format=memory_format)
    if target.type == "cpu":
        return copy
    if target.type != "npu":
        return copy.to(target)
    index = devices.current() if target.index is None else devices.check_index(target.index)
    return _C.to_device(copy.resolve_conj().resolve_neg(), index)


def host_override(qualified):
    """The kernel of op ``qualified`` (HOST_OVERRIDES in the package's
    __init__) running the op itself on the host (on host aliases).  The op
    is looked up as the kernel runs: the first lookup of an op costs some
    0.1 ms, and these ops (windows) are seldom called, never in a step."""
    def kernel(*args, **kwargs):
        op = op_of(qualified)
        return _C.host_run(op, op._op, *args, **kwargs)

    return kernel
