"""Device arguments: the migrated call with a CUDA spelling against torch's
own call with its npu spelling, for the parity test (test_device_strings.py)
and the devargs fuzz target.  The npu spelling is never rewritten, so in a
migrated process it reaches torch as it is.

What torch accepts, the migrated call accepts, with the same device; what
torch refuses, it refuses with an exception of the same type (or a
subclass: InvalidDeviceError is a RuntimeError and a ValueError).  One
refusal is ours alone: an index above 127, which torch keeps in eight bits
(``torch.device('npu', 128)`` is ``npu:-128``)."""
import io
import re

import torch

# Call shapes of the device argument: each takes the spelling d; with the
# int index it gives beside it, if any.
_x = torch.ones(2)
_linear = torch.nn.Linear(1, 1)
SHAPES = {
    "torch.device(d)": (lambda d: torch.device(d), None),
    "torch.device(device=d)": (lambda d: torch.device(device=d), None),
    "torch.device(type=d)": (lambda d: torch.device(type=d), None),
    "torch.device(d, 0)": (lambda d: torch.device(d, 0), None),
    "torch.device(d, 1)": (lambda d: torch.device(d, 1), None),
    "torch.device(d, None)": (lambda d: torch.device(d, None), None),
    "torch.device(d, index=None)": (lambda d: torch.device(d, index=None), None),
    "torch.device(index=0, type=d)": (lambda d: torch.device(index=0, type=d), None),
    "torch.device(d, True)": (lambda d: torch.device(d, True), None),
    "torch.device(d, 1.0)": (lambda d: torch.device(d, 1.0), None),
    "torch.device(d, '0')": (lambda d: torch.device(d, "0"), None),
    "torch.device(d, -1)": (lambda d: torch.device(d, -1), None),
    "torch.device(d, 127)": (lambda d: torch.device(d, 127), 127),
    "torch.device(d, 128)": (lambda d: torch.device(d, 128), 128),
    "torch.device(d, 0, 0)": (lambda d: torch.device(d, 0, 0), None),
    "torch.device(d, index=0, type=d)": (lambda d: torch.device(d, index=0, type=d), None),
    "torch.device(d, foo=0)": (lambda d: torch.device(d, foo=0), None),
    "x.to(d)": (lambda d: _x.to(d).device, None),
    "x.to(device=d)": (lambda d: _x.to(device=d).device, None),
    "x.to(d, torch.float64)": (lambda d: _x.to(d, torch.float64).device, None),
    "x.to(d, non_blocking=True)": (lambda d: _x.to(d, non_blocking=True).device, None),
    "torch.zeros(1, device=d)": (lambda d: torch.zeros(1, device=d).device, None),
    "torch.tensor(1, device=d)": (lambda d: torch.tensor(1, device=d).device, None),
    "x.new_zeros(1, device=d)": (lambda d: _x.new_zeros(1, device=d).device, None),
    "Module.to(d)": (lambda d: _linear.to(d).weight.device, None),
    "torch.set_default_device(d)": (lambda d: _default_device(d), None),
    "torch.load(f, map_location=d)": (lambda d: _loaded(d), None),
}

# Spellings after the device type: indexes good and bad, blanks, more.
SUFFIXES = ["", ":0", ":1", ":00", ":01", ":x", ":-1", ":127", ":128", ":999", " ", ":0 ", ":",
            "x", "::0"]


def _saved():
    buffer = io.BytesIO()
    torch.save(torch.ones(1), buffer)
    return buffer.getvalue()


_SAVED = _saved()


def _loaded(d):
    return torch.load(io.BytesIO(_SAVED), map_location=d).device


def _default_device(d):
    torch.set_default_device(d)
    try:
        return torch.get_default_device()
    finally:
        torch.set_default_device(None)


def npu_spelling(spec):
    """spec (str or bytes) with its leading "cuda" spelled "npu"."""
    return spec.replace("cuda", "npu", 1) if isinstance(spec, str) else \
        spec.replace(b"cuda", b"npu", 1)


def outcome(call, *args):
    """("ok", the device made, as a str) or ("error", the exception)."""
    try:
        return "ok", str(call(*args))
    except Exception as exc:  # noqa: BLE001  (every refusal is compared)
        return "error", exc


_DIGITS = re.compile(r"^(?:cuda|npu):(\d+)$")


def beyond_eight_bits(spec, index=None):
    """Whether spec, or an int index given beside it, names a device index
    above 127: refused by the migrated call alone."""
    text = spec if isinstance(spec, str) else spec.decode("latin-1")
    found = _DIGITS.match(text)
    return ((found is not None and not found.group(1).startswith("0") and
             int(found.group(1)) > 127) or
            (type(index) is int and index > 127))


def differs(migrated, own):
    """Why the migrated call's outcome is not torch's own, or None."""
    if migrated[0] == own[0] == "ok":
        return None if migrated[1] == own[1] else f"makes {migrated[1]}, torch {own[1]}"
    if migrated[0] == own[0] == "error":
        if isinstance(migrated[1], type(own[1])):
            return None
        return f"raises {type(migrated[1]).__name__}, torch {type(own[1]).__name__}"
    what = {"ok": lambda o: f"makes {o[1]}", "error": lambda o: f"raises {o[1]!r}"}
    return f"{what[migrated[0]](migrated)}, torch {what[own[0]](own)}"
