"""The argument checks of the served attention functions.

flash-attn's and xformers' CUDA kernels read their tensors through the
shapes their wrappers checked, so those wrappers refuse tensors that do
not agree in batch, length, heads, head size, dtype or device.  The served
functions are torch ops, which broadcast: unchecked, such tensors would give
a result of some shape.  Each family of served entry points checks its
arguments here before it computes, and a refusal names the function, the
argument and its value.
"""

import torch

__all__ = ["alike", "lengths", "shape", "slopes", "tensor", "unit_interval", "window"]


def tensor(where, name, value, dims, dtypes=None):
    """value is a tensor with one of ``dims`` dimensions (an int or a
    tuple), and of one of ``dtypes`` when given."""
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"{where}: {name} must be a tensor, got {type(value).__name__}")
    dims = (dims,) if isinstance(dims, int) else dims
    if value.dim() not in dims:
        wanted = " or ".join(str(d) for d in dims)
        raise ValueError(f"{where}: {name} must have {wanted} dimensions, got shape "
                         f"{tuple(value.shape)}")
    if dtypes is not None and value.dtype not in dtypes:
        wanted = " or ".join(str(d) for d in dtypes)
        raise ValueError(f"{where}: {name} must have dtype {wanted}, got {value.dtype}")
    return value


def shape(where, name, value, expected, names):
    """value has shape ``expected``, whose sizes ``names`` names."""
    if tuple(value.shape) != tuple(expected):
        raise ValueError(f"{where}: {name} must have shape ({names}) = {tuple(expected)}, got "
                         f"{tuple(value.shape)}")


def alike(where, named):
    """The (name, tensor) pairs have the first one's dtype and device."""
    first, t0 = named[0]
    for name, t in named[1:]:
        if t.dtype != t0.dtype:
            raise ValueError(f"{where}: {first} and {name} must have the same dtype, got "
                             f"{t0.dtype} and {t.dtype}")
        if t.device != t0.device:
            raise ValueError(f"{where}: {first} and {name} must be on the same device, got "
                             f"{t0.device} and {t.device}")


def lengths(where, name, cu_seqlens, total, device):
    """Cumulative sequence lengths (int32, as flash-attn's): a sequence per
    pair of neighbours, from 0 up, never going back, within ``total``
    rows (None: any).  Returns them as a list."""
    tensor(where, name, cu_seqlens, 1, (torch.int32,))
    if cu_seqlens.device != device:
        raise ValueError(f"{where}: {name} must be on the device of the tensors, {device}, got "
                         f"{cu_seqlens.device}")
    bounds = cu_seqlens.tolist()
    if len(bounds) < 2:
        raise ValueError(f"{where}: {name}={bounds} must hold batch_size + 1 >= 2 bounds")
    if any(b < a for a, b in zip(bounds, bounds[1:])) or bounds[0] < 0 or (
            total is not None and bounds[-1] > total):
        within = "" if total is None else f" to at most the {total} rows given"
        raise ValueError(f"{where}: {name}={bounds} must rise from 0 or more{within}, never "
                         f"going back")
    return bounds


def unit_interval(where, name, value):
    """A probability below 1 (flash-attn's and xformers' dropout)."""
    if not 0.0 <= value < 1.0:
        raise ValueError(f"{where}: {name}={value!r} must be in [0, 1)")


def window(where, causal, window_size):
    """flash-attn's (left, right) window, causal making right 0."""
    try:
        left, right = (int(w) for w in window_size)
    except (TypeError, ValueError):
        raise ValueError(f"{where}: window_size={window_size!r} must be a pair of ints") from None
    return left, 0 if causal else right


def slopes(where, alibi_slopes, batch, heads, device):
    """ALiBi slopes: float32, one per head or per batch and head."""
    if alibi_slopes is None:
        return
    tensor(where, "alibi_slopes", alibi_slopes, (1, 2), (torch.float32,))
    if tuple(alibi_slopes.shape) not in ((heads,), (batch, heads)):
        raise ValueError(f"{where}: alibi_slopes must have shape (num_heads,) = ({heads},) or "
                         f"(batch_size, num_heads) = ({batch}, {heads}), got "
                         f"{tuple(alibi_slopes.shape)}")
    if alibi_slopes.device != device:
        raise ValueError(f"{where}: alibi_slopes must be on the device of the tensors, {device}, "
                         f"got {alibi_slopes.device}")
