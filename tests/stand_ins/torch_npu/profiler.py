"""torch_npu.profiler of the stand-in: its own activity enum (CPU, NPU) and
profile(), which records what it was asked for."""
import enum

import torch

used = []

# torch's own, taken before the migration redirects torch.profiler's names
# here.
_schedule = torch.profiler.schedule
_trace_handler = torch.profiler.tensorboard_trace_handler


class ProfilerActivity(enum.Enum):
    CPU = "cpu"
    NPU = "npu"


def schedule(*args, **kwargs):
    return _schedule(*args, **kwargs)


def tensorboard_trace_handler(*args, **kwargs):
    return _trace_handler(*args, **kwargs)


class profile(torch.profiler.profile):
    def __init__(self, *, activities=None, **kwargs):
        used.append(sorted(a.name for a in activities or ()))
        torch_activities = [torch.profiler.ProfilerActivity.CPU if a is ProfilerActivity.CPU
                            else torch.profiler.ProfilerActivity.PrivateUse1
                            for a in activities or ()]
        super().__init__(activities=torch_activities or None, **kwargs)
