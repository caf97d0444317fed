"""The files of a code base, as the static tools read them.

``walk()`` lists a tree's files, once each (a symbolic link in it is an
entry of its own, never followed); ``decode_python()`` decodes a
Python file as Python does (its coding cookie, a BOM) and parses it.  A
file that cannot be read, decoded or parsed raises ``SourceError`` naming
why and where: the tools report it and go on with the next file.
"""

import ast
import bisect
import io
import os
import re
import sys
import time
import tokenize

from .._rules import cuda_extensions

PYTHON = ".py"
# CUDA C++ sources are cuda_extensions.CUDA_SUFFIXES; C++ sources that
# include CUDA's headers are CUDA code too.
CPP_SUFFIXES = (".c", ".cc", ".cpp", ".cxx", ".h", ".hh", ".hpp", ".hxx")

# Directories that hold no code of the user's own.
_SKIP_DIRS = frozenset(("__pycache__", ".git", ".hg", ".svn", ".tox", ".mypy_cache",
                        ".pytest_cache", "node_modules"))

# On one line (a directive is one): [ \t] rather than \s, and no run that
# may cross lines, so that a file of blank lines is read in linear time.
_CUDA_INCLUDE = re.compile(
    rb'^[ \t]*#[ \t]*include[ \t]*[<"]((?:cuda|cublas|cudnn|curand|cusparse|cufft|nccl|thrust/|'
    rb'cub/|ATen/cuda/|c10/cuda/)[^>"\r\n]*)[>"]', re.M)


class SourceError(Exception):
    """A file the tools cannot read: ``reason``, and where in it."""

    def __init__(self, reason, line=0, column=0):
        super().__init__(reason)
        self.reason, self.line, self.column = reason, line, column


class Entry:
    """One file: its path as shown (under the path the user gave), its
    relative path inside that path, and its kind ("python", "cuda",
    "cpp", "other"), or an error."""

    __slots__ = ("path", "rel", "kind", "error", "link")

    def __init__(self, path, rel, kind, error=None, link=None):
        self.path, self.rel, self.kind, self.error, self.link = path, rel, kind, error, link


def kind_of(name):
    if name.endswith(PYTHON):
        return "python"
    if name.endswith(cuda_extensions.CUDA_SUFFIXES):
        return "cuda"
    if name.endswith(CPP_SUFFIXES):
        return "cpp"
    return "other"


def walk(root, skip=_SKIP_DIRS, top_skip=()):
    """The entries under root (a file or a directory), in a stable order,
    but for the directories named in ``skip`` (anywhere) and ``top_skip``
    (in root itself).  Each directory is an entry of kind "dir" before what
    it holds.  A symbolic link inside the tree is an entry of kind "link"
    (its target in ``link``), never followed: what it points at is walked
    where it is, if inside the tree, and not at all if outside.  Root
    itself, named by the user, is followed."""
    if not os.path.lexists(root):
        yield Entry(root, "", "other", SourceError("no such file or directory"))
        return
    if not os.path.isdir(root):
        if not os.path.exists(root):
            yield Entry(root, os.path.basename(root), "other",
                        SourceError("a broken symbolic link"))
        else:
            yield Entry(root, os.path.basename(root), kind_of(root))
        return
    try:
        st = os.stat(root)
    except OSError as exc:
        yield Entry(root, "", "other", SourceError(f"cannot read it ({exc.strerror})"))
        return
    yield from _walk_dir(root, "", {(st.st_dev, st.st_ino)}, frozenset(skip),
                         frozenset(top_skip))


def _listing(path, rel):
    """(entries of a directory in name order, or an error Entry)."""
    try:
        with os.scandir(path) as it:
            return sorted(it, key=lambda e: e.name), None
    except OSError as exc:
        return (), Entry(path, rel, "other", SourceError(f"cannot list it ({exc.strerror})"))


def _walk_dir(path, rel, ancestors, skip, top_skip):
    # Depth first, in name order, with a stack rather than recursion: a
    # tree may nest deeper than Python's recursion allows.
    entries, error = _listing(path, rel)
    if error is not None:
        yield error
        return
    stack = [(iter(entries), path, rel, ancestors)]
    while stack:
        it, path, rel, ancestors = stack[-1]
        e = next(it, None)
        if e is None:
            stack.pop()
            continue
        shown = os.path.join(path, e.name)
        sub = os.path.join(rel, e.name) if rel else e.name
        try:
            if e.is_symlink():
                yield Entry(shown, sub, "link", link=os.readlink(shown))
                continue
            is_dir = e.is_dir(follow_symlinks=False)
            st = e.stat(follow_symlinks=False) if is_dir else None
            regular = not is_dir and e.is_file(follow_symlinks=False)
        except OSError as exc:
            yield Entry(shown, sub, "other", SourceError(f"cannot read it ({exc.strerror})"))
            continue
        if not is_dir:
            if regular:
                yield Entry(shown, sub, kind_of(e.name))
            continue
        if e.name in skip or (not rel and e.name in top_skip):
            continue
        ident = (st.st_dev, st.st_ino)
        if ident in ancestors:  # a directory mounted inside itself
            yield Entry(shown, sub, "other",
                        SourceError("a directory that holds itself: not walked again"))
            continue
        yield Entry(shown, sub, "dir")
        entries, error = _listing(shown, sub)
        if error is not None:
            yield error
            continue
        stack.append((iter(entries), shown, sub, ancestors | {ident}))


def is_test(path):
    """Whether a Python file is a test (test_*.py, *_test.py, conftest.py,
    or under a tests/ or test/ folder)."""
    parts = os.path.normpath(path).split(os.sep)
    name = parts[-1]
    return name.startswith("test_") or name.endswith("_test.py") or name == "conftest.py" or \
        any(p in ("tests", "test", "testing") for p in parts[:-1])


def read_bytes(path):
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as exc:
        raise SourceError(f"cannot read it ({exc.strerror})") from None


def detect_encoding(data):
    """The encoding Python reads source bytes with (coding cookie, BOM)."""
    try:
        return tokenize.detect_encoding(io.BytesIO(data).readline)[0]
    except SyntaxError as exc:
        raise SourceError(f"its encoding declaration is invalid ({exc.msg})", exc.lineno or 0) \
            from None


def decode_python(data):
    """The text of Python source bytes, decoded as the interpreter would."""
    if b"\0" in data:
        raise SourceError("a binary file (it holds NUL bytes), not Python source")
    encoding = detect_encoding(data)
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise SourceError(f"not valid {encoding} (byte 0x{data[exc.start]:02x})", line, column) \
            from None


def parse_python(text, path):
    try:
        return ast.parse(text, filename=path)
    except SyntaxError as exc:
        raise SourceError(f"does not parse: {exc.msg}", exc.lineno or 0, exc.offset or 0) \
            from None
    except (RecursionError, MemoryError):
        raise SourceError("too deeply nested to parse") from None
    except ValueError as exc:  # source that compile() refuses outright
        raise SourceError(f"does not parse: {exc}") from None


def cuda_code(data):
    """Where C++ source is CUDA code: [(line, what)] for each CUDA kernel
    (__global__ function) and each CUDA header included."""
    text = data.decode("utf-8", "replace")
    lines = [m.end() for m in re.finditer("\n", text)]
    found = [(bisect.bisect_right(lines, at) + 1, f"kernel {name}")
             for at, name in cuda_extensions.kernel_matches(text)]
    lines = [m.end() for m in re.finditer(b"\n", data)]
    for m in _CUDA_INCLUDE.finditer(data):
        found.append((bisect.bisect_right(lines, m.start()) + 1,
                      f"#include <{m.group(1).decode('utf-8', 'replace')}>"))
    return sorted(found)


class Progress:
    """One line on a terminal, rewritten in place at most ten times a
    second; nothing when the stream is not a terminal."""

    def __init__(self, label, stream=None):
        self.stream = sys.stderr if stream is None else stream
        self.label = label
        try:
            self.on = self.stream.isatty()
        except (AttributeError, ValueError):
            self.on = False
        self.last = 0.0
        self.width = 0

    def update(self, text):
        if not self.on:
            return
        now = time.monotonic()
        if now - self.last < 0.1:
            return
        self.last = now
        line = f"{self.label}: {text}"
        self.stream.write("\r" + line.ljust(self.width))
        self.stream.flush()
        self.width = len(line)

    def done(self):
        if self.on and self.width:
            self.stream.write("\r" + " " * self.width + "\r")
            self.stream.flush()
