"""The rules: which CUDA spellings map to what on the NPU.

``rows(torch)`` derives the rows of the mapping table from the torch that is
running (its ``torch.cuda`` and ``torch.npu`` modules, its op schemas), so a
function torch adds is covered without editing a list.  The C core turns
each row into one table entry and one patch; the table it builds is the
single source of truth that mappings(), --list, the log and the report read.

One module per area: ``cuda_module`` (torch.cuda.*), ``tensors`` (Tensor and
Module methods), ``factories`` (device arguments of torch.* functions),
``amp``, ``storage``, ``serialization`` (torch.load, CUDA checkpoints),
``data``, ``profiler``, ``distributed`` (process groups), ``parallel``
(nn.DataParallel), ``jit`` (TorchScript, torch.compile), ``lightning`` (its
CUDA accelerator), ``unsupported`` (CUDA APIs with no NPU counterpart), ``user``
(the user's rules file, TRANSFER_TO_NPU_RULES).  Rows are made by
``row()`` in ``_row.py``, which documents their fields.
"""

import os

from . import (amp, cuda_module, data, distributed, factories, jit, lightning, parallel, profiler,
               serialization, storage, tensors, unsupported)
from ._row import row

__all__ = ["rows", "row"]


# The factories' sources: compiled graphs may call their wrappers.
_factories = set()


def rows(torch):
    """The mapping table's rows, for the torch that is running."""
    from .. import _C

    factory_rows = factories.rows(torch)
    _factories.clear()
    _factories.update(r[0] for r in factory_rows)
    out = ([row("torch.device", "torch.device", "constructor", _C.MODE_CONSTRUCTOR, torch,
                "device")]
           + cuda_module.rows(torch) + tensors.rows(torch) + factory_rows
           + amp.rows(torch) + storage.rows(torch) + serialization.rows(torch)
           + data.rows(torch) + profiler.rows(torch) + distributed.rows(torch)
           + parallel.rows(torch) + jit.rows(torch) + lightning.rows(torch)
           + unsupported.rows(torch)
           + _user_rows(torch))
    return out


def _user_rows(torch):
    # The module of user rules loads only for a rules file.
    if not os.environ.get("TRANSFER_TO_NPU_RULES"):
        return []
    from . import user

    return user.rows(torch)


def after_enable(torch, installed_rows):
    """What has to see the installed wrappers (TorchScript's builtin table)."""
    wrappers, factory_wrappers = [], []
    for r in installed_rows:
        owner, name = r[4], r[5]
        if isinstance(owner, str):
            continue
        current = getattr(owner, name, None)
        source = getattr(current, "__npu_source__", None)
        if source is not None:
            wrappers.append(current)
            if source in _factories:
                factory_wrappers.append(current)
    jit.register_builtins(torch, wrappers)
    jit.keep_for_graphs(factory_wrappers)
