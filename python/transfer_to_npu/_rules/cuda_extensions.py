"""CUDA C++ extensions: ``torch.utils.cpp_extension.load`` and
``load_inline`` with CUDA sources (``.cu`` files, ``cuda_sources=``,
``with_cuda=True``), and ``CUDAExtension`` in a setup script, fail with an
error that lists the extension's kernels (its ``__global__`` functions) as
needing an Ascend port; the report lists them too (``cuda_extensions``).
An extension of C++ alone builds as before.  The rows wait in the import
hook until torch.utils.cpp_extension is imported.
"""

import bisect
import functools
import inspect
import os
import re
import sys

from .. import _C
from ._row import row

MODULE = "torch.utils.cpp_extension"
CUDA_SUFFIXES = (".cu", ".cuh")
# Patterns, not compiled ones: compiling them takes half a millisecond of
# every process start, for a refusal most processes never make (re caches
# what it compiles).  Each is read in linear time (kernel_matches).
_LAUNCH_BOUNDS = r"__launch_bounds__\s*\("
_GLOBAL = r"__global__(?=\s)"
_DELIMITER = r"[;{}()]"
ADVICE = ("write them as Ascend C custom operators (registered for torch_npu through its "
          "op-plugin), or in torch ops")

#: The extensions refused in this process, for the report.
REFUSED = []


class CUDAExtensionError(NotImplementedError):
    """A CUDA C++ extension: its kernels need an Ascend port."""


def kernel_matches(text):
    """(offset, name) of each CUDA kernel (``__global__`` function) in
    source text: the name before the first parenthesis after
    ``__global__``, with no ``;{}()`` between them.  A
    ``__launch_bounds__(...)`` there is blanked first, keeping offsets, so
    that it is not read as the kernel's name.  Every character is looked at
    a bounded number of times, whatever the text (a pattern that backtracks
    over a run of it is quadratic on a file of ``__global__ aaaa...``)."""
    parts, pos = [], 0
    for m in re.finditer(_LAUNCH_BOUNDS, text):
        if m.start() < pos:
            continue
        close = text.find(")", m.end())
        if close < 0:
            break
        parts += [text[pos:m.start()], " " * (close + 1 - m.start())]
        pos = close + 1
    text = "".join(parts) + text[pos:]
    delimiters = [m.start() for m in re.finditer(_DELIMITER, text)]
    names = {}  # parenthesis -> where the word before it starts
    found, pos = [], 0
    for m in re.finditer(_GLOBAL, text):
        if m.start() < pos:
            continue
        i = bisect.bisect_left(delimiters, m.end())
        if i == len(delimiters):
            break
        paren = delimiters[i]
        if text[paren] != "(":
            continue
        start = names.get(paren)
        if start is None:
            # The word just before the parenthesis, blanks between.
            end = paren
            while end > m.end() and text[end - 1].isspace():
                end -= 1
            start = end
            while start > m.end() and (text[start - 1].isalnum() or text[start - 1] == "_"):
                start -= 1
            names[paren] = start = (start, end)
        if start[0] < start[1]:
            found.append((m.start(), text[start[0]:start[1]]))
            pos = paren + 1
    return found


def kernels(text):
    """The names of the CUDA kernels in source text, each once."""
    return list(dict.fromkeys(name for _, name in kernel_matches(text)))


def _read(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def _site():
    """file:line of the first frame outside torch and this package."""
    package = sys.modules[__package__.rpartition(".")[0]]
    internal = tuple(os.path.dirname(m.__file__) for m in (sys.modules["torch"], package))
    frame = sys._getframe(2)
    while frame is not None and frame.f_code.co_filename.startswith(internal):
        frame = frame.f_back
    return "?" if frame is None else f"{frame.f_code.co_filename}:{frame.f_lineno}"


def _refuse(api, name, found):
    """found: [(kernel, where)]."""
    REFUSED.append({"api": api, "extension": name, "site": _site(),
                    "kernels": [{"kernel": k, "source": where} for k, where in found]})
    listed = ", ".join(f"{k} ({where})" for k, where in found) or "none found in its sources"
    raise CUDAExtensionError(f"{api}({name!r}) builds CUDA code, which cannot run on the NPU: "
                             f"its CUDA kernels need an Ascend port ({ADVICE}). Kernels: "
                             f"{listed}")


def _from_files(sources):
    if isinstance(sources, (str, os.PathLike)):
        sources = [sources]
    cuda = [os.fspath(s) for s in sources or () if os.fspath(s).endswith(CUDA_SUFFIXES)]
    return cuda, [(k, os.path.basename(path)) for path in cuda for k in kernels(_read(path))]


def _bind(original, args, kwargs):
    try:
        return inspect.signature(original).bind_partial(*args, **kwargs).arguments
    except (TypeError, ValueError):
        return dict(kwargs)


def load(original):
    """cpp_extension.load, refusing CUDA sources."""
    @functools.wraps(original)
    def load(*args, **kwargs):
        bound = _bind(original, args, kwargs)
        cuda, found = _from_files(bound.get("sources"))
        if cuda or bound.get("with_cuda"):
            _refuse("torch.utils.cpp_extension.load", bound.get("name"), found)
        return original(*args, **kwargs)

    return load


def load_inline(original):
    """cpp_extension.load_inline, refusing CUDA sources."""
    @functools.wraps(original)
    def load_inline(*args, **kwargs):
        bound = _bind(original, args, kwargs)
        cuda = bound.get("cuda_sources")
        if isinstance(cuda, str):
            cuda = [cuda]
        if cuda or bound.get("with_cuda"):
            found = [(k, "cuda_sources") for text in cuda or () for k in kernels(text)]
            _refuse("torch.utils.cpp_extension.load_inline", bound.get("name"), found)
        return original(*args, **kwargs)

    return load_inline


def cuda_extension(original):
    """CUDAExtension: always CUDA."""
    @functools.wraps(original)
    def CUDAExtension(name, sources, *args, **kwargs):
        _refuse("torch.utils.cpp_extension.CUDAExtension", name, _from_files(sources)[1])

    return CUDAExtension


def rows(torch):
    target = ("CUDA sources refused, their kernels listed as needing an Ascend port "
              "(C++ alone builds as before)")
    return [row(f"{MODULE}.{name}", target, "cuda_extension", _C.MODE_REDIRECT, MODULE, name,
                f"{__name__}:{factory}()", kws=())
            for name, factory in (("load", "load"), ("load_inline", "load_inline"),
                                  ("CUDAExtension", "cuda_extension"))]
