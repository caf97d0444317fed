"""One row of the mapping table, as the C core installs it.

``(source, target, kind, mode, owner, name, target_obj, pos, binds, kws,
device_objects)``:

* ``source``/``target``/``kind``: what the table entry says
  ("torch.cuda.synchronize" -> "torch.npu.synchronize", "function");
* ``mode``: how it is installed (``_C.MODE_*``);
* ``owner.name`` is the attribute patched; ``target_obj`` is what a
  redirect calls (or the attribute name an attribute row reads);
* ``pos``: index, among the arguments the patched callable receives (self
  included for methods), of a positional device (or backend) argument, -1
  for none;
* ``binds``: whether the callable binds like a method when read from a class;
* ``kws``: the keyword arguments that take a device;
* ``device_objects``: torch parses those arguments as a ``torch.device`` (a
  builtin whose op schema types them ``Device``), so a CUDA string may be
  handed on as a cached ``torch.device``, which torch takes without
  parsing.  Anything else gets a string for a string.
"""


def row(source, target, kind, mode, owner, name, target_obj=None, pos=-1, binds=False,
        kws=("device",), device_objects=False):
    return (source, target, kind, mode, owner, name, target_obj, pos, binds, kws, device_objects)
