"""The ops torch sends to the npu by their device argument (their
BackendSelect kernel): the factories, and ``.to()`` (``_to_copy``).

They are the only ops that reach the npu before an npu tensor exists, so
theirs are the only kernels registered at import (``register()``); the
others wait for the first npu tensor, in ops.py, which loads with them.
"""

import functools

import torch

from ... import _C, _torch_facts
from . import devices, registry

aten = torch.ops.aten

# Registrations live as long as these libraries do.
_libraries = []


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


def _to_copy(self, *, dtype=None, layout=None, device=None, pin_memory=None,
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


# Composite ops (no cpu kernel of their own) that call a kernel stub
# directly, which a Python-defined device cannot provide: they run on the
# host whole.
_HOST_OVERRIDES = ("kaiser_window", "kaiser_window.periodic", "kaiser_window.beta")


def _host_override(qualified):
    """The kernel running op ``qualified`` itself on the host (on host
    aliases).  The op is looked up at its first call: a lookup at import
    costs a quarter of a millisecond."""
    run = None

    def kernel(*args, **kwargs):
        nonlocal run
        if run is None:
            op = op_of(qualified)
            run = functools.partial(_C.host_run, op, op._op)
        return run(*args, **kwargs)

    kernel.__name__ = kernel.__qualname__ = f"npu_{qualified.replace('.', '_')}"
    return kernel


def dispatched_by_device():
    """The names of these ops, and of those of them with a cpu kernel.
    Cached per torch build."""
    facts = _torch_facts.section(torch, "backend_select")
    if "names" not in facts:
        from . import ops  # which ops run with the cpu's kernel: learnt once per build

        names = {q for q in torch._C._dispatch_get_registrations_for_dispatch_key("BackendSelect")
                 if q.startswith("aten::")}
        facts["names"] = sorted(names)
        facts["host_kernels"] = sorted(names & ops.torch_host_kernel_names())
        _torch_facts.changed("backend_select")
    return facts


def own_kernels():
    """The kernels written here: (op name, a maker of the kernel)."""
    yield "_to_copy", lambda: _to_copy
    for name in _HOST_OVERRIDES:
        yield name, lambda name=name: _host_override(name)


def register():
    """Register these ops' npu kernels: those written here, and the
    generic path (``_C.host_call``) for those with a cpu kernel."""
    lib = torch.library.Library("aten", "IMPL")
    own = set()
    for name, make in own_kernels():
        own.add(f"aten::{name}")
        registry.impl(lib, name, make, "PrivateUse1")
    for qualified in dispatched_by_device()["host_kernels"]:
        if qualified not in own:
            # By name: the C core resolves the op at its first call.
            registry.impl(lib, qualified[len("aten::"):],
                          lambda q=qualified: functools.partial(_C.host_call, q), "PrivateUse1")
    _libraries.append(lib)
