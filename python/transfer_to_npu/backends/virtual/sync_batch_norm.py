"""The statistics ops of nn.SyncBatchNorm, for DDP scripts that convert
their BatchNorm layers (``convert_sync_batchnorm``).

On more than one rank, SyncBatchNorm computes each rank's per-channel mean
and inverse standard deviation (``batch_norm_stats``), gathers them,
combines them (``batch_norm_gather_stats_with_counts``, which also updates
the running statistics) and normalises (``batch_norm_elemt``); its backward
reduces the gradient per channel (``batch_norm_backward_reduce``) and, once
the sums are all-reduced, computes the input's gradient
(``batch_norm_backward_elemt``).  PyTorch has these as CUDA kernels only.
Here they are the same arithmetic as CUDA's (``Normalization.cuh``) on the
host aliases of the npu arguments: statistics in float32 for half and
bfloat16 inputs and in the input's type otherwise, the channel being
dimension 1.
"""

import torch

__all__ = ["HOST_KERNELS"]


def _acc_dtype(dtype):
    return torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype


def _per_channel(t, ndim):
    """A (C,) statistic shaped to broadcast over an input of ndim dims."""
    return t.reshape((1, -1) + (1,) * (ndim - 2))


def _reduced_dims(t):
    return [0] + list(range(2, t.dim()))


def _stats(input, eps):
    x = input.to(_acc_dtype(input.dtype))
    dims = _reduced_dims(x)
    var, mean = torch.var_mean(x, dim=dims, correction=0)
    return mean, (var + eps).rsqrt()


def _gather_stats_with_counts(input, mean, invstd, running_mean, running_var, momentum, eps,
                              counts):
    """The global mean and invstd of per-rank ones: the ranks' Welford
    statistics merged as CUDA merges them, then the running statistics
    updated in place (the running variance unbiased)."""
    counts = counts.to(mean.dtype).reshape(-1, 1)
    n = counts.sum()
    global_mean = (mean * counts).sum(0) / n
    local_var = invstd.reciprocal().square() - eps
    var_n = (local_var * counts).sum(0) + ((mean - global_mean).square() * counts).sum(0)
    global_invstd = (var_n / n + eps).rsqrt()
    if running_mean is not None:
        running_mean.mul_(1 - momentum).add_(global_mean.to(running_mean.dtype), alpha=momentum)
    if running_var is not None:
        unbiased = var_n / (n - 1)
        running_var.mul_(1 - momentum).add_(unbiased.to(running_var.dtype), alpha=momentum)
    return global_mean, global_invstd


def _gather_stats(input, mean, invstd, running_mean, running_var, momentum, eps, count):
    """The same, every rank having ``count`` values per channel."""
    counts = torch.full((mean.size(0),), count, dtype=mean.dtype)
    return _gather_stats_with_counts(input, mean, invstd, running_mean, running_var, momentum,
                                     eps, counts)


def _elemt(input, weight, bias, mean, invstd, eps):
    ndim = input.dim()
    acc = _acc_dtype(input.dtype)
    out = (input.to(acc) - _per_channel(mean.to(acc), ndim)) * _per_channel(invstd.to(acc), ndim)
    if weight is not None:
        out = out * _per_channel(weight.to(acc), ndim)
    if bias is not None:
        out = out + _per_channel(bias.to(acc), ndim)
    return out.to(input.dtype)


def _backward_reduce(grad_out, input, mean, invstd, weight, input_g, weight_g, bias_g):
    acc = mean.dtype
    dims = _reduced_dims(input)
    dy = grad_out.to(acc)
    sum_dy = dy.sum(dims)
    sum_dy_xmu = (dy * (input.to(acc) - _per_channel(mean, input.dim()))).sum(dims)
    # The gradients of weight and bias take weight's type, as CUDA's do.
    grad_dtype = weight.dtype if weight is not None else acc
    grad_weight = (sum_dy_xmu * invstd).to(grad_dtype) if weight_g else None
    grad_bias = sum_dy.to(grad_dtype) if bias_g else None
    if not input_g:
        sum_dy = sum_dy_xmu = None
    return sum_dy, sum_dy_xmu, grad_weight, grad_bias


def _backward_elemt(grad_out, input, mean, invstd, weight, sum_dy, sum_dy_xmu, count):
    ndim = input.dim()
    acc = mean.dtype
    norm = 1.0 / count.sum().item()
    mean_dy = _per_channel(sum_dy.to(acc) * norm, ndim)
    factor_1 = _per_channel(invstd * invstd * (sum_dy_xmu.to(acc) * norm), ndim)
    factor_2 = _per_channel(invstd if weight is None else weight.to(acc) * invstd, ndim)
    xmu = input.to(acc) - _per_channel(mean, ndim)
    return ((grad_out.to(acc) - mean_dy - xmu * factor_1) * factor_2).to(input.dtype)


#: op name -> host function, run through the generic path (host aliases in,
#: npu results out).
HOST_KERNELS = {
    "batch_norm_stats": _stats,
    "batch_norm_gather_stats": _gather_stats,
    "batch_norm_gather_stats_with_counts": _gather_stats_with_counts,
    "batch_norm_elemt": _elemt,
    "batch_norm_backward_reduce": _backward_reduce,
    "batch_norm_backward_elemt": _backward_elemt,
}
