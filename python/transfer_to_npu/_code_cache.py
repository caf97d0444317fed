"""This package's compiled modules, cached on disk in one file.

Imported one by one, the package's modules cost the import system a search
of the path, a stat, an open and a read of each one's .pyc: some 140 us a
module on a slow file system, half of the first import.  Their code is kept
instead in one file in ``TRANSFER_TO_NPU_CACHE_DIR`` (beside the facts
learnt from torch), read once.  Each module's entry is used only while its
source has the mtime, size and ctime it had when the entry was made (a
.pyc is checked by the first two; the ctime catches a reinstall that keeps
mtimes); an edited or new module is imported from its file as usual, and
the file is rewritten at exit with its new code.
"""

import atexit
import marshal
import os
import sys
import tempfile
import zlib
from importlib.machinery import ModuleSpec, PathFinder, SourceFileLoader
from importlib.util import MAGIC_NUMBER, cache_from_source
from stat import S_ISREG
from types import CodeType, ModuleType

from . import _C

FORMAT = 2

_PACKAGE = __name__.rpartition(".")[0]
_PREFIX = f"{_PACKAGE}."
_DIRECTORY = os.path.dirname(os.path.abspath(__file__))

# The file: the length of its index (8 bytes, little-endian), the index
# marshalled, then the modules' marshalled code.  The index is read at
# start and each module's code when it is imported, through a descriptor
# kept open (the file as it was checked, whatever replaces it meanwhile):
# a process imports a third of the package.  Not mapped: a file changed
# under a mapping kills the process; a short read is a damaged entry.
_LENGTH = 8

# The index, {name: entry}; an entry is (source path, its (st_mtime_ns,
# st_size, st_ctime_ns), is a package, its __cached__ (worked out once: it
# costs a module some microseconds), the offset and length of its code after
# the index).
_FIELDS = 6
_ORIGIN, _STAMP, _IS_PACKAGE, _CACHED, _OFFSET, _CODE_LENGTH = range(_FIELDS)

# What marshal raises on damaged data (a damaged length: MemoryError).
_DAMAGED = (EOFError, ValueError, TypeError, OverflowError, MemoryError)


if hasattr(_C, "stamp"):
    # The same three numbers, without os.stat's stat_result: the first
    # import states some thirty files.
    _stamp = _C.stamp
else:
    def _stamp(path):
        """What an entry is checked by, or None for a path that cannot be
        stated."""
        try:
            stat = os.stat(path)
        except (OSError, ValueError):
            return None
        return (stat.st_mtime_ns, stat.st_size, stat.st_ctime_ns)


def cache_dir():
    """The directory of the package's caches (this one and the facts learnt
    from torch), or None when they are off."""
    configured = os.environ.get("TRANSFER_TO_NPU_CACHE_DIR")
    if configured is not None:
        return configured or None
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "transfer_to_npu")


def write_atomically(path, chunks):
    """Write a cache file whole or not at all (ranks of a job may write at
    once): through a new file of a name of its own, readable by this user
    alone, put in place by a rename.  A cache that cannot be written is
    simply not written."""
    directory = os.path.dirname(path)
    tmp = None
    try:
        os.makedirs(directory, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=os.path.basename(path), dir=directory)
        with open(fd, "wb") as f:
            f.writelines(chunks)
        os.replace(tmp, path)
    except OSError:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass


def _trusted(stat):
    """Whether code may be run from the cache file of this stat: only a
    regular file that this user wrote and no one else may have (the cache
    directory may be a shared one)."""
    if not S_ISREG(stat.st_mode):
        return False
    if not hasattr(os, "getuid"):
        return True
    return stat.st_uid == os.getuid() and not stat.st_mode & 0o022


def open_trusted(path):
    """A descriptor of a cache file that may say what to run (this one, the
    mapping table's) and its size, or None when it is missing or cannot be
    trusted.  Never through a link, nor waiting on a FIFO planted in a
    shared directory: the file is checked before it is read."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0)
                     | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return None
    try:
        stat = os.fstat(fd)
        if _trusted(stat):
            return fd, stat.st_size
    except OSError:
        pass
    os.close(fd)
    return None


def read_trusted(path):
    """The bytes of a trusted cache file (open_trusted), or None."""
    opened = open_trusted(path)
    if opened is None:
        return None
    fd, size = opened
    try:
        # One read of the size stated, without a buffered file's layers (a
        # short read is damaged data, which its reader refuses).
        return os.read(fd, size)
    except OSError:
        return None
    finally:
        os.close(fd)


def stamp(path):
    """What a module's source is checked by (_stamp), stated once a
    process: the finder has stated the modules it found."""
    found = _cache.stamps.get(path)
    return found if found is not None else _stamp(path)


class _Loader(SourceFileLoader):
    """A module of the package: its code from the cache when the cache holds
    this source's, else compiled (or read from its .pyc) as usual and kept
    for the next cache."""

    def __init__(self, fullname, path, packed=None):
        super().__init__(fullname, path)
        self._packed = packed

    def create_module(self, spec):
        # The import system sets __file__, __cached__ and __path__ where
        # looking each up on the new module fails, which costs it two
        # AttributeErrors (the module's, and its spec's _initializing).
        # Made with them, the module has none to fail.
        module = ModuleType(spec.name)
        if spec.has_location:
            module.__file__ = spec.origin
        if spec.cached is not None:
            module.__cached__ = spec.cached
        if spec.submodule_search_locations is not None:
            module.__path__ = spec.submodule_search_locations
        return module

    def get_code(self, fullname):
        if fullname == self.name and self._packed is not None:
            # Used once: the module's spec keeps its loader for good.
            packed, self._packed = self._packed, None
            try:
                code = marshal.loads(packed)
            except _DAMAGED:
                code = None  # a damaged entry: read the module as usual
            if type(code) is CodeType:
                return code
        # Stated before it is read: a source edited meanwhile is newer than
        # its entry, hence read again next time.
        stamp = _cache.stamps[self.path] = _stamp(self.path)
        code = super().get_code(fullname)
        if stamp is not None and code is not None and fullname == self.name:
            _cache.learnt[fullname] = (self.path, stamp, self.is_package(fullname), code)
        return code


class _Cache:
    """The finder, first on sys.meta_path, of the package's modules."""

    def __init__(self):
        self.path = None
        self.key = None
        self.fd = None  # the file, open while the process may import
        self.file_id = None  # its (st_dev, st_ino), checked before each read
        self.code_start = self.code_size = 0
        self.entries = {}
        self.learnt = {}  # name -> (source path, its stamp, is a package, code)
        self.stamps = {}  # source path -> its stamp, as the finder found it

    def load(self):
        directory = cache_dir()
        if directory is None:
            return False
        self.key = (FORMAT, MAGIC_NUMBER, sys.flags.optimize, sys.pycache_prefix, _DIRECTORY)
        # One file per interpreter and installed copy of the package.
        name = f"code-{sys.implementation.cache_tag}-opt{sys.flags.optimize}"
        self.path = os.path.join(
            directory, f"{name}-{zlib.crc32(_DIRECTORY.encode()):08x}.marshal")
        opened = open_trusted(self.path) if hasattr(os, "pread") else None
        if opened is None:
            return True
        self.fd, size = opened
        try:
            stat = os.fstat(self.fd)
            self.file_id = (stat.st_dev, stat.st_ino)
            length = int.from_bytes(os.pread(self.fd, _LENGTH, 0), "little")
            if 0 < length <= size - _LENGTH:
                key, entries = marshal.loads(os.pread(self.fd, length, _LENGTH))
                self.code_start, self.code_size = _LENGTH + length, size - _LENGTH - length
                if key == self.key and isinstance(entries, dict) and self._whole(entries):
                    self.entries = entries
        except (OSError,) + _DAMAGED:
            pass
        if not self.entries:
            self._close()
        return True

    def _ours(self):
        """Whether the descriptor is still the cache file's: a process may
        close descriptors it did not open (a daemon's closerange), and the
        number then names another file."""
        try:
            stat = os.fstat(self.fd)
        except (OSError, TypeError):
            return False
        return (stat.st_dev, stat.st_ino) == self.file_id

    def _close(self):
        """Stop reading the file: the package's modules are imported from
        their files from now on."""
        if self.fd is not None and self._ours():
            os.close(self.fd)
        self.fd, self.entries = None, {}

    def _whole(self, entries):
        """Whether the file ends where its index says: the entry written
        last ends it, so a file cut or grown since is not read at all.
        The other entries are checked when used (_entry): a process imports
        a third of the package."""
        if not entries:
            return False
        last = next(reversed(entries.values()))
        return self._well_formed(last) and last[_OFFSET] + last[_CODE_LENGTH] == self.code_size

    def _entry(self, name):
        """The index's entry for a module, or None when it has none or a
        damaged one (the module is then read from its file)."""
        entry = self.entries.get(name)
        return entry if entry is not None and self._well_formed(entry) else None

    def _well_formed(self, entry):
        """Whether an entry of a damaged file could not fail an import."""
        if type(entry) is not tuple or len(entry) != _FIELDS:
            return False
        origin, offset, length = entry[_ORIGIN], entry[_OFFSET], entry[_CODE_LENGTH]
        return (type(origin) is str and origin.startswith(_DIRECTORY + os.sep)
                and type(entry[_CACHED]) in (str, type(None))
                and type(offset) is int and type(length) is int
                and 0 <= offset and 0 <= length <= self.code_size - offset)

    def _code_of(self, entry):
        """An entry's marshalled code; short (damaged) when the file was cut
        meanwhile or the descriptor is no longer the file's."""
        if not self._ours():
            self._close()
            return b""
        try:
            return os.pread(self.fd, entry[_CODE_LENGTH], self.code_start + entry[_OFFSET])
        except OSError:
            return b""

    def find_spec(self, fullname, path=None, target=None):
        if not fullname.startswith(_PREFIX):
            return None
        entry = self._entry(fullname)
        if entry is not None:
            origin = entry[_ORIGIN]
            stamp = self.stamps[origin] = _stamp(origin)
            if stamp is not None and stamp == entry[_STAMP]:
                spec = ModuleSpec(fullname, _Loader(fullname, origin, self._code_of(entry)),
                                  origin=origin, is_package=entry[_IS_PACKAGE])
                spec.has_location = True
                spec.cached = entry[_CACHED]
                if entry[_IS_PACKAGE]:
                    spec.submodule_search_locations = [os.path.dirname(origin)]
                return spec
        spec = PathFinder.find_spec(fullname, path, target)
        if spec is not None and type(spec.loader) is SourceFileLoader:
            spec.loader = _Loader(fullname, spec.origin)
        return spec

    def save(self):
        """Write the cache again if modules were compiled or read from
        their files in this process (at exit)."""
        try:
            self._save()
        finally:
            # Modules imported later (by other exit handlers) are read from
            # their files.
            self._close()

    def _save(self):
        if not self.learnt or self.path is None:
            return
        learnt, self.learnt = self.learnt, {}
        index, blobs, offset = {}, [], 0
        for name, entry in self.entries.items():
            if name not in learnt and self._well_formed(entry):
                code = self._code_of(entry)
                if len(code) != entry[_CODE_LENGTH]:
                    continue  # cut meanwhile: learnt again when imported
                index[name] = entry[:_OFFSET] + (offset, len(code))
                blobs.append(code)
                offset += len(code)
        for name, (origin, stamp, is_package, code) in learnt.items():
            code = marshal.dumps(code)
            index[name] = (origin, stamp, is_package, cache_from_source(origin), offset,
                           len(code))
            blobs.append(code)
            offset += len(code)
        header = marshal.dumps((self.key, index))
        write_atomically(self.path, [len(header).to_bytes(_LENGTH, "little"), header, *blobs])


_cache = _Cache()


def install():
    """Serve the package's modules from the cache (once per process; not
    at all when the cache is off)."""
    if _cache in sys.meta_path or not _cache.load():
        return
    sys.meta_path.insert(0, _cache)
    atexit.register(_cache.save)
