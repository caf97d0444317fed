"""The device module's functions when the stand-in has no kernels: one
device, nothing to wait for."""

_current = [0]


def is_available():
    return True


def is_initialized():
    return True


def init():
    pass


def _is_in_bad_fork():
    return False


def device_count():
    return 1


def current_device():
    return _current[0]


def set_device(device):
    import torch

    if isinstance(device, str):
        device = torch.device(device)
    index = device.index if isinstance(device, torch.device) else device
    _current[0] = index or 0


def synchronize(device=None):
    pass


def manual_seed(seed):
    pass


def manual_seed_all(seed):
    pass


def get_device_name(device=None):
    return "stand-in npu"


def memory_allocated(device=None):
    return 0


def empty_cache():
    pass
