"""The rules: which CUDA spellings map to what on the NPU.

``derive(torch)`` derives the rows of the mapping table from the torch that
is running (its ``torch.cuda`` and ``torch.npu`` modules, its op schemas), so
a function torch adds is covered without editing a list; ``_table`` keeps
them, as data, per torch build.  The C core turns each row into one table
entry and one patch; the table it builds is the single source of truth that
mappings(), --list, the log and the report read.

One module per area: ``cuda_module`` (torch.cuda.*), ``tensors`` (Tensor and
Module methods), ``factories`` (device arguments of torch.* functions),
``identity`` (what CUDA code asks about the device), ``accelerator`` (which
accelerator torch's own code finds), ``amp``, ``storage``,
``serialization`` (torch.load, CUDA checkpoints),
``data``, ``profiler``, ``distributed`` (process groups), ``parallel``
(nn.DataParallel), ``jit`` (TorchScript, torch.compile), ``lightning`` (its
CUDA accelerator), ``accelerate`` (its backend argument), ``served`` (the packages
served while migrating: torch_npu, flash_attn, xformers, apex),
``cuda_extensions`` (CUDA C++ extensions refused, their kernels listed),
``unsupported`` (CUDA APIs with no NPU counterpart), ``user``
(the user's rules file, TRANSFER_TO_NPU_RULES, read by ``_table`` at every
start).  The modules load only to derive the table.  Rows are made by
``row()`` in ``_row.py``, which documents their fields.
"""

from ._row import row

__all__ = ["derive", "entries", "row"]


def derive(torch, npu=None, torch_npu=None):
    """The mapping table's rows for the torch that is running, and the
    sources of those of torch's factories (compiled graphs may call their
    wrappers).  ``npu`` is what torch.npu is (by default torch.npu itself),
    ``torch_npu`` Ascend's package when it is the backend (by default, the
    one imported then): a torch_npu release's surface may stand for both
    (``surfaces.load``)."""
    import sys

    from .. import _C, backends
    from . import (accelerator, amp, cuda_module, data, distributed, factories, identity, jit,
                   lightning, parallel, profiler, serialization, storage, tensors, unsupported)

    if npu is None:
        npu = backends.device_module()
        if backends.installed == "torch_npu":
            torch_npu = sys.modules.get("torch_npu")
    factory_rows = factories.rows(torch)
    out = ([row("torch.device", "torch.device", "constructor", _C.MODE_CONSTRUCTOR, torch,
                "device")]
           + cuda_module.rows(torch, npu) + identity.rows(torch, npu) + accelerator.rows(torch)
           + tensors.rows(torch)
           + factory_rows
           + amp.rows(torch) + storage.rows(torch) + serialization.rows(torch)
           + data.rows(torch) + profiler.rows(torch, torch_npu) + distributed.rows(torch)
           + parallel.rows(torch) + jit.rows(torch) + lightning.rows(torch)
           + unsupported.rows(torch, npu) + factories.device_context_rows(torch))
    # Libraries' and packages' rows, which wait for their modules' import.
    from . import accelerate, cuda_extensions, served

    backend = ("torch_npu" if torch_npu is not None else
               "cpu" if backends.installed == "cpu" else "virtual")
    out += (accelerate.rows(torch) + served.rows(torch, backend)
            + cuda_extensions.rows(torch))
    return out, {r[0] for r in factory_rows}


def entries(rows):
    """The table the C core makes of rows derived from what torch has, as
    mappings() lists it: an entry per source, in the order first seen, a
    later row's target and kind replacing an earlier one's."""
    table = {}
    for r in rows:
        table[r[0]] = {"source": r[0], "target": r[1], "kind": r[2], "calls": 0}
    return list(table.values())
