"""The device's random numbers drawn on the host, in a compare's runs.

Devices draw other numbers from one seed (CUDA's generator is a Philox
counter, the host's a Mersenne twister, the NPU's its own), and a host
reference cannot tell a tensor that stands for the device's from one of
its own once both are the host's: dropout masks, ``torch.randn_like(std)``
(a VAE's reparameterization), a diffusion model's noise would differ
between the runs, and everything after them.  So, in a seeded dump (both
runs of a compare; ``TRANSFER_TO_NPU_DUMP_SEED``), every random number is
drawn on the host, from torch's host generator, in program order, and
copied to the device: the two runs draw the same numbers on any pair of
devices, the host reference included, where that is what the device
draws anyway.

It is done where every draw passes, whatever called it (dropout inside a
module of torch's, ``nn.init`` on device parameters, a recomputed
checkpoint): at the device's dispatch key, whose kernel of each op that
draws from a generator is replaced by one that runs the op on the host,
writes back what it writes in place and moves new results to the device.
``dropout``, which torch fuses on any device but the host, is computed as
the host computes it (``backends/dropout.py``), drawing its noise so.

A generator of the device's own that the script makes and passes is
followed on the host by a host generator seeded alike (its initial seed),
as the reference's host generator is.  Draws inside fused kernels
(attention with dropout, cuDNN's RNN dropout) stay the device's: compare
names such a call as a random draw when values first part there.
"""

import threading
import warnings

import torch

from ..backends import dropout as _dropout

# Drawing without a generator argument: the host's default one.
_SEEDED = ("native_dropout",)

_libraries = []
_shadows = {}  # a device generator's C++ object -> the host generator that follows it
_lock = threading.Lock()


def device_type():
    """The device whose draws are moved to the host: the migration's target,
    or CUDA in an unmigrated run on a GPU; None for the host itself."""
    from .. import backends

    if backends.installed is not None:
        kind = backends.target_type()
    elif torch.cuda.is_available():
        kind = "cuda"
    else:
        return None
    return None if kind == "cpu" else kind


def install(kind):
    """Draw the random numbers of device type ``kind`` on the host (once
    per process)."""
    if _libraries:
        return
    key = _dispatch_key(kind)
    lib = torch.library.Library("aten", "IMPL")
    with warnings.catch_warnings():
        # torch says once that a kernel of the device's is replaced: meant.
        warnings.simplefilter("ignore")
        for op in _drawing_ops(key):
            lib.impl(op, _on_host(op, kind), key)
        for k in ("Autograd" + key, key):
            lib.impl("dropout", _dropout.dropout, k)
    _libraries.append(lib)


def _dispatch_key(kind):
    find = getattr(torch._C, "_dispatch_key_for_device", None)
    if find is not None:
        return find(kind)
    return "CUDA" if kind == "cuda" else "PrivateUse1"


def _drawing_ops(key):
    """The aten ops that draw from a generator and run on the host: a
    generator argument and a host kernel of their own, or a kernel of the
    device's for an op the host computes as a composite."""
    registered = {q for q in torch._C._dispatch_get_registrations_for_dispatch_key(key)}
    ops = []
    for qualified in torch._C._dispatch_get_all_op_names():
        if not qualified.startswith("aten::"):
            continue
        own = torch._C._dispatch_has_kernel_for_dispatch_key(qualified, "CPU")
        if not own and qualified not in registered:
            continue
        op = _overload(qualified)
        if op is None:
            continue
        drawn = op._schema.name[len("aten::"):] in _SEEDED or any(
            "Generator" in str(a.type) for a in op._schema.arguments)
        if drawn and (own or _composite(qualified)):
            ops.append(op)
    return ops


def _overload(qualified):
    name, _, overload = qualified[len("aten::"):].partition(".")
    packet = getattr(torch.ops.aten, name, None)
    return None if packet is None else getattr(packet, overload or "default", None)


def _composite(qualified):
    return any(torch._C._dispatch_has_kernel_for_dispatch_key(qualified, k) for k in
               ("CompositeImplicitAutograd", "CompositeExplicitAutograd"))


def _host_generator(generator):
    """The host generator a call's generator argument draws as: the host's
    default for the device's default (or none), a host generator itself,
    else the one that follows the device generator."""
    if generator is None or generator.device.type == "cpu":
        return generator
    index = generator.device.index or 0
    defaults = getattr(getattr(torch, generator.device.type, None), "default_generators", ())
    if index < len(defaults) and defaults[index]._cdata == generator._cdata:
        return None
    with _lock:
        shadow = _shadows.get(generator._cdata)
        if shadow is None:
            shadow = _shadows[generator._cdata] = torch.Generator()
            shadow.manual_seed(generator.initial_seed())
    return shadow


def _device(values, kind):
    """The device a call's results go to: its tensors', else its device
    argument's."""
    named = None
    for v in values:
        if isinstance(v, torch.Tensor) and v.device.type == kind:
            return v.device
        if isinstance(v, torch.device) and v.type == kind and named is None:
            named = v
    return named


def _on_host(op, kind):
    """The kernel of ``op`` on the device: the op run on the host, what it
    writes copied back into the device's tensors, new tensors moved to the
    device."""
    arguments = op._schema.arguments
    names = [a.name for a in arguments]
    written = [a.name for a in arguments if a.alias_info is not None and a.alias_info.is_write]
    # Each result aliasing an argument: that argument's name, else None.
    aliases = []
    for r in op._schema.returns:
        sets = r.alias_info.before_set if r.alias_info is not None else set()
        aliases.append(next((a.name for a in arguments if a.alias_info is not None
                             and a.alias_info.before_set & sets), None))

    def host(v):
        if isinstance(v, torch.Tensor):
            return v.to("cpu") if v.device.type == kind else v
        if isinstance(v, torch.Generator):
            return _host_generator(v)
        if isinstance(v, torch.device) and v.type == kind:
            return torch.device("cpu")
        if isinstance(v, (list, tuple)):
            return type(v)(host(x) for x in v)
        return v

    def kernel(*args, **kwargs):
        with torch._C.DisableTorchFunction():
            given = dict(zip(names, args), **kwargs)
            device = _device(given.values(), kind)
            hargs = [host(v) for v in args]
            hkwargs = {k: host(v) for k, v in kwargs.items()}
            out = op(*hargs, **hkwargs)
            moved = dict(zip(names, hargs), **hkwargs)
            for name in written:
                if given[name] is not moved[name]:
                    given[name].copy_(moved[name])
            results = out if isinstance(out, tuple) else (out,)
            back = tuple(given[a] if a is not None else
                         r.to(device) if isinstance(r, torch.Tensor) and device is not None else r
                         for r, a in zip(results, aliases))
            return back if isinstance(out, tuple) else back[0]

    return kernel
