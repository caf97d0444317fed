"""How a dumped run went, per rank: ``DIR/run/rank<r>.json``, written at
exit with the open step.

* ``backend``: the migration's (``virtual``, ``torch_npu``, ``cpu``), or
  ``unmigrated`` (the original run on CUDA);
* ``status``: ``finished``, ``failed`` (an exception ended it) or
  ``interrupted`` (Ctrl-C); ``exception``: its type, message and the
  script's own last frame (``site``, ``code``), where the user reads it;
* ``steps``: the steps it began;
* ``autocast``: the autocast regions it entered (where, on which device,
  in which dtype), which a compare names when the two runs' precision
  policies differ;
* ``reference_precision``: ``fp32`` in a reference asked to compute in
  full precision (reference.py);
* ``branches``: the tests of a device or backend name that ran, and went
  another way than on CUDA (branches.py).

A process that is killed writes none: compare then goes by its exit
status and its output.
"""

import json
import os
import sys

from .. import _files
from . import frames

# At most this many distinct autocast regions are kept (a region entered
# at one line each step is one).
MAX_REGIONS = 32


class Run:
    def __init__(self, recorder):
        self.recorder = recorder
        self.exception = None
        self.autocast = {}   # (site, device, dtype, enabled) -> first step
        self.facts = {}      # more to write: reference_precision...
        self.tracer = None   # the device-name tests' trace (branches.py)
        self.undo = []

    # -- what is watched

    def install(self):
        previous = sys.excepthook

        def excepthook(kind, value, tb):
            try:
                self.failed(kind, value, tb)
            finally:
                previous(kind, value, tb)

        sys.excepthook = excepthook
        self.undo.append(lambda: setattr(sys, "excepthook", previous)
                         if sys.excepthook is excepthook else None)
        self._watch_autocast()

    def _watch_autocast(self):
        from torch.amp import autocast_mode

        cls = autocast_mode.autocast
        original = cls.__dict__["__enter__"]
        run = self

        def __enter__(self):
            try:
                run.entered(self)
            except Exception as exc:  # the dump's own error: the run goes on
                run.recorder.fail(exc)
            return original(self)

        __enter__.__wrapped__ = original
        cls.__enter__ = __enter__
        self.undo.append(lambda: setattr(cls, "__enter__", original))

    def uninstall(self):
        for undo in reversed(self.undo):
            undo()
        self.undo = []

    # -- what happened

    def entered(self, region):
        rec = self.recorder
        key = (rec.site(), str(getattr(region, "device", "?")),
               str(getattr(region, "fast_dtype", "?")), bool(getattr(region, "_enabled", True)))
        if key not in self.autocast and len(self.autocast) < MAX_REGIONS:
            self.autocast[key] = rec.step.index

    def failed(self, kind, value, tb):
        if self.exception is not None:
            return
        where = frames.last_user_frame(tb)
        message = str(value)
        self.exception = {
            "type": kind.__name__, "message": message[:2000],
            "site": f"{where[0]}:{where[1]}" if where else None,
            "code": frames.source_line(where[0], where[1]) if where else None,
            "function": where[2] if where else None,
        }

    def status(self):
        if self.exception is None:
            return "finished"
        return "interrupted" if self.exception["type"] == "KeyboardInterrupt" else "failed"

    def write(self, directory, rank, step):
        content = {"rank": rank, "backend": _backend(), "status": self.status(),
                   "exception": self.exception,
                   "steps": step + 1,
                   "autocast": [{"site": site, "device": device, "dtype": dtype,
                                 "enabled": enabled, "step": first}
                                for (site, device, dtype, enabled), first
                                in self.autocast.items()]}
        content.update(self.facts)
        if self.tracer is not None:
            content["branches"] = list(self.tracer.findings.values())
        place = os.path.join(directory, "run")
        os.makedirs(place, exist_ok=True)
        _files.replace(os.path.join(place, f"rank{rank}.json"),
                       json.dumps(content, indent=1).encode())


def _backend():
    import transfer_to_npu
    from .. import backends

    return backends.installed if transfer_to_npu.is_enabled() else "unmigrated"
