"""One row of the mapping table, as the C core installs it.

``(source, target, kind, mode, owner, name, target_obj, pos, binds, kws,
device_objects, current_index)``:

* ``source``/``target``/``kind``: what the table entry says
  ("torch.cuda.synchronize" -> "torch.npu.synchronize", "function");
* ``mode``: how it is installed (``_C.MODE_*``);
* ``owner.name`` is the attribute patched; ``target_obj`` is what a
  redirect calls, the value a replacement puts in place or the class a
  construction makes (the attribute name an attribute row reads, the value
  an argument row passes);
* objects are named by reference, so that the table is data (``_table``
  caches it): ``owner`` as "module" or "module:attr.path", and an object
  ``target_obj`` as "module:attr.path", or "module:factory()" for what
  ``factory(original)`` makes around the original (a rule's function);
  the C core resolves a wrapper's target at its first call.  A rule may
  give a module, class or function itself: ``_table`` writes its path;
* ``pos``: index, among the arguments the patched callable receives (self
  included for methods), of a positional device (or backend) argument, -1
  for none;
* ``binds``: whether the callable binds like a method when read from a class;
* ``kws``: the keyword arguments that take a device;
* ``device_objects``: torch parses those arguments as a ``torch.device`` (a
  builtin whose op schema types them ``Device``), so a CUDA string may be
  handed on as a cached ``torch.device``, which torch takes without
  parsing.  Anything else gets a string for a string.
* ``current_index``: the callable gives a device without an index the
  current device's (torch asks the device guard: ``Tensor.to``,
  ``torch.tensor``, the factories).  The guard of the virtual NPU, a device
  defined in Python, always answers 0, so the index of the thread's current
  npu is put in before the call ('cuda' and 'npu' alike).
"""

import sys
import types

from .. import _C, _table

# The modes whose target is an object (named by reference in the table);
# the other modes' targets are names and values.
_OBJECT_TARGETS = frozenset((_C.MODE_REDIRECT, _C.MODE_HOOK, _C.MODE_UNSUPPORTED,
                             _C.MODE_REPLACE, _C.MODE_CLASS_DEVICE))


def row(source, target, kind, mode, owner, name, target_obj=None, pos=-1, binds=False,
        kws=("device",), device_objects=False, current_index=False):
    return (source, target, kind, mode, owner, name, target_obj, pos, binds, kws, device_objects,
            current_index)


def ref_of(obj):
    """The path that reaches obj: a module's name, or "module:qualname" of
    a class or a function; None when none does."""
    if isinstance(obj, types.ModuleType):
        name = obj.__name__
        return sys.intern(name) if sys.modules.get(name) is obj else None
    module, qualname = getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)
    if not isinstance(module, str) or not isinstance(qualname, str) or "<" in qualname:
        return None
    path = f"{module}:{qualname}"
    try:
        found = _table.resolve(path, None)  # as the C core will resolve it
    except RuntimeError:
        return None
    return sys.intern(path) if found is obj else None


def _literal(value):
    """Whether marshal keeps value as it is (a default argument's tuple)."""
    if value is None or type(value) in (bool, int, float, str):
        return True
    return type(value) is tuple and all(_literal(v) for v in value)


def encode(derived):
    """The rows with every object named by its path, or None when one has
    no path."""
    out = []
    for r in derived:
        owner, mode, target = r[4], r[3], r[6]
        if not isinstance(owner, str):
            owner = ref_of(owner)
        if mode in _OBJECT_TARGETS and target is not None and not isinstance(target, str) and not (
                mode == _C.MODE_REPLACE and _literal(target)):
            target = ref_of(target)
            if target is None:
                return None
        if owner is None or not _literal(target) or not _literal(r[9]):
            return None
        # A target spelled as its source is one string (marshal writes it
        # once, and reading makes one object).
        shown = r[0] if r[1] == r[0] else r[1]
        out.append((r[0], shown) + r[2:4] + (owner, r[5], target) + r[7:])
    return out
