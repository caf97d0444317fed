"""CUDA's autocast policy, op by op: what ``torch.autocast('cuda', ...)``
casts, for a device whose autocast dispatch key has other lists or none.

The virtual NPU registers it for AutocastPrivateUse1 (core PyTorch gives
that key nothing), the cpu backend for AutocastCPU (the CPU's own lists
differ from CUDA's: ``cat`` and the convolutions' ``padding`` overloads
are cast there, ``exp`` and ``softmax`` are not), so that a reference
run on the host keeps the script's precision policy as CUDA applies it.
Each op's policy is named below (the lists of ``ATen/autocast_mode.h`` on
every supported torch line, checked against the installed header by a
test), and each is registered only where the running torch gives CUDA's
autocast a kernel for the op (its AutocastCUDA registrations, which differ
between torch lines and builds):

* lower precision: floating inputs of the device become the autocast dtype
  (matmuls, convolutions, ``linear``...);
* fp32: they become float32 (``exp``, ``log``, losses, norms...);
* fp32 with a dtype argument: float32 is asked for unless the caller asked
  (``softmax``, ``sum``...), or appended (``norm``);
* promote: all become the widest floating type among them (``cat``-like
  ops such as ``addcmul``);
* ``binary_cross_entropy`` is refused, as on CUDA.

CUDA also caches the cast of a weight for the rest of the autocast region;
here each use casts afresh, which gives the same values and gradients.
"""

import torch

LOWER_PRECISION_FP = (
    "_convolution.deprecated", "_convolution", "conv1d", "conv2d", "conv3d", "conv_tbc",
    "conv_transpose1d", "conv_transpose2d.input", "conv_transpose3d.input", "convolution",
    "prelu", "addmm", "addmv", "addr", "matmul", "einsum", "mm", "mv", "linalg_vecdot",
    "linear", "addbmm", "baddbmm", "bmm", "chain_matmul", "linalg_multi_dot",
    "_thnn_fused_lstm_cell", "_thnn_fused_gru_cell", "lstm_cell", "gru_cell", "rnn_tanh_cell",
    "rnn_relu_cell", "_scaled_dot_product_flash_attention", "scaled_dot_product_attention",
)

FP32 = (
    "acos", "asin", "cosh", "erfinv", "exp", "expm1", "log", "log10", "log2", "log1p",
    "reciprocal", "rsqrt", "sinh", "tan", "pow.Tensor_Scalar", "pow.Tensor_Tensor",
    "pow.Scalar", "softplus", "layer_norm", "native_layer_norm", "rms_norm", "group_norm",
    "frobenius_norm.dim", "nuclear_norm", "nuclear_norm.dim", "cosine_similarity",
    "poisson_nll_loss", "cosine_embedding_loss", "nll_loss", "nll_loss2d",
    "hinge_embedding_loss", "kl_div", "l1_loss", "smooth_l1_loss", "huber_loss", "mse_loss",
    "margin_ranking_loss", "multilabel_margin_loss", "soft_margin_loss", "triplet_margin_loss",
    "multi_margin_loss", "binary_cross_entropy_with_logits", "dist", "pdist", "cdist", "renorm",
    "logsumexp", "upsample_nearest1d", "_upsample_nearest_exact1d", "upsample_nearest2d",
    "_upsample_nearest_exact2d", "upsample_nearest3d", "_upsample_nearest_exact3d",
    "upsample_linear1d", "upsample_bilinear2d", "_upsample_bilinear2d_aa",
    "upsample_trilinear3d", "upsample_bicubic2d", "_upsample_bicubic2d_aa",
    # Registered on its own, outside the header's lists (torch 2.14).
    "linalg_matrix_sqrth",
)

FP32_SET_OPT_DTYPE = (
    "prod", "prod.dim_int", "prod.dim_Dimname", "softmax.int", "softmax.Dimname",
    "log_softmax.int", "log_softmax.Dimname", "cumprod", "cumprod.dimname", "cumsum",
    "cumsum.dimname", "linalg_vector_norm", "linalg_matrix_norm", "linalg_matrix_norm.str_ord",
    "sum", "sum.dim_IntList", "sum.dim_DimnameList",
)

# op -> the overload it is redispatched to, with the dtype appended.
FP32_APPEND_DTYPE = {"norm.Scalar": "norm.ScalarOpt_dtype",
                     "norm.ScalarOpt_dim": "norm.ScalarOpt_dim_dtype",
                     "norm.names_ScalarOpt_dim": "norm.names_ScalarOpt_dim_dtype"}

PROMOTE = ("addcdiv", "addcmul", "atan2", "bilinear", "cross", "dot", "vdot", "grid_sampler",
           "index_put", "tensordot", "scatter_add")

BANNED = ("binary_cross_entropy",)

_BANNED_MESSAGE = (
    "torch.nn.functional.binary_cross_entropy and torch.nn.BCELoss are unsafe to autocast.\n"
    "Many models use a sigmoid layer right before the binary cross entropy layer.\n"
    "In this case, combine the two layers using "
    "torch.nn.functional.binary_cross_entropy_with_logits\n"
    "or torch.nn.BCEWithLogitsLoss.  binary_cross_entropy_with_logits and BCEWithLogits are\n"
    "safe to autocast.")


def _op(qualified):
    name, _, overload = qualified.partition(".")
    return getattr(getattr(torch.ops.aten, name), overload or "default")


def cuda_autocast_ops():
    """The aten ops this torch's CUDA autocast has a kernel for (``mm``,
    ``rms_norm.default`` spelled ``rms_norm``...)."""
    return frozenset(
        q[len("aten::"):] for q in
        torch._C._dispatch_get_registrations_for_dispatch_key("AutocastCUDA")
        if q.startswith("aten::"))


def _tensors(args, kwargs):
    for v in (*args, *kwargs.values()):
        if isinstance(v, torch.Tensor):
            yield v
        elif isinstance(v, (list, tuple)):
            yield from (x for x in v if isinstance(x, torch.Tensor))


def _banned(op):
    def kernel(*args, **kwargs):
        raise RuntimeError(_BANNED_MESSAGE)

    return kernel


class Policy:
    """CUDA's policy for the tensors of one device type, as kernels of that
    device's autocast dispatch key."""

    def __init__(self, device_type, key):
        self.device_type, self.key = device_type, key
        self._keys = torch._C.DispatchKeySet(getattr(torch._C.DispatchKey, key))

    def kernels(self):
        """{op: a function making its kernel} of the ops this torch's CUDA
        autocast has a kernel for."""
        cuda = cuda_autocast_ops()
        out = {}
        for names, policy in ((LOWER_PRECISION_FP, self._lower_precision), (FP32, self._fp32),
                              (FP32_SET_OPT_DTYPE, self._fp32_set_opt_dtype),
                              (PROMOTE, self._promote), (BANNED, _banned)):
            for name in names:
                if name in cuda:
                    out[name] = lambda name=name, policy=policy: policy(_op(name))
        for name, target in FP32_APPEND_DTYPE.items():
            if name in cuda:
                out[name] = lambda name=name, target=target: self._fp32_append_dtype(
                    _op(name), _op(target))
        return out

    def lower(self):
        """The autocast dtype of the device."""
        get = getattr(torch, "get_autocast_dtype", None)
        if get is not None:
            return get(self.device_type)
        return torch.get_autocast_cpu_dtype()  # before torch 2.4: the cpu backend's

    def _no_autocast(self):
        return torch._C._ExcludeDispatchKeyGuard(self._keys)

    def _eligible(self, t):
        return (isinstance(t, torch.Tensor) and t.device.type == self.device_type
                and t.is_floating_point() and t.dtype != torch.float64)

    # --- casting ---------------------------------------------------------------

    def _cast(self, value, dtype):
        if isinstance(value, torch.Tensor):
            return value.to(dtype) if self._eligible(value) and value.dtype != dtype else value
        if isinstance(value, (list, tuple)):
            # At any depth: einsum's operands come as a list among the arguments.
            cast = [self._cast(v, dtype) for v in value]
            if any(c is not v for c, v in zip(cast, value)):
                return type(value)(cast)
        return value

    # --- the policies -----------------------------------------------------------

    def _lower_precision(self, op):
        def kernel(*args, **kwargs):
            lower = self.lower()
            with self._no_autocast():
                return op(*self._cast(args, lower), **self._cast(kwargs, lower))

        return kernel

    def _fp32(self, op):
        def kernel(*args, **kwargs):
            with self._no_autocast():
                return op(*self._cast(args, torch.float32), **self._cast(kwargs, torch.float32))

        return kernel

    def _fp32_set_opt_dtype(self, op):
        position = next(i for i, a in enumerate(op._schema.arguments) if a.name == "dtype")

        def kernel(*args, **kwargs):
            with self._no_autocast():
                if args and self._eligible(args[0]):
                    if position < len(args):
                        if args[position] is None:
                            args = (*args[:position], torch.float32, *args[position + 1:])
                    elif kwargs.get("dtype") is None:
                        kwargs["dtype"] = torch.float32
                return op(*args, **kwargs)

        return kernel

    def _fp32_append_dtype(self, op, target):
        schema = op._schema.arguments

        def kernel(*args, **kwargs):
            # The target overload has no defaults for them: pass every argument.
            args = (*args, *(kwargs.pop(a.name, a.default_value) for a in schema[len(args):]))
            with self._no_autocast():
                out_type = torch.float32 if self._eligible(args[0]) else args[0].dtype
                return target(*args, dtype=out_type)

        return kernel

    def _promote_type(self, lower, tensors):
        current = lower
        for t in tensors:
            if not self._eligible(t):
                continue
            if current == torch.float32 or t.dtype == torch.float32:
                current = torch.float32
            elif not (current == lower and t.dtype == lower):
                raise RuntimeError(
                    f"Unexpected floating ScalarType in at::autocast::prioritize: {t.dtype} "
                    f"under autocast to {lower} on {self.device_type}")
        return current

    def _promote(self, op):
        def kernel(*args, **kwargs):
            lower = self.lower()
            with self._no_autocast():
                to_type = self._promote_type(lower, _tensors(args, kwargs))
                return op(*self._cast(args, to_type), **self._cast(kwargs, to_type))

        return kernel
