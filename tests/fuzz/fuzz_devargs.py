"""atheris target: the C core's decoding of device arguments, handed
values built from the fuzzer's bytes: strings near device specifications,
torch.device objects, numbers, str subclasses, and containers of these,
nested and holding themselves.  Every call shape that passes a device to
the C core must raise a Python exception or return, never crash.  And a
CUDA spelling (str or bytes) in each call shape of device_parity.py must
be taken or refused as torch takes or refuses its npu spelling.

    python tests/fuzz/fuzz_devargs.py -max_total_time=300 corpus/
"""
import os
import sys
import tempfile

import atheris
import torch

import transfer_to_npu  # noqa: F401  (migrates)

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from device_parity import SHAPES, beyond_eight_bits, differs, npu_spelling, outcome  # noqa: E402

PATH = os.path.join(tempfile.mkdtemp(), "t.pt")
torch.save(torch.ones(2), PATH)

PIECES = ["cuda", "cuda:", "cuda:0", "cuda:1", "cuda:127", "cuda:128", "npu", "cpu", "meta",
          "nccl", "gloo", "cpu:gloo,cuda:nccl", ":", ",", "-1", "0", "\x00", "é"]


class Spec(str):
    """A str subclass whose hashing and comparison run code."""

    def __hash__(self):
        return str.__hash__(self)

    def __eq__(self, other):
        return str.__eq__(self, other)


@atheris.instrument_func  # the shapes built are the coverage fed back
def value(data, depth=0):
    kind = data.ConsumeIntInRange(0, 9 if depth < 40 else 4)
    if kind == 0:
        return "".join(data.PickValueInList(PIECES) for _ in range(data.ConsumeIntInRange(1, 3)))
    if kind == 1:
        return data.ConsumeUnicodeNoSurrogates(data.ConsumeIntInRange(0, 12))
    if kind == 2:
        return data.ConsumeIntInRange(-200, 300)
    if kind == 3:
        return torch.device(data.PickValueInList(["cpu", "npu", "meta"]),
                            data.ConsumeIntInRange(0, 3))
    if kind == 4:
        return Spec(data.PickValueInList(PIECES))
    n = data.ConsumeIntInRange(0, 3)
    if kind in (5, 6):
        d = {}
        for _ in range(n):
            key = value(data, depth + 1)
            try:
                d[key] = value(data, depth + 1)
            except TypeError:  # an unhashable key
                pass
        if data.ConsumeBool():
            d[data.PickValueInList(PIECES)] = d  # holds itself
        return d
    items = [value(data, depth + 1) for _ in range(n)]
    if kind == 7:
        if data.ConsumeBool():
            items.append(items)
        return items
    if kind == 8:
        return tuple(items)
    return [value(data, depth + 1)]  # nests deeper


CALLS = [
    lambda d: torch.ones(1).to(d),
    lambda d: torch.ones(1).to(device=d),
    lambda d: torch.zeros(1, device=d),
    lambda d: torch.device(d),
    lambda d: torch.Stream(device=d),
    lambda d: torch.load(PATH, map_location=d),
    lambda d: torch.cuda.set_device(d),
]


SHAPE_NAMES = sorted(SHAPES)


def check_parity(data):
    """A spelling that starts "cuda" (the rest from the pieces or the
    fuzzer's text), in one call shape: the migrated outcome is torch's for
    the npu spelling."""
    rest = "".join(data.PickValueInList(PIECES) for _ in range(data.ConsumeIntInRange(0, 2)))
    spec = "cuda" + (rest if data.ConsumeBool() else data.ConsumeUnicodeNoSurrogates(4))
    if data.ConsumeBool():
        spec = spec.encode("utf-8", "surrogatepass")
    call, index = SHAPES[data.PickValueInList(SHAPE_NAMES)]
    migrated, own = outcome(call, spec), outcome(call, npu_spelling(spec))
    if own[0] == "ok" and beyond_eight_bits(spec, index):
        if migrated[0] != "error" or not isinstance(migrated[1], RuntimeError):
            raise AssertionError(f"{spec!r}: {migrated}, where torch wraps the index")
        return
    why = differs(migrated, own)
    if why is not None:
        raise AssertionError(f"{spec!r}: {why}")


def test_one_input(raw):
    data = atheris.FuzzedDataProvider(raw)
    if data.ConsumeBool():
        check_parity(data)
        return
    arg = value(data)
    call = data.PickValueInList(CALLS)
    try:
        call(arg)
    except Exception:
        pass


if __name__ == "__main__":
    sys.setrecursionlimit(10000)
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()
