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
* ``owner`` and an object ``target_obj`` are given as themselves or by
  reference: ``owner`` as "module" or "module:attr.path", ``target_obj`` as
  "module:attr.path", or "module:factory()" for what ``factory(original)``
  makes around the original (a rule's function).  The C core resolves a
  reference when the row is installed (an owner) or at a wrapper's first
  call (its target), so that what a script never calls is never loaded;
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
  For a class's construction (``_C.MODE_CLASS_DEVICE``): a call without
  a device makes the current device's object (``torch.Stream()``), not the
  cpu's (``torch.Generator()``).
"""

def row(source, target, kind, mode, owner, name, target_obj=None, pos=-1, binds=False,
        kws=("device",), device_objects=False, current_index=False):
    return (source, target, kind, mode, owner, name, target_obj, pos, binds, kws, device_objects,
            current_index)
