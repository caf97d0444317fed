"""The files of a code base, as the static tools read them.

``walk()`` lists a tree's files (symbolic links to directories followed
once: a loop is reported, not followed again); ``read_python()`` decodes a
Python file as Python does (its coding cookie, a BOM) and parses it.  A
file that cannot be read, decoded or parsed raises ``SourceError`` naming
why and where: the tools report it and go on with the next file.
"""

import ast
import io
import os
import re
import stat
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

_CUDA_INCLUDE = re.compile(
    rb'^\s*#\s*include\s*[<"]((?:cuda|cublas|cudnn|curand|cusparse|cufft|nccl|thrust/|cub/|'
    rb'ATen/cuda/|c10/cuda/)[^>"]*)[>"]', re.M)


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


def walk(root, follow_links=True, skip=_SKIP_DIRS):
    """The entries under root (a file or a directory), in a stable order,
    but for the directories named in ``skip``.  With ``follow_links`` a
    symbolic link to a directory is walked (once: one that leads back into
    a directory being walked is a loop, reported as an error entry);
    without, any symbolic link is an entry of kind "link"."""
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
    yield from _walk_dir(root, "", {(st.st_dev, st.st_ino)}, follow_links, frozenset(skip))


def _walk_dir(path, rel, ancestors, follow_links, skip):
    try:
        with os.scandir(path) as it:
            entries = sorted(it, key=lambda e: e.name)
    except OSError as exc:
        yield Entry(path, rel, "other", SourceError(f"cannot list it ({exc.strerror})"))
        return
    for e in entries:
        shown = os.path.join(path, e.name)
        sub = os.path.join(rel, e.name) if rel else e.name
        try:
            is_link = e.is_symlink()
            is_dir = e.is_dir()  # follows a link
        except OSError as exc:
            yield Entry(shown, sub, "other", SourceError(f"cannot read it ({exc.strerror})"))
            continue
        if is_link and not follow_links:
            yield Entry(shown, sub, "link", link=os.readlink(shown))
            continue
        if is_dir:
            if e.name in skip:
                continue
            try:
                st = os.stat(shown)
            except OSError as exc:
                yield Entry(shown, sub, "other", SourceError(f"cannot read it ({exc.strerror})"))
                continue
            ident = (st.st_dev, st.st_ino)
            if ident in ancestors:
                yield Entry(shown, sub, "other",
                            SourceError(f"a symbolic link loop (back to "
                                        f"{os.path.realpath(shown)}): not followed"))
                continue
            yield from _walk_dir(shown, sub, ancestors | {ident}, follow_links, skip)
        elif is_link and not os.path.exists(shown):
            yield Entry(shown, sub, "other", SourceError("a broken symbolic link"))
        else:
            try:
                regular = stat.S_ISREG(os.stat(shown).st_mode)
            except OSError as exc:
                yield Entry(shown, sub, "other", SourceError(f"cannot read it ({exc.strerror})"))
                continue
            if regular:
                yield Entry(shown, sub, kind_of(e.name))


def read_bytes(path):
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as exc:
        raise SourceError(f"cannot read it ({exc.strerror})") from None


_NEWLINES = re.compile(r"\r\n|\r|\n")


def split_lines(text):
    """The lines of source text, as Python counts them (a form feed or
    other Unicode line break inside a line does not end it)."""
    return _NEWLINES.split(text)


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
    found = [(text.count("\n", 0, at) + 1, f"kernel {name}")
             for at, name in cuda_extensions.kernel_matches(text)]
    for m in _CUDA_INCLUDE.finditer(data):
        found.append((data.count(b"\n", 0, m.start()) + 1,
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
