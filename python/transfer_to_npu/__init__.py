"""transfer_to_npu: run CUDA PyTorch training code on Ascend NPUs, unedited.

    import transfer_to_npu      # one line, before or after `import torch`

patches PyTorch in-process so that CUDA spellings (``torch.cuda.*``,
``'cuda:N'``, ``.cuda()``, ``backend='nccl'``...) run on the NPU: Ascend's
``torch_npu`` when it is installed, else the built-in virtual NPU, whose
memory is host memory and whose kernels are the host's.
"""

import os
import sys
import threading
import time

from . import _C
from ._C import InvalidDeviceError

__all__ = ["enable", "disable", "is_enabled", "rehearse", "mappings", "backend",
           "InvalidDeviceError"]

__version__ = "0.1.0"

#: "torch_npu" or "virtual" once enabled (or rehearsing); None before.
backend = None

#: True once rehearse() has run: converted code runs as on torch_npu.
rehearsing = False

_lock = threading.RLock()

# Seconds the last enable() spent initialising the NPU backend, and in each
# step of patching (read by the benchmarks).
_PATCH_STEPS = ("rows", "install", "rebind")
_timings = dict.fromkeys(("backend",) + _PATCH_STEPS, 0.0)


#: The oldest torch the patcher supports.
MIN_TORCH = (2, 1)


def _import_torch():
    try:
        import torch
    except ImportError as exc:
        raise ImportError(
            f"transfer_to_npu needs PyTorch {MIN_TORCH[0]}.{MIN_TORCH[1]} or newer, and it "
            f"cannot be imported ({exc})") from exc
    version = getattr(torch, "__version__", "0")
    try:
        found = tuple(int(p) for p in version.split("+")[0].split(".")[:2])
    except ValueError:
        found = (0, 0)
    if found < MIN_TORCH:
        raise ImportError(
            f"transfer_to_npu needs PyTorch {MIN_TORCH[0]}.{MIN_TORCH[1]} or newer, found "
            f"{version} ({getattr(torch, '__file__', '?')})")
    return torch


def _warm_torch_caches():
    """torch caches the set of its factories at its first use: filled
    after the patches, it would hold the wrappers where torch compares the
    builtins (`with torch.device(...)` would stop placing tensors, for
    anyone who holds that function).  Imported already, it is filled now;
    imported later, the table replaces it as it is imported (a row of
    _rules/factories.py)."""
    device_context = sys.modules.get("torch.utils._device")
    if device_context is not None:
        device_context._device_constructors()


# Top-level packages whose globals never hold a name bound by the user: the
# standard library, torch (but for torch.cuda's own modules) and this one,
# and the packages torch depends on, which it imports and which never import
# it (numpy alone is some 80 modules to scan).
_NOT_USER = frozenset(getattr(sys, "stdlib_module_names", ())) | {
    "torch", "torchgen", __name__, "_transfer_to_npu_boot",
    "numpy", "typing_extensions", "sympy", "mpmath", "networkx", "jinja2", "markupsafe",
    "filelock", "fsspec", "setuptools", "_distutils_hack", "pkg_resources"}
_USER_ANYWAY = ("torch.cuda.",)


def _reporting():
    """Whether the log or the report is asked for: their module loads only
    then (it validates the values)."""
    env = os.environ
    return (env.get("TRANSFER_TO_NPU_LOG", "").strip() not in ("", "0")
            or bool(env.get("TRANSFER_TO_NPU_LOG_FILE")) or bool(env.get("TRANSFER_TO_NPU_REPORT")))


# A forked child (a data-loading worker) counts its own calls, as it
# writes its own log and report.
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_C.reset_counts)


def _serve(on):
    """Put the served packages' finder (_served.py) first on sys.meta_path,
    or take it off and the served names out of sys.modules (but for
    torch_npu's while rehearsing)."""
    from . import _served

    if on:
        sys.meta_path[:] = [f for f in sys.meta_path if f is not _served.Finder]
        sys.meta_path.insert(0, _served.Finder)
    elif not rehearsing:
        sys.meta_path[:] = [f for f in sys.meta_path if f is not _served.Finder]
        _served.forget()
    else:
        _served.forget(keep=("torch_npu",))


def enable():
    """Migrate: install the NPU backend and patch every CUDA spelling.
    Idempotent."""
    global backend
    with _lock:
        if _C.is_enabled():
            # Already on (this module may have been reloaded): say which NPU.
            from . import backends

            backend = backends.installed
            _serve(True)
            return
        torch = _import_torch()
        from . import _environment, backends

        _check_settings(backends)

        last = [time.perf_counter()]

        def timed(step):
            now = time.perf_counter()
            _timings[step] = now - last[0]
            last[0] = now

        if _reporting() or f"{__name__}._report" in sys.modules:
            from . import _report

            _report.configure()
        try:
            # CUDA's and NCCL's variables, for the NPU's runtime to read as
            # it starts (CUDA_VISIBLE_DEVICES -> ASCEND_RT_VISIBLE_DEVICES ...).
            _C.carry(_environment.rows())
            name = backends.install()
            timed("backend")
            _patch(torch, name, timed)
        except BaseException:
            # All or nothing: torch, and the environment, are left as they
            # were found.
            _C.disable()
            raise
        backend = name
        _serve(True)


def rehearse():
    """Run converted code as on a machine with Ascend's torch_npu and no
    migration: the NPU backend installed (on the virtual NPU, ``import
    torch_npu`` gives it as torch_npu's API), and nothing of CUDA's mapped:
    ``torch.cuda`` is the CUDA-less torch's, as it is beside torch_npu.
    Idempotent; RuntimeError while migrating."""
    global backend, rehearsing
    with _lock:
        if rehearsing:
            return
        if _C.is_enabled():
            raise RuntimeError("transfer_to_npu: cannot rehearse a converted copy while "
                               "migrating (TRANSFER_TO_NPU=rehearse, or python -m "
                               "transfer_to_npu --rehearse, runs it unmigrated)")
        _import_torch()
        from . import _environment, backends

        if backends.requested() == "cpu":
            raise ValueError("TRANSFER_TO_NPU_BACKEND='cpu' has no npu to rehearse on: use "
                             "auto, virtual or torch_npu")
        name = backends.install()
        if name == "virtual":
            # What CANN's set-up gives an Ascend machine, which libraries
            # that find torch_npu read (DeepSpeed's accelerator).
            os.environ.setdefault("ASCEND_HOME_PATH", _environment.VIRTUAL_HOME)
        backend = name
        rehearsing = True
        _serve(True)


def _check_settings(backends):
    """The settings read from the environment, checked before anything is
    registered with torch (which keeps what is registered for the life of
    the process): a mistake fails the import naming it, and the import
    tried again once it is fixed starts from torch as it was.  The log's
    are checked as they are read (_report), the virtual NPU's before it
    registers anything."""
    backends.requested()
    rules = os.environ.get("TRANSFER_TO_NPU_RULES")
    if rules:
        from ._rules import user

        user.load(rules)


def _patch(torch, name, timed):
    from . import _environment, _table

    report = sys.modules.get(f"{__name__}._report")
    if report is not None:
        report.started(name)
    rows = _table.rows(torch, name) + _environment.backend_rows(name)
    timed("rows")
    _warm_torch_caches()
    _table.install(torch, rows)
    timed("install")
    # Names bound before this import (`from torch.cuda import
    # synchronize` in the user's modules) are migrated too.
    _C.rebind(sys.modules, _NOT_USER, _USER_ANYWAY)
    timed("rebind")


def disable():
    """Put back every object enable() replaced (the very same objects), and
    every environment variable it set, but what the script has changed
    since.  The npu device itself stays available."""
    with _lock:
        try:
            _C.disable()
        finally:
            _serve(False)
            report = sys.modules.get(f"{__name__}._report")
            if report is not None:
                report.release()


def is_enabled():
    return _C.is_enabled()


def mappings():
    """One dict per mapped symbol: source, target, kind and how many calls
    were migrated."""
    return [{"source": m["source"], "target": m["target"], "kind": m["kind"],
             "calls": m["calls"]} for m in _C.mappings()]


def _run_by_our_cli():
    """`python -m transfer_to_npu ...` imports this package before its
    __main__ reads the command line; that __main__ enables, with its
    options."""
    argv = getattr(sys, "orig_argv", None) or []
    if sys.argv[:1] != ["-m"]:
        return False
    for i, arg in enumerate(argv):
        if arg == "-m":
            return argv[i + 1:i + 2] == [__name__]
        if arg.startswith("-m"):
            return arg[2:] == __name__
    return False


def _mode():
    """TRANSFER_TO_NPU: "off" (0: not migrated, even where the script imports
    this package: the original run a compare dumps on CUDA), "rehearse"
    (converted code run as on torch_npu: rehearse()), else "on"."""
    value = os.environ.get("TRANSFER_TO_NPU", "").strip().lower()
    if value in ("0", "false", "no", "off"):
        return "off"
    return "rehearse" if value == "rehearse" else "on"


if not _run_by_our_cli():
    if _mode() == "rehearse":
        rehearse()
    elif _mode() == "on":
        enable()
    # The dump (accuracy/dump.py) loads only when asked for: off, nothing of it
    # exists.
    if os.environ.get("TRANSFER_TO_NPU_DUMP"):
        from .accuracy import dump

        dump.start()
