"""Random numbers on the virtual NPU.

Each npu has a generator of its own, as a real device does: seeding or
drawing on the npu leaves the cpu's stream alone, and ``torch.manual_seed``
seeds both.  An npu generator is a host generator (the cpu kernels that
compute npu ops draw from it) whose ``device`` is the npu: an instance of
``Generator`` below, a subclass of ``torch.Generator``, which
``torch.Generator(device='npu')`` makes while migrating (its constructor is
patched in C, as torch.Stream's is: _rules/factories.py).  The same seed
gives the npu the numbers the cpu gives.

How random ops draw from these generators is in random_ops.py, loaded
with the ops at the first npu tensor.
"""

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

    def __new__(cls, device, *, counted=False):
        generator = super().__new__(cls)
        # counted: the device is one being added to the count (grow), which
        # asking the count about it again would only repeat.
        generator._npu_device = device if counted else devices.as_device(device)
        _npu_generators[generator._cdata] = generator
        return generator

    def __init__(self, device, *, counted=False):
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


def _seeded_generator(index):
    generator = Generator(torch.device("npu", index), counted=True)
    # A seed set before the npu existed (torch.manual_seed before
    # `import transfer_to_npu`) applies to it too.
    generator.manual_seed(torch.initial_seed())
    return generator


def install():
    global default_generators
    default_generators = tuple(_seeded_generator(i) for i in range(devices.count()))


def grow(n):
    """Generators for the npus added after install (devices.provide, or a
    launcher's LOCAL_WORLD_SIZE read in a forked worker), put wherever the
    tuple of them is."""
    global default_generators
    old = default_generators
    if not old or len(old) >= n:  # not installed yet, or nothing to add
        return
    default_generators = old + tuple(_seeded_generator(i) for i in range(len(old), n))
    for module in (getattr(torch, "npu", None), torch.cuda):
        if getattr(module, "default_generators", None) is old:
            module.default_generators = default_generators


def generator(index):
    """The generator of npu ``index``: an npu the count did not have when
    it was read last (a forked worker's, see devices.py) is counted again,
    and a missing one is an error naming the variables that set the count."""
    try:
        return default_generators[index]
    except IndexError:
        devices.check_index(index)  # counted again (recount), or refused
        grow(devices.count())
        return default_generators[index]


# --- torch.npu's random functions -----------------------------------------

def manual_seed(seed):
    generator(devices.current()).manual_seed(int(seed))


def manual_seed_all(seed):
    for each in default_generators:
        each.manual_seed(int(seed))


def seed():
    generator(devices.current()).seed()


def seed_all():
    value = default_generators[0].seed()
    for each in default_generators[1:]:
        each.manual_seed(value)


def initial_seed():
    return generator(devices.current()).initial_seed()


def get_rng_state(device="npu"):
    return generator(devices.index_of(device)).get_state()


def set_rng_state(new_state, device="npu"):
    if not isinstance(new_state, torch.Tensor) or new_state.dtype != torch.uint8:
        raise TypeError(
            f"set_rng_state: new_state must be a torch.ByteTensor (as get_rng_state() "
            f"returns), got {type(new_state).__name__}"
            f"{'' if not isinstance(new_state, torch.Tensor) else ' of ' + str(new_state.dtype)}")
    generator(devices.index_of(device)).set_state(new_state.cpu())


def get_rng_state_all():
    # The visible npus', as torch.cuda's: the generators of npus provided
    # for a job that has ended (devices.withdraw) are kept, not counted.
    return [get_rng_state(i) for i in range(devices.count())]


def set_rng_state_all(new_states):
    for i, state in enumerate(new_states):
        set_rng_state(state, i)
