"""torch.distributed: NCCL becomes HCCL."""

from .. import _C
from ._row import row


def rows(torch):
    if not torch.distributed.is_available():
        return []
    import torch.distributed.distributed_c10d as c10d

    out = []
    # The same function object is bound in both modules; both names are
    # patched with one wrapper and share one table entry.
    for owner in (torch.distributed, c10d):
        out.append(row("torch.distributed.init_process_group",
                       "torch.distributed.init_process_group(backend='hccl')", "backend",
                       _C.MODE_BACKEND, owner, "init_process_group", pos=0,
                       kws=("device_id",)))
    return out
