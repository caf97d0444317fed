"""How ops run on the virtual NPU.

Most ops take the C core's generic path (``_C.host_call``): npu arguments
are aliased as cpu tensors, the cpu kernel runs, results are aliased back.
The ops here need more than that:

* views must share their base's npu storage, so they are rebuilt on the npu
  from the geometry the cpu view computes (``alias`` + ``as_strided_``);
* copies between devices, resizing and ``set_`` change which memory an npu
  tensor points at, which a cpu alias cannot do;
* the ``*_overrideable`` convolutions are how torch hands convolutions to a
  custom device; they run as the host's own ``convolution``;
* random ops draw from the npu's generators (``random_ops.py``);
* CUDA-only kernels torch calls for every accelerator (``rnn.py``) and
  those of nn.SyncBatchNorm (``sync_batch_norm.py``); attention, whose
  kernel torch chooses per device (``attention.py``), and dropout, which
  torch fuses on any device but the cpu (``dropout.py``).

The generic path is registered as the npu kernel of every op that has a cpu
kernel of its own, so the npu runs that very kernel in one call where torch
would otherwise run a composite (``empty`` + ``op.out``, or a decomposition
that computes differently from the cpu kernel), and as the PrivateUse1
fallback for the rest.  A call it fails comes back to ``retry``.

All of it is registered, and this module loads, when the first npu tensor
is about to exist; the ops that come before it, by a device argument
(factories, ``.to()``), are in factories.py.
"""

import functools

import torch

from ... import _C
from . import attention, dropout, random_ops, registry, rnn, storage, sync_batch_norm
from . import dispatched_by_device, host_kernel_names
from .factories import host as _host, is_npu as _is_npu, op_of

aten = torch.ops.aten

# Registrations live as long as these libraries do.
_libraries = []


# --- views ----------------------------------------------------------------

# The bound C++ operators: views are the hottest Python path, and calling
# these skips OpOverload.__call__'s frame.
_alias = aten.alias.default._op
_restride = aten.as_strided_.default._op


def _alias_as(base, size, stride, offset):
    """An npu view of ``base``'s storage: same storage object, new
    geometry."""
    view = _alias(base)
    _restride(view, size, stride, offset)
    return view


def _view_of(base, host_base, view):
    """The npu counterpart of ``view``, a cpu view of ``host_base`` (the
    host alias of ``base``, whose storage starts at base's first byte)."""
    if view.dtype == base.dtype:
        return _alias_as(base, view.size(), view.stride(),
                         base.storage_offset() + view.storage_offset())
    # A dtype-reinterpreting view: reinterpret the whole storage, then place.
    itemsize = view.element_size()
    byte_offset = (base.storage_offset() * base.element_size()
                   + view.storage_offset() * itemsize)
    nbytes = base.untyped_storage().nbytes()
    whole = _alias_as(base, (nbytes // base.element_size(),), (1,), 0)
    flat = aten.view.dtype(aten.view.dtype(whole, torch.uint8)[:nbytes - nbytes % itemsize],
                           view.dtype)
    aten.as_strided_.default(flat, view.size(), view.stride(), byte_offset // itemsize)
    return flat


def _rebase(out, base, host_base):
    if isinstance(out, torch.Tensor):
        return _view_of(base, host_base, out)
    if isinstance(out, (list, tuple)):
        return type(out)(_rebase(o, base, host_base) for o in out)
    return out


def _view_base_position(schema):
    """Index of the argument whose storage the view returns alias."""
    for ret in schema.returns:
        if ret.alias_info is not None and not ret.alias_info.is_write:
            sets = ret.alias_info.before_set
            for i, arg in enumerate(schema.arguments):
                if arg.alias_info is not None and arg.alias_info.before_set & sets:
                    return i
    return None


def _make_view(op, base_pos):
    base_name = op._schema.arguments[base_pos].name

    run = op._op

    def view(op, *args, **kwargs):
        base = args[base_pos] if base_pos < len(args) else kwargs[base_name]
        # The geometry is what matters here: a conjugate base is viewed raw
        # (the npu view keeps the base's bits through alias()).
        host_base = _C.to_host(base.conj() if base.is_conj() else base)
        host_args = [host_base if a is base else _host(a) for a in args]
        host_kwargs = {k: host_base if v is base else _host(v) for k, v in kwargs.items()}
        return _rebase(run(*host_args, **host_kwargs), base, host_base)

    return view


# The cpu kernels of these views only make a tensor over the input's
# storage (its own storage, keys and dtype) with new geometry: run on the
# npu tensor itself, they make the npu view directly, without a host alias.
_METADATA_VIEWS = ("as_strided", "view", "_reshape_alias", "unfold", "view_as_real",
                   "view_as_complex")
_CPU = torch._C.DispatchKeySet(torch._C.DispatchKey.CPU)


def _metadata_view(name):
    return functools.partial(op_of(name)._handle.redispatch_boxed, _CPU)


# --- copies, resizing, set_ -----------------------------------------------

def _copy_from(self, dst, non_blocking=False):
    # _host keeps the conjugate and negative bits, which the cpu copy_
    # resolves.
    _host(dst).copy_(_host(self), non_blocking)
    return dst


def _copy_from_and_resize(self, dst):
    if dst.shape != self.shape:
        dst.resize_(self.shape)
    return _copy_from(self, dst)


def _contiguous_strides(size, memory_format):
    if memory_format == torch.channels_last and len(size) == 4:
        n, c, h, w = size
        return [h * w * c, 1, w * c, c]
    if memory_format == torch.channels_last_3d and len(size) == 5:
        n, c, d, h, w = size
        return [d * h * w * c, 1, h * w * c, w * c, c]
    strides, acc = [], 1
    for s in reversed(size):
        strides.append(acc)
        acc *= max(s, 1)
    return strides[::-1]


def _extent(size, stride):
    """Elements spanned by a strided geometry."""
    if any(s == 0 for s in size):
        return 0
    return 1 + sum((s - 1) * abs(st) for s, st in zip(size, stride))


def _point_at(self, new):
    """Make ``self`` (keeping its identity, grad and version counter) use
    ``new``'s storage and geometry."""
    torch._C.TensorBase.data.__set__(self, new)


def _resize_(self, size, memory_format=None):
    size = [int(s) for s in size]
    if any(s < 0 for s in size):
        raise RuntimeError(f"Trying to create tensor with negative dimension: {size}")
    stride = _contiguous_strides(size, memory_format)
    offset = self.storage_offset()
    needed = (offset + _extent(size, stride)) * self.element_size()
    if needed > self.untyped_storage().nbytes():
        # Grow: new npu memory keeping the old bytes, as a cpu resize does.
        grown = torch.empty(needed // self.element_size(), dtype=self.dtype, device=self.device)
        old_bytes = self.untyped_storage().nbytes()
        if old_bytes:
            whole = storage.tensor_over(self.untyped_storage(), self.device.index)
            _C.to_host(aten.view.dtype(grown, torch.uint8))[:old_bytes].copy_(
                _C.to_host(whole))
        _point_at(self, _alias_as(grown, size, stride, offset))
    else:
        aten.as_strided_.default(self, size, stride, offset)
    return self


def _set_storage(self, source, storage_offset=0, size=None, stride=None):
    source = getattr(source, "_untyped_storage", source)
    if size is None:
        size = [source.nbytes() // self.element_size()]
    size = list(size)
    if not stride:
        stride = _contiguous_strides(size, None)
    if source.device.type != "npu":
        raise RuntimeError(
            f"set_: expected an npu storage for an npu tensor, got a {source.device} storage")
    whole = storage.tensor_over(source, source.device.index)
    usable = source.nbytes() - source.nbytes() % self.element_size()
    typed = aten.view.dtype(whole[:usable], self.dtype)
    _point_at(self, _alias_as(typed, size, stride, storage_offset))
    return self


def _set_tensor(self, source):
    _point_at(self, aten.alias.default(source))
    return self


def _set_empty(self):
    _point_at(self, torch.empty(0, dtype=self.dtype, device=self.device))
    return self


def _host_value(v):
    if isinstance(v, torch.Tensor):
        return _host(v)
    if isinstance(v, torch.device):
        return torch.device("cpu") if v.type == "npu" else v
    if isinstance(v, (list, tuple)):
        return type(v)(_host_value(x) for x in v)
    return v


def _npu_index(values):
    for v in values:
        if _is_npu(v):
            return v.device.index
        if isinstance(v, (list, tuple)):
            found = _npu_index(v)
            if found is not None:
                return found
    return None


def _on_host(op, args, kwargs, grow_outs=False):
    """The op's cpu kernel on host aliases that keep the npu inputs'
    conjugate and negative bits (the C core's, made through DLPack, carry
    none): a kernel that reads them (mm conjugates inside its BLAS call)
    computes what it computes on the cpu, to the bit.  With grow_outs, for
    an op whose cpu kernel had to grow an out= tensor, which its host alias
    cannot: the kernel gets fresh cpu outputs and each npu out= tensor is
    then pointed at its result's memory.  A result that is an argument's
    alias (an in-place op's self, an out=) is that npu argument."""
    outs = {a.name for a in op._schema.arguments if a.is_out} if grow_outs else set()
    index = _npu_index(list(args) + list(kwargs.values()))
    fresh = []
    moved = {}

    def host_arg(name, v):
        if name in outs and _is_npu(v):
            cpu = torch.empty(0, dtype=v.dtype)
            fresh.append((v, cpu))
            return cpu
        host = _host_value(v)
        if _is_npu(v):
            moved[id(host)] = v
        return host

    names = [a.name for a in op._schema.arguments]
    host_args = [host_arg(names[i], v) for i, v in enumerate(args)]
    host_kwargs = {k: host_arg(k, v) for k, v in kwargs.items()}
    result = op._op(*host_args, **host_kwargs)
    for npu_t, cpu_t in fresh:
        _point_at(npu_t, _C.to_device(cpu_t, npu_t.device.index))
        moved[id(cpu_t)] = npu_t

    def back(r):
        if isinstance(r, torch.Tensor):
            if id(r) in moved:
                return moved[id(r)]
            if r.device.type == "cpu":
                return _C.to_device(r.resolve_conj().resolve_neg(),
                                    index if index is not None else 0)
            return r
        if isinstance(r, (list, tuple)):
            return type(r)(back(x) for x in r)
        return r

    return back(result)


def _numbers_for_tensors(op, args, kwargs):
    """Whether a Python number stands where the op takes a tensor.  torch
    hands a C++ 'wrapped number' (``x & 1`` becomes ``bitwise_and.Tensor(x,
    1)``) to a Python kernel as a plain number, which most ops then refuse
    to take back as a tensor."""
    schema = op._schema.arguments
    named = {a.name: a for a in schema}
    pairs = list(zip(schema, args)) + [(named[k], v) for k, v in kwargs.items() if k in named]
    return any(isinstance(a.type, torch.TensorType) and isinstance(v, (int, float, complex))
               for a, v in pairs)


def _host_kernel_missing(error):
    return (isinstance(error, NotImplementedError)
            and "with arguments from the 'CPU' backend" in str(error))


def retry(error, op, *args, **kwargs):
    """The slow path for a call the generic path failed with ``error``:
    rerun it when the failure is the virtual NPU's own, else raise."""
    if isinstance(error, RuntimeError) and "storage that is not resizable" in str(error):
        return _on_host(op, args, kwargs, grow_outs=True)
    if isinstance(error, RuntimeError) and "conjugate or negative bit set" in str(error):
        return _on_host(op, args, kwargs)
    if _numbers_for_tensors(op, args, kwargs):
        # The overload packet picks the Scalar overload for the number, as
        # the wrapped number would have had it on the cpu.
        return _C.host_run(op, op.overloadpacket, *args, **kwargs)
    if _host_kernel_missing(error):
        index = _npu_index(list(args) + list(kwargs.values()))
        raise NotImplementedError(
            f"{op._schema.name}.{op._overloadname} is not supported on the virtual NPU "
            f"(npu:{0 if index is None else index}): PyTorch has no host (CPU) kernel for "
            f"it") from error
    raise error


# --- convolutions ---------------------------------------------------------

def _convolution(*args):
    return _C.host_run(aten.convolution_overrideable.default, aten.convolution.default._op,
                       *args)


def _convolution_backward(grad_output, input, weight, stride, padding, dilation, transposed,
                          output_padding, groups, output_mask):
    bias_sizes = [grad_output.size(1)]
    return _C.host_run(aten.convolution_backward_overrideable.default,
                       aten.convolution_backward.default._op, grad_output, input, weight,
                       bias_sizes, stride, padding, dilation, transposed, output_padding, groups,
                       output_mask)


def _has_compatible_shallow_copy_type(self, other):
    """Whether ``self.data = other`` may keep self's object: for dense
    strided tensors on the cpu and the npu it may, as between the cpu and
    CUDA (FSDP, DDP and `param.data = param.to(device)` rely on it)."""
    return (self.layout == other.layout == torch.strided
            and self.device.type in ("cpu", "npu") and other.device.type in ("cpu", "npu"))


def _record_stream(self, stream):
    pass


def _is_set_to(self, tensor):
    # Host aliases are storages of their own: compare on the npu.
    return (tensor.device == self.device
            and self.untyped_storage().data_ptr() == tensor.untyped_storage().data_ptr()
            and self.storage_offset() == tensor.storage_offset()
            and self.size() == tensor.size() and self.stride() == tensor.stride())


# --- registration ---------------------------------------------------------

_IMPLS = {
    "_copy_from": _copy_from,
    "_copy_from_and_resize": _copy_from_and_resize,
    "resize_": _resize_,
    "set_.source_Storage": _set_storage,
    "set_.source_Storage_storage_offset": _set_storage,
    "set_.source_Tensor": _set_tensor,
    "set_": _set_empty,
    "convolution_overrideable": _convolution,
    "convolution_backward_overrideable": _convolution_backward,
    "record_stream": _record_stream,
    "_has_compatible_shallow_copy_type": _has_compatible_shallow_copy_type,
    "is_set_to": _is_set_to,
}


# --- conjugate and negative inputs ----------------------------------------
# torch resolves these bits before an op reaches a backend, but for the ops
# whose kernels take them into account (mm, dot, copies, views...).  A host
# alias made through DLPack would lose them.  The C core refuses a complex
# input with a bit set, and retry() runs the op on host aliases that keep
# them; real tensors carry only the negative bit, which reaches a handful of
# ops: those get a handler that does the same.

def _has_math_bit(v):
    if isinstance(v, (list, tuple)):
        return any(_has_math_bit(x) for x in v)
    return _is_npu(v) and (v.is_conj() or v.is_neg())


def _sees_negative_bit(op):
    """Whether torch hands this op its inputs with the negative bit still
    set."""
    qualified = op.name()
    return (torch._C._dispatch_has_kernel_for_dispatch_key(qualified, "Negative")
            and torch._C._dispatch_kernel_for_dispatch_key_is_fallthrough(qualified,
                                                                           "Negative"))


def _keeping_math_bits(op):
    def handler(op, *args, **kwargs):
        if _has_math_bit(args) or _has_math_bit(tuple(kwargs.values())):
            return _on_host(op, args, kwargs)
        return _run(op, *args, **kwargs)

    return handler


# Arguments that may be cpu tensors of any shape beside npu tensors, as on
# CUDA: the index lists of x[cpu_index] and index_put_, the lengths and
# batch sizes of packed sequences, tensor_split's split points.
_HOST_TENSOR_ARGUMENTS = frozenset({"batch_sizes", "lengths", "input_lengths", "target_lengths",
                                    "tensor_indices_or_sections"})


def _takes_host_tensors(argument):
    if argument.is_out:
        return False
    if argument.name == "indices":
        return isinstance(argument.type, torch.ListType)
    return argument.name in _HOST_TENSOR_ARGUMENTS


def _run(op, *args, **kwargs):
    """The generic path for a handler's adjusted call, with its slow path."""
    try:
        return _C.host_run(op, op._op, *args, **kwargs)
    except Exception as error:
        return retry(error, op, *args, **kwargs)


def _taking_host_tensors(op):
    def handler(op, *args, **kwargs):
        try:
            return _C.host_run_mixed(op, op._op, *args, **kwargs)
        except Exception as error:
            return retry(error, op, *args, **kwargs)

    return handler


def classify(op):
    """For an op first seen by the generic path: a handler, or None to run
    it generically."""
    base_pos = _view_base_position(op._schema)
    if base_pos is not None:
        return _make_view(op, base_pos)
    seeded = random_ops.handler(op, _run)
    if seeded is not None:
        return seeded
    if any(_takes_host_tensors(a) for a in op._schema.arguments):
        return _taking_host_tensors(op)
    reads = [a for a in op._schema.arguments
             if "Tensor" in str(a.type) and not (a.alias_info and a.alias_info.is_write)]
    if reads and _sees_negative_bit(op):
        return _keeping_math_bits(op)
    return None


def _own_kernels():
    """The npu kernels written here: (op name, dispatch key, a maker of the
    kernel)."""
    for name, fn in _IMPLS.items():
        yield name, "PrivateUse1", lambda fn=fn: fn
    for name in _METADATA_VIEWS:
        yield name, "PrivateUse1", lambda name=name: _metadata_view(name)
    # _copy_from resolves the conjugate and negative bits itself; torch's
    # generic handling of them would clone the input, which copies through
    # _copy_from again, without end.
    for key in ("Conjugate", "Negative"):
        for name in ("_copy_from", "_copy_from_and_resize"):
            yield name, key, lambda: torch.library.fallthrough_kernel
    # CUDA-only kernels torch calls for any device but the cpu.
    for name, fn in {**rnn.HOST_KERNELS, **sync_batch_norm.HOST_KERNELS}.items():
        yield name, "PrivateUse1", lambda name=name, fn=fn: functools.partial(
            _C.host_run, op_of(name), fn)
    for key in attention.KEYS:
        yield attention.NAME, key, lambda: attention.scaled_dot_product_attention
    for key in dropout.KEYS:
        yield dropout.NAME, key, lambda: dropout.dropout
    for name, fn in attention.KERNELS.items():
        yield name, "PrivateUse1", lambda fn=fn: fn


def _kernels():
    """The kernels of the ops on npu tensors, which the ops dispatched by a
    device argument (factories.py) are not: (op name, key, maker)."""
    by_device = dispatched_by_device()
    own = set()
    for name, key, make in _own_kernels():
        if key == "PrivateUse1":
            own.add(f"aten::{name}")
        yield name, key, make
    # Not the ops written here, among them the in-place view ops (resize_,
    # set_), which change the npu tensor itself.
    for qualified in sorted(host_kernel_names()):
        if qualified not in own and qualified not in by_device:
            # By name: the C core resolves the op at its first call.
            yield qualified[len("aten::"):], "PrivateUse1", lambda q=qualified: (
                functools.partial(_C.host_call, q))


def register():
    """Register the kernels of the ops on npu tensors, and the fallback,
    once an npu tensor is about to exist."""
    lib = torch.library.Library("aten", "IMPL")
    for name, key, make in _kernels():
        registry.impl(lib, name, make, key)
    _libraries.append(lib)
    fallback = torch.library.Library("_", "IMPL")
    registry.fallback(fallback, _C.host_call, "PrivateUse1")
    _libraries.append(fallback)
