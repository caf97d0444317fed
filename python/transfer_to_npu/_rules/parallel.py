"""nn.DataParallel: the device-to-device copies of torch.nn.parallel.comm
(torch.cuda.comm) done for npu tensors."""

from .. import _C, parallel_comm
from ._row import row


def rows(torch):
    import torch.nn.parallel.comm as comm

    return [row(f"torch.cuda.comm.{name}", f"transfer_to_npu.parallel_comm.{name}", "function",
                _C.MODE_REDIRECT, comm, name, getattr(parallel_comm, name), kws=())
            for name in parallel_comm.__all__ if hasattr(comm, name)]
