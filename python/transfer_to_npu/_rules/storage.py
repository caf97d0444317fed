"""Storages: UntypedStorage(n, device='cuda'), storage.cuda(),
storage.is_cuda; CUDA's IPC of a storage, which has no counterpart."""

from .. import _C
from ._row import row


def rows(torch):
    typed, untyped = torch.TypedStorage, torch.UntypedStorage
    out = [row("torch.UntypedStorage", "torch.UntypedStorage", "device_arg", _C.MODE_DEVICE_ARG,
               untyped, "__new__")]
    # Patched on the classes users name: UntypedStorage finds is_cuda in its
    # C base before the Python one.
    for cls, name in ((untyped, "UntypedStorage"), (typed, "TypedStorage")):
        # .npu() and .is_npu come with the npu device's registration.
        if hasattr(cls, "npu"):
            out.append(row(f"torch.{name}.cuda", f"torch.{name}.npu", "method",
                           _C.MODE_REDIRECT, cls, "cuda", f"torch:{name}.npu", 1, True))
        if hasattr(cls, "is_npu"):
            out.append(row(f"torch.{name}.is_cuda", f"torch.{name}.is_npu", "attribute",
                           _C.MODE_ATTRIBUTE, cls, "is_cuda", "is_npu"))
    # A storage shared with another process through CUDA's IPC handles
    # (what torch.multiprocessing does with a CUDA tensor, and code that
    # hands weights to another process): no counterpart for an npu storage.
    for name in IPC:
        if hasattr(untyped, name):
            out.append(row(f"torch.UntypedStorage.{name}", IPC_REASON, "unsupported",
                           _C.MODE_UNSUPPORTED, untyped, name, None, kws=()))
    return out


IPC = ("_share_cuda_", "_new_shared_cuda", "_release_ipc_counter_cuda")
IPC_REASON = ("CUDA IPC shares a storage with another process through CUDA: an npu storage "
              "has no such handle")
