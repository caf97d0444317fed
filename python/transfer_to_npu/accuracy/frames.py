"""Whose code a frame runs: the user's (the script and its own modules),
or torch's, this package's, the standard library's or an installed
library's.  The first frame of the user's names a call site, a failure's
place and a line that ran."""

import os
import site
import sys
import sysconfig

from .. import _report

_cache = {}


def _library_dirs():
    paths = set()
    for name in ("stdlib", "platstdlib", "purelib", "platlib"):
        path = sysconfig.get_paths().get(name)
        if path:
            paths.add(path)
    for getter in (getattr(site, "getsitepackages", None),
                   getattr(site, "getusersitepackages", None)):
        try:
            found = getter() if getter is not None else ()
        except Exception:  # a site module of a virtualenv without them
            found = ()
        paths.update([found] if isinstance(found, str) else found)
    paths.update(p for p in sys.path if p.endswith(("site-packages", "dist-packages")))
    return tuple(os.path.join(os.path.realpath(p), "") for p in paths if p)


_LIBRARIES = None


def is_user(filename):
    """Whether code of this file is the user's: a real file outside torch,
    this package, the standard library and installed libraries."""
    found = _cache.get(filename)
    if found is None:
        global _LIBRARIES
        if _LIBRARIES is None:
            _LIBRARIES = _report._internal_prefixes() + _library_dirs()
        # Most files asked about are a library's, named as such already (an
        # import's): no look-up of links for them.
        path = os.path.realpath(filename) if not filename.startswith(("<", *_LIBRARIES)) \
            else ""
        found = bool(path) and not path.startswith(_LIBRARIES) and os.path.isfile(path)
        _cache[filename] = found
    return found


def last_user_frame(tb):
    """(file, line, function) of the innermost frame of the user's code in a
    traceback, else of its innermost frame; None for no traceback."""
    found = last = None
    while tb is not None:
        code = tb.tb_frame.f_code
        last = (code.co_filename, tb.tb_lineno, code.co_name)
        if is_user(code.co_filename):
            found = last
        tb = tb.tb_next
    return found or last


def source_line(filename, line):
    import linecache

    return linecache.getline(filename, line).strip()
