"""torch.nn.parallel.comm (torch.cuda.comm) for npu tensors.

nn.DataParallel moves a module's replicas and a batch's chunks between
devices through these functions, whose torch versions are CUDA kernels.
Here each is the same operation written with tensor copies, so
``nn.DataParallel(model).cuda()`` runs on the npu devices.  Device
arguments are npu indices, as DataParallel passes them.
"""

import torch

__all__ = ["broadcast", "broadcast_coalesced", "reduce_add", "reduce_add_coalesced", "scatter",
           "gather"]


def _device(d):
    if isinstance(d, torch.device):
        return d
    if isinstance(d, int):
        return torch.device("cpu") if d == -1 else torch.device("npu", d)
    return torch.device(d)


def broadcast(tensor, devices=None, *, out=None):
    """Copies of tensor on each of devices (or into out)."""
    if (devices is None) == (out is None):
        raise RuntimeError(
            f"broadcast: exactly one of devices and out must be given, got devices={devices} "
            f"and out={out}")
    if out is not None:
        for o in out:
            o.copy_(tensor)
        return out
    return tuple(tensor.to(_device(d), copy=True) for d in devices)


def broadcast_coalesced(tensors, devices, buffer_size=10485760):
    return tuple(tuple(t.to(_device(d), copy=True) for t in tensors) for d in devices)


def reduce_add(inputs, destination=None):
    if not inputs:
        raise ValueError("reduce_add: inputs must not be empty")
    dest = _device(destination) if destination is not None else inputs[0].device
    result = inputs[0].to(dest, copy=True)
    for t in inputs[1:]:
        if t.shape != result.shape:
            raise ValueError(f"reduce_add: input shapes differ: {tuple(result.shape)} and "
                             f"{tuple(t.shape)}")
        result.add_(t.to(dest))
    return result


def reduce_add_coalesced(inputs, destination=None, buffer_size=10485760):
    return tuple(reduce_add(list(group), destination) for group in zip(*inputs))


def scatter(tensor, devices=None, chunk_sizes=None, dim=0, streams=None, *, out=None):
    """Chunks of tensor along dim, one on each device (or into out)."""
    if out is not None:
        sizes = [o.size(dim) for o in out]
        for o, chunk in zip(out, tensor.split(sizes, dim)):
            o.copy_(chunk)
        return tuple(out)
    devices = [_device(d) for d in devices]
    if chunk_sizes is not None:
        chunks = tensor.split(list(chunk_sizes), dim)
    else:
        chunks = tensor.chunk(len(devices), dim)
    return tuple(c.to(d, copy=True).contiguous() for c, d in zip(chunks, devices))


def gather(tensors, dim=0, destination=None, *, out=None):
    """tensors concatenated along dim on destination (-1: the cpu)."""
    if out is not None:
        return torch.cat([t.to(out.device) for t in tensors], dim, out=out)
    dest = _device(destination) if destination is not None else tensors[0].device
    return torch.cat([t.to(dest) for t in tensors], dim)
