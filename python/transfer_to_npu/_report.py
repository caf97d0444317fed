"""What was migrated: the mapping log, its exit summary and the JSON report.

    TRANSFER_TO_NPU_LOG=1|2        log mappings (first hit per call site | every call)
    TRANSFER_TO_NPU_LOG_FILE=path  log there instead of stderr
    TRANSFER_TO_NPU_REPORT=path    write a JSON report at exit

Lines and call sites are recorded by the C core, in the mapping table; this
module configures it, and at exit reads the table for the summary and the
report.  Every process writes its own files: when several processes share a
path, the ones after the first add ``.rank<RANK>`` (or ``.pid<PID>``), and a
path may also say where with ``{rank}`` and ``{pid}``.
"""

import atexit
import json
import os
import sys
import warnings

from . import _C, _files

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))

_state = {"level": 0, "log_path": None, "report_path": None, "backend": None,
          "registered": False}

# The claims on shared paths this process made (marker -> value), which
# release() takes back.
_claims = {}


def _int_env(name, default=0):
    raw = os.environ.get(name, "").strip()
    if raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        value = -1
    if value not in (0, 1, 2):
        raise ValueError(f"{name} must be 0, 1 or 2, got {raw!r}")
    return value


def per_process_path(path, kind):
    """The file this process writes for a path that several processes may
    share (kind: "LOG" or "REPORT")."""
    pid = os.getpid()
    rank = os.environ.get("RANK")
    if "{pid}" in path or "{rank}" in path:
        return path.replace("{pid}", str(pid)).replace("{rank}", rank if rank is not None else "0")
    marker = f"TRANSFER_TO_NPU_{kind}_OWNER"
    owner = os.environ.get(marker)
    if owner is None:
        # The first process to claim the path; the processes it starts
        # inherit the claim and write beside it.
        os.environ[marker] = _claims[marker] = str(pid)
        return path if rank in (None, "0") else f"{path}.rank{rank}"
    if owner == str(pid):
        return path
    return f"{path}.rank{rank}" if rank is not None else f"{path}.pid{pid}"


def release():
    """Take back the claims this process made, those the script has not
    changed since (disable()); the next enable() makes them again."""
    for marker, value in list(_claims.items()):
        if os.environ.get(marker) == value:
            del os.environ[marker]
        del _claims[marker]


def _internal_prefixes():
    import torch

    return (os.path.dirname(os.path.abspath(torch.__file__)) + os.sep, _PACKAGE_DIR + os.sep)


def _usable(path, what):
    """path, if this process can write the log or the report there (a
    report left by an earlier run is removed now, so that the one at exit
    is this run's); else None, with a warning."""
    try:
        if what == "log":
            _files.check_target(path)
        elif not _files.remove_stale(path, _is_report):
            warnings.warn(f"transfer_to_npu: {path!r} holds a file that is not a report; it is "
                          f"kept, and the report will be written beside it", RuntimeWarning,
                          stacklevel=4)
    except OSError as exc:
        warnings.warn(f"transfer_to_npu: cannot write the {what} to {path!r} ({exc.strerror}); "
                      f"{'logging to stderr' if what == 'log' else 'no report will be written'}",
                      RuntimeWarning, stacklevel=4)
        return None
    return path


def _is_report(data):
    """Whether data is a report as write_report writes it."""
    try:
        content = json.loads(data)
    except ValueError:
        return False
    return isinstance(content, dict) and {"backend", "mappings"} <= content.keys()


def configure(backend=None, level=None, log_file=None, report=None):
    """Set the log and the report from arguments, else from the
    environment; with the backend, say where CUDA calls run (started())."""
    level = _int_env("TRANSFER_TO_NPU_LOG") if level is None else level
    if level not in (0, 1, 2):
        raise ValueError(f"log level must be 0, 1 or 2, got {level!r}")
    log_file = os.environ.get("TRANSFER_TO_NPU_LOG_FILE") if log_file is None else log_file
    report = os.environ.get("TRANSFER_TO_NPU_REPORT") if report is None else report
    log_path = _usable(per_process_path(log_file, "LOG"), "log") if log_file else None
    report_path = _usable(per_process_path(report, "REPORT"), "report") if report else None
    _state.update(level=level, log_path=log_path, report_path=report_path,
                  log_file=log_file, report=report)
    _C.log_configure(level, log_path, report_path is not None, _internal_prefixes())
    if backend is not None:
        started(backend)
    if not _state["registered"]:
        _state["registered"] = True
        atexit.register(_at_exit)
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=_after_fork)


def started(backend):
    """The backend is installed: the log says which (rank 0's), the
    summary and the report name it."""
    _state["backend"] = backend
    if _state["level"] and os.environ.get("RANK", "0") == "0":
        _C.log_write(f"transfer_to_npu: CUDA calls run on the npu ({backend} backend)\n")


def _after_fork():
    """A forked child (a data-loading worker, os.fork()) writes its own
    calls, which it counts itself (the package resets the counts), in its
    own files."""
    if _state["level"] or _state["report_path"]:
        log_path = (_usable(per_process_path(_state["log_file"], "LOG"), "log")
                    if _state["log_path"] else None)
        report_path = (_usable(per_process_path(_state["report"], "REPORT"), "report")
                       if _state["report_path"] else None)
        _state.update(log_path=log_path, report_path=report_path)
        _C.log_configure(_state["level"], log_path, report_path is not None,
                         _internal_prefixes())


def used_mappings():
    """Table entries hit in this process, with their call sites."""
    return [m for m in _C.mappings() if m["calls"]]


def summary():
    rows = sorted(used_mappings(), key=lambda m: (-m["calls"], m["source"]))
    lines = [f"transfer_to_npu: summary ({_state['backend']} backend): "
             f"{sum(m['calls'] for m in rows)} calls migrated, {len(rows)} APIs\n"]
    if rows:
        lines.append(f"  {'calls':>8} {'sites':>5}  source -> target\n")
    for m in rows:
        lines.append(f"  {m['calls']:>8} {len(m['sites']):>5}  {m['source']} -> {m['target']}\n")
    return "".join(lines)


def report():
    """The JSON report's content."""
    import torch

    used = used_mappings()
    return {
        "backend": _state["backend"],
        "torch_version": torch.__version__,
        "mappings": [{"source": m["source"], "target": m["target"], "count": m["calls"],
                      "sites": [where for where, _ in m["sites"]]}
                     for m in used if m["kind"] != "unsupported"],
        "unsupported": [{"api": m["source"], "count": m["calls"],
                         "sites": [where for where, _ in m["sites"]]}
                        for m in used if m["kind"] == "unsupported"],
        # CUDA C++ extensions refused, with the kernels that need an Ascend
        # port (_rules/cuda_extensions.py; loaded only when one was built).
        "cuda_extensions": list(getattr(sys.modules.get(f"{__package__}._rules.cuda_extensions"),
                                        "REFUSED", ())),
    }


def write_report(path):
    """Write the report at path, or, when another process has written path
    meanwhile (an independent run given the same path), beside it."""
    data = (json.dumps(report(), indent=2) + "\n").encode()
    written = _files.write_new(path, data, f"{path}.pid{os.getpid()}")
    if written != path:
        print(f"transfer_to_npu: {path} is taken (another process's report, or a file "
              f"that is not a report); this report is {written}", file=sys.stderr)


def _at_exit():
    try:
        if _state["level"]:
            _C.log_write(summary())
        if _state["report_path"]:
            write_report(_state["report_path"])
    except Exception as exc:  # at exit there is no caller left to raise to
        print(f"transfer_to_npu: could not write the summary or report: {exc}", file=sys.stderr)
