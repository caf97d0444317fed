"""Putting the virtual NPU's functions in torch: kernels registered with
torch's dispatcher, and the functions put in place at import.

What torch may call before the first npu tensor is in place from import,
by reference (``lazy``): the module holding it loads at its first call, so
that a process that never uses the npu (a DataLoader worker, a tool) does
not load it.  Those are the kernels of the ops that reach the npu by their
device argument (their BackendSelect kernel: the factories and ``.to()``,
factories.py) and of pinning cpu tensors (pinned.py: a DataLoader may pin
before any npu tensor exists).

The other kernels are registered at the first npu tensor, after the user's
code has run: an op or fallback that something else (a ``torch.library``
kernel of the user's) registered for the npu in the meantime keeps its
kernel, as it would have overridden ours had ours come first.  torch itself
registers no aten kernel for the device.
"""

import functools

import torch

from ... import _C, _table, _torch_facts

# Registrations live as long as these libraries do.
_libraries = []

# Composite ops (no cpu kernel of their own) that call a kernel stub
# directly, which a Python-defined device cannot provide: they run on the
# host whole (factories.host_override).
HOST_OVERRIDES = ("kaiser_window", "kaiser_window.periodic", "kaiser_window.beta")


def lazy(name, original=None):
    """The function ``name`` of this package ("module:function", or
    "module:factory()" for what factory(original) makes), loaded at its
    first call."""
    return _C.lazy(f"{__package__}.{name}", _table.resolve, original)


def impl(lib, name, make, key):
    """Register ``make()`` as ``lib``'s kernel of op ``name`` for ``key``,
    unless the op has one for it already."""
    # The key as torch's enum: given a str, the binding first tries a cast
    # that fails, which costs more than the lookup itself.
    if not torch._C._dispatch_has_kernel_for_dispatch_key(f"{lib.ns}::{name}",
                                                          getattr(torch._C.DispatchKey, key)):
        lib.impl(name, make(), key)


def fallback(lib, kernel, key):
    """Register ``kernel`` as the fallback for ``key``, unless there is
    one already."""
    if not torch._C._dispatch_has_backend_fallback(getattr(torch._C.DispatchKey, key)):
        lib.fallback(kernel, key)


def dispatched_by_device():
    """The names of the ops dispatched by their device argument, and of
    those of them with a cpu kernel.  Cached per torch build."""
    facts = _torch_facts.section(torch, "backend_select")
    if "names" not in facts:
        from . import ops  # which ops run with the cpu's kernel: learnt once per build

        names = {q for q in torch._C._dispatch_get_registrations_for_dispatch_key("BackendSelect")
                 if q.startswith("aten::")}
        facts["names"] = sorted(names)
        facts["host_kernels"] = sorted(names & ops.torch_host_kernel_names())
        _torch_facts.changed("backend_select")
    return facts


def register_at_import():
    """Register the kernels torch may call before the first npu tensor."""
    lib = torch.library.Library("aten", "IMPL")
    own = {"aten::_to_copy"}
    impl(lib, "_to_copy", lambda: lazy("factories:to_copy"), "PrivateUse1")
    for name in HOST_OVERRIDES:
        own.add(f"aten::{name}")
        impl(lib, name, lambda name=name: lazy("factories:host_override()", name), "PrivateUse1")
    for qualified in dispatched_by_device()["host_kernels"]:
        if qualified not in own:
            # The generic path, by name: the C core resolves the op at its
            # first call.
            impl(lib, qualified[len("aten::"):],
                 lambda q=qualified: functools.partial(_C.host_call, q), "PrivateUse1")
    lib.impl("_pin_memory", lazy("pinned:pin_memory"), "CPU")
    lib.impl("is_pinned", lazy("pinned:is_pinned"), "CPU")
    _C.pin_made(lazy("pinned:pin_made"))
    _libraries.append(lib)
