"""torch_npu's fused operators on the virtual NPU, as their reference math
in torch ops (autograd differentiates them): the ones that transformers,
diffusers, DeepSpeed's NPU accelerator and Ascend's model scripts call.

Signatures and results are torch_npu's (its op schemas, as Python's
bindings take them, tests/data/served_surfaces.json; its documentation and
meta registrations): the same arguments, the same tuples, the same shapes.
"""

import reprlib

import torch
import torch.nn.functional as F

from ._attention import band_mask, math_attention

__all__ = ["npu_apply_adam", "npu_apply_adam_w", "npu_format_cast", "npu_fusion_attention",
           "npu_geglu", "npu_rms_norm", "npu_rotary_mul", "npu_swiglu"]

_NO_LIMIT = 2147483647


# --- npu_fusion_attention --------------------------------------------------

def _to_bnsd(t, layout, heads):
    """(B, N, S, D) view of t in layout; heads for the 3-d layouts."""
    if layout == "BNSD":
        return t
    if layout == "BSND":
        return t.transpose(1, 2)
    if layout in ("BSH", "SBH"):
        if t.size(-1) % heads:
            raise ValueError(f"npu_fusion_attention: hidden size {t.size(-1)} is not a multiple "
                             f"of {heads} heads")
        t = t if layout == "BSH" else t.transpose(0, 1)
        return t.reshape(t.size(0), t.size(1), heads, -1).transpose(1, 2)
    raise ValueError(f"npu_fusion_attention: input_layout={layout!r} must be one of BSH, SBH, "
                     f"BSND, BNSD, TND")


def _from_bnsd(t, layout):
    if layout == "BNSD":
        return t
    if layout == "BSND":
        return t.transpose(1, 2)
    t = t.transpose(1, 2).reshape(t.size(0), t.size(2), -1)  # BSH
    return t if layout == "BSH" else t.transpose(0, 1)


def _keep(atten_mask, sparse_mode, seq_q, seq_k, pre, nxt, device):
    """What each query keeps, from atten_mask (True: masked out) and the
    sparse mode; None for everything (no mask: every mode computes all)."""
    if atten_mask is None:
        return None
    if sparse_mode in (0, 1):
        keep = ~atten_mask.bool()
        if keep.dim() == 2:
            keep = keep[:seq_q, :seq_k]
        if sparse_mode == 0 and (pre < _NO_LIMIT or nxt < _NO_LIMIT):
            keep = keep & band_mask(seq_q, seq_k, pre, nxt, 0, device)
        return keep
    if sparse_mode == 2:
        return band_mask(seq_q, seq_k, -1, 0, 0, device)
    if sparse_mode == 3:
        return band_mask(seq_q, seq_k, -1, 0, seq_k - seq_q, device)
    if sparse_mode == 4:
        return band_mask(seq_q, seq_k, pre, nxt, seq_k - seq_q, device)
    raise NotImplementedError(f"npu_fusion_attention: sparse_mode={sparse_mode} (prefix and "
                              f"split-sequence modes) is not available on the virtual NPU; "
                              f"modes 0 to 4 are")


def npu_fusion_attention(query, key, value, head_num, input_layout, pse=None, padding_mask=None,
                         atten_mask=None, scale=1.0, keep_prob=1.0, pre_tockens=_NO_LIMIT,
                         next_tockens=_NO_LIMIT, inner_precise=0, prefix=None,
                         actual_seq_qlen=None, actual_seq_kvlen=None, sparse_mode=0,
                         gen_mask_parallel=True, sync=False, softmax_layout="", sink=None,
                         dropout_mask=None, seed=0, offset=0):
    """y = Dropout(Softmax(Mask(scale * (pse + query key^T), atten_mask)),
    keep_prob) value: (attention_out, softmax_max, softmax_sum,
    softmax_out, seed, offset, numels), softmax_max and softmax_sum float32
    of (B, N, Sq, 8) ((T, N, 8) for TND).  The dropout draws from the host's
    generator: seed and offset, which place Ascend's own draws, are taken
    and not read."""
    if not 0.0 < keep_prob <= 1.0:
        raise ValueError(f"npu_fusion_attention: keep_prob={keep_prob!r} must be in (0, 1]")
    _not_served("npu_fusion_attention", softmax_layout=(softmax_layout, ""), sink=(sink, None),
                dropout_mask=(dropout_mask, None))
    if padding_mask is not None:
        raise NotImplementedError("npu_fusion_attention: padding_mask is not supported (nor is "
                                  "it by torch_npu)")
    dropout_p = 1.0 - keep_prob
    if input_layout == "TND":
        return _varlen_attention(query, key, value, head_num, pse, atten_mask, scale, dropout_p,
                                 pre_tockens, next_tockens, actual_seq_qlen, actual_seq_kvlen,
                                 sparse_mode)
    q = _to_bnsd(query, input_layout, head_num)
    k = _to_bnsd(key, input_layout, head_num if input_layout in ("BSND", "BNSD") else
                 key.size(-1) // q.size(-1))
    v = _to_bnsd(value, input_layout, head_num if input_layout in ("BSND", "BNSD") else
                 value.size(-1) // q.size(-1))
    if q.size(1) != head_num:
        raise ValueError(f"npu_fusion_attention: head_num={head_num} but the query has "
                         f"{q.size(1)} heads")
    keep = _keep(atten_mask, sparse_mode, q.size(2), k.size(2), pre_tockens, next_tockens,
                 q.device)
    out, row_max, row_sum = math_attention(q, k, v, scale, keep, pse, 0.0, dropout_p,
                                           pre_scale_bias=True)
    return _results(_from_bnsd(out.to(query.dtype), input_layout), row_max, row_sum, query)


def _not_served(op, **given):
    """NotImplementedError naming the first argument given another value
    than its default ({name: (value, default)}): the op takes it as
    torch_npu's does, the virtual NPU has no math for it yet."""
    for name, (value, default) in given.items():
        if value is not default and (isinstance(value, torch.Tensor) or value != default):
            raise NotImplementedError(f"{op}: {name}={reprlib.repr(value)} is not available on "
                                      f"the virtual NPU (only {name}={default!r})")


def _results(out, row_max, row_sum, query):
    stat_shape = tuple(row_max.shape[:-1]) + (8,)
    return (out, row_max.expand(stat_shape).contiguous(), row_sum.expand(stat_shape).contiguous(),
            query.new_empty(0), 0, 0, 0)


def _cumulative(ends, name, total):
    if ends is None:
        raise ValueError(f"npu_fusion_attention: input_layout='TND' needs {name}")
    ends = [int(e) for e in (ends.tolist() if isinstance(ends, torch.Tensor) else ends)]
    if not ends or ends[-1] != total or any(b < a for a, b in zip([0] + ends, ends)):
        raise ValueError(f"npu_fusion_attention: {name}={ends!r} must be the cumulative "
                         f"sequence ends, the last one {total}")
    return [0] + ends


def _varlen_attention(query, key, value, head_num, pse, atten_mask, scale, dropout_p, pre, nxt,
                      actual_seq_qlen, actual_seq_kvlen, sparse_mode):
    """TND: (tokens, heads, dim), each sequence attended on its own."""
    if pse is not None:
        raise NotImplementedError("npu_fusion_attention: pse with input_layout='TND' is not "
                                  "available on the virtual NPU")
    bq = _cumulative(actual_seq_qlen, "actual_seq_qlen", query.size(0))
    bk = _cumulative(actual_seq_kvlen, "actual_seq_kvlen", key.size(0))
    if len(bq) != len(bk):
        raise ValueError("npu_fusion_attention: actual_seq_qlen and actual_seq_kvlen name "
                         "different numbers of sequences")
    if query.size(1) != head_num:
        raise ValueError(f"npu_fusion_attention: head_num={head_num} but the query has "
                         f"{query.size(1)} heads")
    outs, maxes, sums = [], [], []
    for b in range(len(bq) - 1):
        q = query[bq[b]:bq[b + 1]].transpose(0, 1).unsqueeze(0)
        k = key[bk[b]:bk[b + 1]].transpose(0, 1).unsqueeze(0)
        v = value[bk[b]:bk[b + 1]].transpose(0, 1).unsqueeze(0)
        keep = _keep(atten_mask, sparse_mode, q.size(2), k.size(2), pre, nxt, q.device)
        out, row_max, row_sum = math_attention(q, k, v, scale, keep, None, 0.0, dropout_p)
        outs.append(out[0].transpose(0, 1))
        maxes.append(row_max[0].transpose(0, 1))  # (S, N, 1)
        sums.append(row_sum[0].transpose(0, 1))
    return _results(torch.cat(outs).to(query.dtype), torch.cat(maxes), torch.cat(sums), query)


# --- norms, rotary embedding, gated activations ----------------------------

# The tensor an op works on is named input, as torch_npu's bindings name it.

def npu_rms_norm(input, gamma, epsilon=1e-6):
    """(x / sqrt(mean(x^2) + epsilon) * gamma, 1 / sqrt(mean(x^2) +
    epsilon)) over the last gamma.dim() dimensions, in float32; the second
    result float32 with those dimensions kept as 1."""
    dims = tuple(range(input.dim() - gamma.dim(), input.dim()))
    x = input.float()
    rstd = torch.rsqrt(x.pow(2).mean(dim=dims, keepdim=True) + epsilon)
    return (x * rstd * gamma.float()).to(input.dtype), rstd


def npu_rotary_mul(input, r1, r2, rotary_mode="half", rotate=None):
    """r1 * x + r2 * rotate(x): rotate_half ('half': (-x2, x1) of the two
    halves) or interleaved ('interleave': (-x_odd, x_even) pairs)."""
    _not_served("npu_rotary_mul", rotate=(rotate, None))
    if rotary_mode == "half":
        x1, x2 = input.chunk(2, dim=-1)
        rotated = torch.cat((-x2, x1), dim=-1)
    elif rotary_mode == "interleave":
        rotated = torch.stack((-input[..., 1::2], input[..., ::2]), dim=-1).flatten(-2)
    else:
        raise ValueError(f"npu_rotary_mul: rotary_mode={rotary_mode!r} must be 'half' or "
                         f"'interleave'")
    return r1 * input + r2 * rotated


def npu_swiglu(input, dim=-1):
    """silu(a) * b, a and b the two halves of x along dim."""
    a, b = input.chunk(2, dim=dim)
    return F.silu(a) * b


def npu_geglu(input, dim=-1, approximate=1, activate_left=False):
    """(x_linear * gelu(x_gate), gelu(x_gate)), the halves of x along dim:
    the gate is the right half, or the left with activate_left;
    approximate 1 is gelu's tanh form, 0 its exact one."""
    if approximate not in (0, 1):
        raise ValueError(f"npu_geglu: approximate={approximate!r} must be 0 (none) or 1 (tanh)")
    first, second = input.chunk(2, dim=dim)
    gate, linear = (first, second) if activate_left else (second, first)
    gelu = F.gelu(gate, approximate="tanh" if approximate else "none")
    return linear * gelu, gelu


def npu_format_cast(input, acl_format=None, *, dst=None, customize_dtype=None, input_dtype=None):
    """The tensor itself: the virtual NPU keeps one format (ND), whatever
    the format asked for (an int, or a tensor's: torch_npu's overload that
    takes one, dst) and its dtypes."""
    acl_format = acl_format if dst is None else dst
    if not isinstance(acl_format, (int, torch.Tensor)) or isinstance(acl_format, bool):
        raise TypeError(f"npu_format_cast: acl_format={acl_format!r} must be an int (or a "
                        f"tensor of the format)")
    return input


# --- optimizer steps (DeepSpeed's NPU FusedAdam) ---------------------------

def _out(out, name):
    if not isinstance(out, (tuple, list)) or len(out) != 3 or not all(
            isinstance(t, torch.Tensor) for t in out):
        raise TypeError(f"{name}: out must be the tuple (var, m, v) updated in place, got "
                        f"{out!r}")
    return out


@torch.no_grad()
def npu_apply_adam(beta1_power, beta2_power, lr, beta1, beta2, epsilon, grad, use_locking,
                   use_nesterov, out=None):
    """Adam's step on out=(var, m, v), in place (TensorFlow's ApplyAdam):
    m += (1 - beta1) (g - m); v += (1 - beta2) (g^2 - v);
    var -= lr sqrt(1 - beta2_power) / (1 - beta1_power) * m / (sqrt(v) + epsilon)."""
    var, m, v = _out(out, "npu_apply_adam")
    m.add_((grad - m) * (1 - beta1))
    v.add_((grad * grad - v) * (1 - beta2))
    lr_t = lr * (1 - beta2_power) ** 0.5 / (1 - beta1_power)
    step = m * beta1 + grad * (1 - beta1) if use_nesterov else m
    var.sub_(step * lr_t / (v.sqrt() + epsilon))
    return var, m, v


@torch.no_grad()
def npu_apply_adam_w(beta1_power, beta2_power, lr, weight_decay, beta1, beta2, epsilon, grad,
                     max_grad_norm, amsgrad, maximize, out=None):
    """AdamW's step on out=(var, m, v), in place; max_grad_norm is the
    running maximum of v when amsgrad."""
    var, m, v = _out(out, "npu_apply_adam_w")
    if maximize:
        grad = -grad
    var.mul_(1 - lr * weight_decay)
    m.mul_(beta1).add_(grad, alpha=1 - beta1)
    v.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
    second = v
    if amsgrad:
        if max_grad_norm is None:
            raise ValueError("npu_apply_adam_w: amsgrad needs max_grad_norm (the running maximum "
                             "of v)")
        torch.maximum(max_grad_norm, v, out=max_grad_norm)
        second = max_grad_norm
    denom = second.sqrt() / (1 - beta2_power) ** 0.5 + epsilon
    var.addcdiv_(m, denom, value=-lr / (1 - beta1_power))
    return var, m, v
