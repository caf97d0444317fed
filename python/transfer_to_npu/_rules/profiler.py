"""The profiler: ProfilerActivity.CUDA and profile(use_cuda=True) record
the npu."""

import functools

from .. import _C
from ._row import row


def _use_npu(init):
    """profile.__init__ with use_cuda=True meaning use_device='npu'."""

    @functools.wraps(init)
    def __init__(self, *args, use_cuda=False, **kwargs):
        if use_cuda and kwargs.get("use_device") is None:
            kwargs["use_device"] = "npu"
        return init(self, *args, **kwargs)

    return __init__


def rows(torch):
    import torch.autograd.profiler as autograd_profiler
    from torch.profiler import ProfilerActivity

    profile = autograd_profiler.profile
    return [
        row("torch.profiler.ProfilerActivity.CUDA", "torch.profiler.ProfilerActivity.PrivateUse1",
            "constant", _C.MODE_REPLACE, ProfilerActivity, "CUDA",
            ProfilerActivity.PrivateUse1),
        row("torch.autograd.profiler.profile(use_cuda=True)",
            "torch.autograd.profiler.profile(use_device='npu')", "method", _C.MODE_REDIRECT,
            profile, "__init__", _use_npu(profile.__init__), binds=True, kws=()),
    ]
