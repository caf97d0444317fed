"""Random ops on npu tensors, which draw from the npu's generators
(random.py).

Random ops reach the npu with their generator argument left empty; the
npu's default generator is passed in.  The few that have no generator
argument (``native_dropout``) draw from the cpu's default generator, which
lends them the npu generator's state for the call.

DTensor's random ops (``npu_region``) give each shard of a tensor
numbers of its own by moving CUDA's (seed, offset) generator state to the
shard's offset; an npu generator, being a host generator, has no offset,
so the shard's numbers are seeded from its offset instead.
"""

import contextlib
import threading
import types

import torch

from . import devices, random


def _call_index(args, kwargs):
    """The npu a random op's results go to: its tensors', else its device
    argument's, else the current one."""
    named = None
    for v in (*args, *kwargs.values()):
        if isinstance(v, torch.Tensor) and v.device.type == "npu":
            return v.device.index
        if isinstance(v, (list, tuple)):
            for x in v:
                if isinstance(x, torch.Tensor) and x.device.type == "npu":
                    return x.device.index
        if isinstance(v, torch.device) and v.type == "npu" and named is None:
            named = v
    if named is not None and named.index is not None:
        return devices.check_index(named.index)
    return devices.current()


def _check_generator(op, generator):
    if generator._cdata not in random._npu_generators:
        raise RuntimeError(
            f"Expected a 'npu' device type for generator but found "
            f"'{generator.device.type}' (in {op._schema.name}.{op._overloadname})")


def _with_generator(op, position, run):
    """A handler that passes the npu's default generator to an op whose
    generator argument is empty."""
    name = op._schema.arguments[position].name

    def handler(op, *args, **kwargs):
        if position < len(args):
            generator = args[position]
            if generator is None:
                args = list(args)
                args[position] = random.generator(_call_index(args, kwargs))
            else:
                _check_generator(op, generator)
        else:
            generator = kwargs.get(name)
            if generator is None:
                kwargs[name] = random.generator(_call_index(args, kwargs))
            else:
                _check_generator(op, generator)
        return run(op, *args, **kwargs)

    return handler


# One loan of the cpu's generator at a time: the op runs without the
# interpreter lock, and threads (DataParallel's replicas) may draw at once.
_loan = threading.RLock()


def _lending_state(op, run):
    """A handler for a random op without a generator argument: the cpu's
    default generator runs it with the npu generator's state, which then
    goes back to the npu generator."""

    def handler(op, *args, **kwargs):
        generator = random.generator(_call_index(args, kwargs))
        host = torch.default_generator
        with _loan:
            saved = host.get_state()
            host.set_state(generator.get_state())
            try:
                return run(op, *args, **kwargs)
            finally:
                generator.set_state(host.get_state())
                host.set_state(saved)

    return handler


def handler(op, run):
    """The handler for a random op, or None for any other op.  ``run(op,
    *args, **kwargs)`` runs the adjusted call on the host."""
    for position, argument in enumerate(op._schema.arguments):
        if "Generator" in str(argument.type):
            return _with_generator(op, position, run)
    if torch.Tag.nondeterministic_seeded in op.tags:
        return _lending_state(op, run)
    return None


# --- DTensor's random ops -------------------------------------------------

_MASK64 = (1 << 64) - 1


def _mix(base, offset):
    """A seed from one drawn number and a shard's offset (splitmix64's
    finaliser: nearby offsets give unrelated seeds)."""
    z = (base + 0x9E3779B97F4A7C15 * (offset + 1)) & _MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
    return z ^ (z >> 31)


def _shard_offset(tracker, spec):
    """Where this rank's shard starts among the numbers DTensor would draw
    for the whole tensor, as DTensor computes it: ``_compute_rng_offsets``
    where the tracker has it, else by the amount ``_set_pre_op_offset``
    moves a state's offset."""
    compute = getattr(tracker, "_compute_rng_offsets", None)
    if compute is not None:
        return compute(spec)[0]
    state = types.SimpleNamespace(offset=0)
    tracker._set_pre_op_offset(state, spec)
    return int(state.offset)


@contextlib.contextmanager
def npu_region(tracker, spec, generator=None):
    """DTensor's ``OffsetBasedRNGTracker._distribute_region`` for npu
    meshes: each shard's numbers come from the npu's generator seeded from
    one number drawn for the op and the shard's offset.  Shards differ,
    replicas of a shard agree, and a seed gives the same numbers again; they
    are not the numbers one device would draw for the whole tensor."""
    from torch.distributed._functional_collectives import _are_we_tracing

    if not tracker.distribute_region_enabled:
        yield
        return
    if _are_we_tracing():
        # A number drawn while tracing would be fixed in the graph.
        raise NotImplementedError(
            "DTensor random ops on the virtual NPU cannot be compiled: run them (the "
            "parameters' initialisation) before torch.compile")
    device_generator = random.generator(tracker._device.index)
    # One number per op from the generator DTensor would use: the same on
    # every rank, as DTensor asks every rank to seed alike.
    source = device_generator if generator is None else generator
    base = int(torch.randint(1 << 62, (), generator=source))
    start = _shard_offset(tracker, spec)
    saved = device_generator.get_state()
    device_generator.manual_seed(_mix(base, start))
    try:
        yield
    finally:
        device_generator.set_state(saved)
