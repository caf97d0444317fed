"""The profiler: ProfilerActivity.CUDA and profile(use_cuda=True) record
the npu.  On Ascend's torch_npu, which has a profiler of its own,
torch.profiler's profile, schedule and tensorboard_trace_handler are
torch_npu.profiler's, with torch's activities translated (CUDA -> NPU)."""

import functools

from .. import _C
from ._introspect import original
from ._row import row


def use_npu(init):
    """profile.__init__ with use_cuda=True meaning use_device='npu'."""

    @functools.wraps(init)
    def __init__(self, *args, use_cuda=False, **kwargs):
        if use_cuda and kwargs.get("use_device") is None:
            from .. import backends

            if backends.target_type() == "npu":  # the host's profile is the CPU's
                kwargs["use_device"] = "npu"
        return init(self, *args, **kwargs)

    return __init__


def npu_profile(original):
    """torch_npu.profiler.profile taking torch.profiler's arguments (as
    torch_npu's parameters take them: call_shapes.Keywords) and activities."""
    import torch
    import torch_npu

    from . import call_shapes

    npu_profiler = torch_npu.profiler
    cpu, npu = npu_profiler.ProfilerActivity.CPU, npu_profiler.ProfilerActivity.NPU
    torch_cpu = torch.profiler.ProfilerActivity.CPU
    keywords = call_shapes.Keywords("torch.profiler.profile", original, npu_profiler.profile,
                                    "torch_npu.profiler.profile")

    class profile(npu_profiler.profile):
        def __init__(self, *args, **kwargs):
            if keywords.adapts:
                args, kwargs = (), keywords(args, kwargs)
            activities = kwargs.pop("activities", None)
            if activities is not None:
                translated = []
                for a in activities:
                    if isinstance(a, type(cpu)):
                        t = a
                    else:
                        t = cpu if a == torch_cpu else npu  # CUDA, PrivateUse1
                    if t not in translated:
                        translated.append(t)
                activities = translated
            super().__init__(*args, activities=activities, **kwargs)

    profile.__qualname__ = profile.__name__ = "profile"
    # torch's methods (export_chrome_trace(path)...) as torch_npu's take them.
    for name in dir(original):
        mine, theirs = getattr(original, name), getattr(npu_profiler.profile, name, None)
        if not name.startswith("_") and callable(mine) and callable(theirs) and \
                call_shapes.differ(mine, theirs):
            setattr(profile, name, call_shapes.adapted_method(f"torch.profiler.profile.{name}",
                                                              mine, theirs))
    return profile


def _torch_npu_rows(torch, torch_npu):
    npu_profiler = getattr(torch_npu, "profiler", None)
    if npu_profiler is None or not all(
            hasattr(npu_profiler, n) for n in ("profile", "ProfilerActivity")):
        return []
    from . import call_shapes

    out = [row("torch.profiler.profile", "torch_npu.profiler.profile", "class", _C.MODE_REDIRECT,
               torch.profiler, "profile", f"{__name__}:npu_profile()", kws=())]
    for name in ("schedule", "tensorboard_trace_handler"):
        if hasattr(npu_profiler, name):
            source, found = f"torch.profiler.{name}", original(getattr(torch.profiler, name))
            target = f"torch_npu:profiler.{name}"
            if call_shapes.differ(found, getattr(npu_profiler, name)):
                target = call_shapes.Adapted(source, found, target)
            out.append(row(source, f"torch_npu.profiler.{name}", "function", _C.MODE_REDIRECT,
                           torch.profiler, name, target, kws=()))
    if hasattr(npu_profiler, "ProfilerAction"):
        # What a schedule returns, and torch_npu's profile compares with
        # its own enum's members: a custom schedule (a function of the
        # step) names them through torch.profiler.
        out.append(row("torch.profiler.ProfilerAction", "torch_npu.profiler.ProfilerAction",
                       "class", _C.MODE_REPLACE, torch.profiler, "ProfilerAction",
                       "torch_npu:profiler.ProfilerAction"))
    return out


def rows(torch, torch_npu=None):
    """``torch_npu``: Ascend's package when it is the backend, else None."""
    import torch.autograd.profiler as autograd_profiler
    from torch.profiler import ProfilerActivity

    profile = autograd_profiler.profile
    out = _torch_npu_rows(torch, torch_npu)
    # The activity of a device's own profiler came with torch 2.2.
    if hasattr(ProfilerActivity, "PrivateUse1"):
        out.append(row("torch.profiler.ProfilerActivity.CUDA",
                       "torch.profiler.ProfilerActivity.PrivateUse1", "constant", _C.MODE_REPLACE,
                       ProfilerActivity, "CUDA", "torch.profiler:ProfilerActivity.PrivateUse1"))
    out.append(row("torch.autograd.profiler.profile(use_cuda=True)",
                   "torch.autograd.profiler.profile(use_device='npu')", "method", _C.MODE_REDIRECT,
                   profile, "__init__", f"{__name__}:use_npu()", binds=True, kws=()))
    return out
