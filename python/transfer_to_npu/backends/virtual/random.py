"""Random numbers on the virtual NPU.

Each npu has a generator of its own, as a real device does: seeding or
drawing on the npu leaves the cpu's stream alone, and ``torch.manual_seed``
seeds both.  An npu generator is a host generator (the cpu kernels that
compute npu ops draw from it) whose ``device`` is the npu: an instance of
``Generator`` below, a subclass of ``torch.Generator``, which
``torch.Generator(device='npu')`` makes.  The same seed gives the npu the
numbers the cpu gives.

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
import weakref

import torch

from . import devices

_HostGenerator = torch._C.Generator

# The host generators that are npu generators, by their C++ object: torch
# hands a generator to a kernel as a new torch._C.Generator over the same
# C++ object, not as the Generator made here.
_npu_generators = weakref.WeakValueDictionary()

#: One generator per visible npu, made by install().
default_generators = ()


class Generator(_HostGenerator):
    """An npu generator: what ``torch.Generator(device='npu')`` (or
    ``'npu:N'``) makes."""

    def __new__(cls, device):
        generator = super().__new__(cls)
        generator._npu_device = devices.as_device(device)
        _npu_generators[generator._cdata] = generator
        return generator

    def __init__(self, device):
        pass

    @property
    def device(self):
        return self._npu_device

    def __reduce__(self):
        return _rebuild, (str(self._npu_device), self.get_state())

    def __repr__(self):
        return f"<torch.Generator device={self._npu_device} at {id(self):#x}>"


def _rebuild(device, state):
    generator = Generator(device)
    generator.set_state(state)
    return generator


def _npu_target(args, kwargs):
    """The npu device torch.Generator(...) is asked for, or None."""
    device = kwargs.get("device", args[0] if args else None)
    if isinstance(device, str):
        device = torch.device(device)
    if isinstance(device, torch.device) and device.type == "npu":
        return device
    return None


def _seeded_generator(index):
    generator = Generator(torch.device("npu", index))
    # A seed set before the npu existed (torch.manual_seed before
    # `import transfer_to_npu`) applies to it too.
    generator.manual_seed(torch.initial_seed())
    return generator


def _install_constructor():
    """torch.Generator(device='npu') makes a Generator.  torch asks the
    device's C++ hooks for a new generator, which a Python-defined device
    cannot provide; torch.Generator's class is made by a Python metaclass,
    whose __call__ can hand the npu case to Generator instead."""
    meta = type(_HostGenerator)
    if meta is type or "__call__" in vars(meta):
        return
    make = meta.__call__

    def __call__(cls, *args, **kwargs):
        if cls is _HostGenerator and len(args) + len(kwargs) == 1:
            target = _npu_target(args, kwargs)
            if target is not None:
                return Generator(target)
        return make(cls, *args, **kwargs)

    meta.__call__ = __call__


def install():
    global default_generators
    default_generators = tuple(_seeded_generator(i) for i in range(devices.count()))
    _install_constructor()


# --- random ops -----------------------------------------------------------

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
    if generator._cdata not in _npu_generators:
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
                args[position] = default_generators[_call_index(args, kwargs)]
            else:
                _check_generator(op, generator)
        else:
            generator = kwargs.get(name)
            if generator is None:
                kwargs[name] = default_generators[_call_index(args, kwargs)]
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
        generator = default_generators[_call_index(args, kwargs)]
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


# --- torch.npu's random functions -----------------------------------------

def manual_seed(seed):
    default_generators[devices.current()].manual_seed(int(seed))


def manual_seed_all(seed):
    for generator in default_generators:
        generator.manual_seed(int(seed))


def seed():
    default_generators[devices.current()].seed()


def seed_all():
    value = default_generators[0].seed()
    for generator in default_generators[1:]:
        generator.manual_seed(value)


def initial_seed():
    return default_generators[devices.current()].initial_seed()


def get_rng_state(device="npu"):
    return default_generators[devices.index_of(device)].get_state()


def set_rng_state(new_state, device="npu"):
    if not isinstance(new_state, torch.Tensor) or new_state.dtype != torch.uint8:
        raise TypeError(
            f"set_rng_state: new_state must be a torch.ByteTensor (as get_rng_state() "
            f"returns), got {type(new_state).__name__}"
            f"{'' if not isinstance(new_state, torch.Tensor) else ' of ' + str(new_state.dtype)}")
    default_generators[devices.index_of(device)].set_state(new_state.cpu())


def get_rng_state_all():
    return [get_rng_state(i) for i in range(len(default_generators))]


def set_rng_state_all(new_states):
    for i, state in enumerate(new_states):
        set_rng_state(state, i)


# --- DTensor's random ops -------------------------------------------------

_MASK64 = (1 << 64) - 1


def _mix(base, offset):
    """A seed from one drawn number and a shard's offset (splitmix64's
    finaliser: nearby offsets give unrelated seeds)."""
    z = (base + 0x9E3779B97F4A7C15 * (offset + 1)) & _MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
    return z ^ (z >> 31)


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
    device_generator = default_generators[tracker._device.index]
    # One number per op from the generator DTensor would use: the same on
    # every rank, as DTensor asks every rank to seed alike.
    source = device_generator if generator is None else generator
    base = int(torch.randint(1 << 62, (), generator=source))
    start, _ = tracker._compute_rng_offsets(spec)
    saved = device_generator.get_state()
    device_generator.manual_seed(_mix(base, start))
    try:
        yield
    finally:
        device_generator.set_state(saved)
