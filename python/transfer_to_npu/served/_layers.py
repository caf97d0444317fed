"""apex's fused layers on torch's: FusedLayerNorm and FusedRMSNorm (and
their Mixed forms, float32 parameters for inputs of any float type), and
apex.parallel's DistributedDataParallel and SyncBatchNorm."""

import torch
import torch.nn.functional as F

__all__ = ["DistributedDataParallel", "FusedLayerNorm", "FusedRMSNorm", "MixedFusedLayerNorm",
           "MixedFusedRMSNorm", "SyncBatchNorm", "convert_syncbn_model"]


class FusedLayerNorm(torch.nn.LayerNorm):
    """apex.normalization.FusedLayerNorm: torch.nn.LayerNorm."""

    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True, memory_efficient=False):
        super().__init__(normalized_shape, eps=eps, elementwise_affine=elementwise_affine)


class FusedRMSNorm(torch.nn.RMSNorm):
    """apex.normalization.FusedRMSNorm: torch.nn.RMSNorm."""

    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True, memory_efficient=False):
        super().__init__(normalized_shape, eps=eps, elementwise_affine=elementwise_affine)

    def forward(self, input):  # apex's name for it (torch's is x)
        return super().forward(input)


class MixedFusedLayerNorm(FusedLayerNorm):
    """The input computed in its parameters' type, the output in the
    input's."""

    def forward(self, input):
        w = self.weight
        x = input.to(w.dtype) if w is not None else input
        return F.layer_norm(x, self.normalized_shape, w, self.bias, self.eps).to(input.dtype)


class MixedFusedRMSNorm(FusedRMSNorm):
    def forward(self, input):
        w = self.weight
        x = input.to(w.dtype) if w is not None else input
        return F.rms_norm(x, self.normalized_shape, w, self.eps).to(input.dtype)


class DistributedDataParallel(torch.nn.parallel.DistributedDataParallel):
    """apex.parallel.DistributedDataParallel: torch's, on the module's
    device (apex's knobs of its own bucketing and streams are not needed)."""

    def __init__(self, module, message_size=10000000, delay_allreduce=False, shared_param=None,
                 allreduce_trigger_params=None, retain_allreduce_buffers=False,
                 allreduce_always_fp32=False, num_allreduce_streams=1,
                 allreduce_communicators=None, gradient_average=True,
                 gradient_predivide_factor=1.0, gradient_average_split_factor=None, prof=False):
        if not gradient_average:
            raise NotImplementedError("apex.parallel.DistributedDataParallel(gradient_average="
                                      "False): torch's DistributedDataParallel averages; "
                                      "scale the loss by the world size instead")
        super().__init__(module)


class SyncBatchNorm(torch.nn.SyncBatchNorm):
    """apex.parallel.SyncBatchNorm: torch.nn.SyncBatchNorm."""

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True,
                 track_running_stats=True, process_group=None, channel_last=False,
                 fuse_relu=False):
        if channel_last or fuse_relu:
            raise NotImplementedError("apex.parallel.SyncBatchNorm(channel_last=, fuse_relu=) "
                                      "has no counterpart in torch.nn.SyncBatchNorm")
        super().__init__(num_features, eps=eps, momentum=momentum, affine=affine,
                         track_running_stats=track_running_stats, process_group=process_group)


def convert_syncbn_model(module, process_group=None, channel_last=False):
    """Every BatchNorm layer of module made a SyncBatchNorm (torch's)."""
    return torch.nn.SyncBatchNorm.convert_sync_batchnorm(module, process_group)
