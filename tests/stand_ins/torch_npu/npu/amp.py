"""torch_npu.npu.amp of the stand-in."""
import torch

made = []


class autocast(torch.amp.autocast):
    def __init__(self, enabled=True, dtype=torch.float16, cache_enabled=True):
        made.append("autocast")
        super().__init__("npu", dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)


class GradScaler(torch.amp.GradScaler):
    def __init__(self, init_scale=2.0 ** 16, growth_factor=2.0, backoff_factor=0.5,
                 growth_interval=2000, enabled=True):
        made.append("GradScaler")
        super().__init__("npu", init_scale=init_scale, growth_factor=growth_factor,
                         backoff_factor=backoff_factor, growth_interval=growth_interval,
                         enabled=enabled)


def custom_fwd(fwd=None, *, cast_inputs=None):
    return torch.amp.custom_fwd(fwd, device_type="npu", cast_inputs=cast_inputs)


def custom_bwd(bwd=None):
    return torch.amp.custom_bwd(bwd, device_type="npu")
