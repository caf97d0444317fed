"""Each call checked by itself (msprobe's API accuracy checker, run_ut,
done in the run: no second run of the script, no offline step).

With ``TRANSFER_TO_NPU_DUMP_CHECK=1`` (``compare --per-call``, ``--dump-check``),
each call the dump records on a recorded step is run again on the host,
right after it ran, from the same inputs in higher precision (float64;
complex128), with the same torch function, its device arguments made the
host's; the inputs of a call that writes in place are copied before it
runs.  Its outputs are then judged against the host's by the NPU output's
dtype (verdicts.per_call): a call is judged alone, so one wrong kernel is
found where its error propagates and where errors mask each other, which
a compare of two whole runs cannot tell apart.

Not run again: calls that draw random numbers, that make memory not yet
written (``empty``), that have no tensor input (a factory's result is its
arguments'), and conversions to a Python number.  Backward is not checked
by itself: its ops are the forward ones' derivatives, and a gradient that
differs shows in the compare of two runs.
"""

import json
import os

from .. import _files
from . import verdicts
from .verdicts import ERROR, PASS, WARNING


# Names of calls that draw random numbers (their host run draws others).
_RANDOM = ("rand", "dropout", "bernoulli", "multinomial", "normal", "uniform", "exponential",
           "geometric", "cauchy", "log_normal", "random", "poisson", "rrelu", "gumbel",
           "fractional_max_pool")
# In place: the name's last part ends in "_" (Tensor.add_) or is one of these.
_IN_PLACE = frozenset(("__setitem__", "__iadd__", "__isub__", "__imul__", "__itruediv__",
                       "__ifloordiv__", "__imod__", "__ipow__", "__iand__", "__ior__",
                       "__ixor__", "__ilshift__", "__irshift__", "__imatmul__"))


def _higher(torch):
    """dtype -> the dtype the host computes it in."""
    return {torch.float16: torch.float64, torch.bfloat16: torch.float64,
            torch.float32: torch.float64, torch.float64: torch.float64,
            torch.complex64: torch.complex128, torch.complex128: torch.complex128}


def _rounding(dtype):
    """Around a call's run on the host where autocast was on: the calls
    CUDA's policy runs in the autocast dtype (linear, matmul, bmm, the
    convolutions, scaled_dot_product_attention: the call itself, or those
    a call written in Python makes, such as multi_head_attention_forward)
    get their inputs and outputs rounded to it, as autocast casts them;
    computing stays in float64.  The host's values are then what exact
    kernels give under the same policy."""
    import contextlib

    if dtype is None:
        return contextlib.nullcontext()
    import torch
    from torch.overrides import TorchFunctionMode

    from ..backends.autocast_policy import LOWER_PRECISION_FP

    lower = frozenset(n.partition(".")[0] for n in LOWER_PRECISION_FP)

    def rounded(value):
        if isinstance(value, torch.Tensor) and value.is_floating_point():
            return value.to(dtype).to(value.dtype)
        if isinstance(value, (list, tuple)):
            return type(value)(rounded(v) for v in value)
        return value

    class Rounding(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            name = getattr(func, "__name__", "").strip("_")
            if name in lower or name in ("matmul", "rmatmul"):
                return rounded(func(*rounded(args), **rounded(kwargs)))
            return func(*args, **kwargs)

    return Rounding()


def _skip(name):
    """Why a call is not run again, or None."""
    op = name.rpartition(".")[2].lower()
    if any(word in op for word in _RANDOM):
        return "draws random numbers"
    if "empty" in op:
        return "memory not written yet"
    return None


def _in_place(name, kwargs):
    op = name.rpartition(".")[2]
    return (op.endswith("_") and not op.endswith("__")) or op in _IN_PLACE or "out" in kwargs


class Checker:
    """The per-call check of one process's dump."""

    def __init__(self, recorder):
        import torch

        from .. import backends

        self.rec = recorder
        self.torch = torch
        self.higher = _higher(torch)
        self.device = backends.target_type()

    # -- before and after a call

    def before(self, name, func, args, kwargs):
        """What the check needs from before the call ran: (func, in place,
        host inputs or None), or why it is not run again (a str).  name:
        the call's name without its counter (Tensor.add_)."""
        why = _skip(name)
        if why is not None:
            return why
        if kwargs.get("dropout_p"):
            return "draws random numbers"
        in_place = _in_place(name, kwargs)
        lower = self._autocast()
        try:
            # The inputs of a call writing in place, before it writes.
            host = self._host((args, kwargs), copy=True) if in_place else None
            return func, in_place, host, lower
        except _NotChecked as exc:
            return str(exc)

    def _autocast(self):
        """The autocast dtype of the device where autocast is on, else None."""
        torch = self.torch
        try:
            if not torch.is_autocast_enabled(self.device):
                return None
            return torch.get_autocast_dtype(self.device)
        except (TypeError, RuntimeError, AttributeError):  # a torch without these
            return None

    def after(self, state, args, kwargs, out):
        """The verdict on a call that ran: {"Result", "Error", "Dtype",
        "Message"}; Result "skip" for one not run again."""
        if isinstance(state, str):
            return {"Result": "skip", "Message": state}
        func, in_place, host, lower = state
        try:
            if host is None:
                host = self._host((args, kwargs), copy=False)
        except _NotChecked as exc:
            return {"Result": "skip", "Message": str(exc)}
        if not host[1]:
            return {"Result": "skip", "Message": "no tensor input"}
        (hargs, hkwargs), _ = host
        hkwargs = {k: v for k, v in hkwargs.items() if k != "out"}
        # The host's generator as it was: a call that draws random numbers
        # not known as one by its name draws none of the run's.
        state = self.torch.get_rng_state()
        try:
            with self.torch.autocast("cpu", enabled=False), _rounding(lower):
                result = func(*hargs, **hkwargs)
        except Exception as exc:
            return {"Result": "skip", "Message": f"not run on the host ({type(exc).__name__}: "
                                                 f"{str(exc).splitlines()[0][:120]})"}
        finally:
            self.torch.set_rng_state(state)
        if in_place:
            npu_out, host_out = (args[0] if args else out), (hargs[0] if hargs else result)
        else:
            npu_out, host_out = out, result
        return self._judge(npu_out, host_out, str(lower) if lower else None)

    # -- inputs on the host, in higher precision

    def _host(self, value, copy):
        """(value with its tensors on the host in higher precision and its
        device arguments the host's, whether it held a tensor)."""
        torch = self.torch
        found = [False]

        def convert(v, depth=0):
            if isinstance(v, torch.Tensor):
                if v.layout != torch.strided or v.is_meta:
                    raise _NotChecked("a tensor that is not dense")
                found[0] = True
                host = self.rec.host_view(v)
                if host is None:
                    host = v.detach().to("cpu")
                higher = self.higher.get(host.dtype)
                if higher is not None and higher != host.dtype:
                    return host.detach().to(higher)
                return host.detach().clone() if copy or host is v else host.detach()
            if isinstance(v, (list, tuple)) and depth < 3:
                converted = [convert(x, depth + 1) for x in v]
                return type(v)(converted) if not hasattr(v, "_fields") else type(v)(*converted)
            if isinstance(v, dict) and depth < 3:
                return {k: convert(x, depth + 1) for k, x in v.items()}
            if isinstance(v, torch.device) and v.type != "cpu":
                return torch.device("cpu")
            if isinstance(v, str) and (v == self.device or v.startswith(self.device + ":")):
                return "cpu"
            return v

        return convert(value), found[0]

    # -- the verdict

    def _judge(self, npu_out, host_out, floor=None):
        pairs = list(_pairs(npu_out, host_out))
        if not pairs:
            return {"Result": "skip", "Message": "no tensor output"}
        worst = None
        for i, (n, h) in enumerate(pairs):
            if n is None or h is None or tuple(n.shape) != tuple(h.shape):
                return {"Result": ERROR, "Error": None, "Dtype": str(getattr(n, "dtype", None)),
                        "Message": f"output {i}: the host's has another shape or structure"}
            host_n = self.rec.host_view(n)
            if host_n is None:
                host_n = n.detach().to("cpu")
            verdict = verdicts.per_call(host_n, h, floor)
            verdict["Message"] = f"output {i}: {verdict['Message']}" if len(pairs) > 1 \
                and verdict["Message"] else verdict["Message"]
            if worst is None or _rank(verdict["Result"]) > _rank(worst["Result"]):
                worst = verdict
        return worst


class _NotChecked(Exception):
    pass


def _rank(result):
    return {PASS: 0, WARNING: 1, ERROR: 2}.get(result, -1)


def _pairs(n, h, depth=0):
    import torch

    if isinstance(n, torch.Tensor) or isinstance(h, torch.Tensor):
        yield (n if isinstance(n, torch.Tensor) else None,
               h if isinstance(h, torch.Tensor) else None)
    elif isinstance(n, (list, tuple)) and isinstance(h, (list, tuple)) and depth < 3:
        if len(n) != len(h):
            yield None, None
            return
        for a, b in zip(n, h):
            yield from _pairs(a, b, depth + 1)


# --- the record of a step ------------------------------------------------------

def write(place, checks):
    """check.json of a step: the counts per result, and each call that did
    not pass (or was not run again), by name."""
    counts = {}
    calls = {}
    for name, verdict in checks.items():
        result = verdict["Result"]
        counts[result] = counts.get(result, 0) + 1
        if result != PASS:
            calls[name] = verdict
    _files.replace(os.path.join(place, "check.json"),
                   json.dumps({"counts": counts, "calls": calls}).encode())


# --- in a compare --------------------------------------------------------------

def findings(dump):
    """The calls that did not pass, in the run's order: dicts of rank,
    step, name, site, module and the verdict's fields."""
    out = []
    for (rank, step), part in sorted(dump.parts.items()):
        calls = part.checks.get("calls", {}) if part.checks else {}
        for name, _ in part.calls:
            verdict = calls.get(name)
            if verdict is not None and verdict["Result"] in (WARNING, ERROR):
                out.append(dict(verdict, rank=rank, step=step, name=name,
                                site=part.stack.get(name), module=part.construct.get(name)))
    return out


def counts(dump, rank):
    total = {}
    for (r, _), part in dump.parts.items():
        if r == rank and part.checks:
            for result, n in part.checks.get("counts", {}).items():
                total[result] = total.get(result, 0) + n
    return total


def text(p, found, totals, most=10):
    if not totals:
        return
    p(f"  per-call check (each call run again on the host, in float64): "
      f"{totals.get(PASS, 0)} pass, {totals.get(WARNING, 0)} warning, {totals.get(ERROR, 0)} "
      f"error, {totals.get('skip', 0)} not run again")
    sites = {}
    for f in found:
        sites.setdefault((f["site"], f["name"].rpartition(".")[0].rpartition(".")[0]), []).append(f)
    for (site, call), fs in list(sites.items())[:most]:
        f = fs[0]
        p(f"    {f['Result']}: {f['name']} (step {f['step']}) at {site or '?'}"
          + (f", and {len(fs) - 1} more calls there" if len(fs) > 1 else ""))
        p(f"      {f['Message']}")
    if len(sites) > most:
        p(f"    and {len(sites) - most} more places")
