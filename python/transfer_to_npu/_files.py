"""The files the package reads and writes (the rules file, the report),
which may sit where other users can plant things (a shared /tmp): nothing
is followed through a link it did not expect, nothing waits on a FIFO or a
device, nothing another user owns is written, and what is written appears
whole or not at all.  (The log is opened by the C core, by the same
rules.)"""

import errno
import os
import stat
import tempfile

# A rules file is a few kilobytes; this bounds what a mistaken path (a
# huge file) can make the import read.
MAX_READ = 256 << 20


class UnsafePath(OSError):
    """A path the package will not read or write, and why."""


def read_regular(path):
    """The bytes of the regular file at path (symlinks followed: the path
    is the user's own choice), opened without waiting on a FIFO; a FIFO,
    a device or a directory is refused."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise UnsafePath(errno.EINVAL, "not a regular file", path)
        if info.st_size > MAX_READ:
            raise UnsafePath(errno.EFBIG, f"larger than {MAX_READ >> 20} MiB", path)
        chunks, left = [], info.st_size
        while left > 0:
            chunk = os.read(fd, left)
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def check_target(path):
    """Raise UnsafePath unless path can take a file this process writes:
    its directory is writable, and the path is free or a regular file of
    this user's (never a link, a FIFO, a device: writing would follow,
    block, or replace it)."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        info = None
    if info is not None:
        if stat.S_ISLNK(info.st_mode):
            raise UnsafePath(errno.ELOOP, "a symbolic link", path)
        if not stat.S_ISREG(info.st_mode):
            raise UnsafePath(errno.EINVAL, "not a regular file", path)
        if info.st_uid != os.geteuid():
            raise UnsafePath(errno.EPERM, "another user's file", path)
    directory = os.path.dirname(os.path.abspath(path))
    if not os.access(directory, os.W_OK | os.X_OK):
        raise UnsafePath(errno.EACCES, "its directory is not writable", path)


def remove_stale(path, is_ours):
    """Remove what an earlier run left at path, so that the file written at
    exit is this run's: a regular file of this user's whose bytes is_ours
    recognises.  Anything else there is kept (a mistaken path never costs
    the user a file); True if path is free now."""
    check_target(path)
    try:
        if not is_ours(read_regular(path)):
            return False
        os.unlink(path)
    except FileNotFoundError:
        pass
    except UnsafePath:  # too large to be ours
        return False
    return True


def _temporary(path, data):
    """A new file of an unpredictable name beside path, holding data."""
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{os.path.basename(path)}.")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, 0o644)
    except BaseException:
        os.unlink(tmp)
        raise
    return tmp


def write_in_new_directory(path, data):
    """Write data at path, in a directory this process has just made (no
    file of anyone else's can be there, where replace's checks cost a
    dumped step's files more than writing them): whole or not at all,
    through a temporary name beside it, never through a link."""
    tmp = os.path.join(os.path.dirname(path), f".{os.path.basename(path)}.part")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
        finally:
            os.close(fd)
        os.rename(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def write_new(path, data, fallback):
    """Write data to a new file at path, whole or not at all: through a
    temporary file of an unpredictable name beside it, linked to path only
    if path is free; if another process has written path meanwhile, to
    fallback instead.  Returns the path written."""
    tmp = _temporary(path, data)
    try:
        for target in (path, fallback):
            try:
                os.link(tmp, target)  # never replaces: another process's file stays
                return target
            except FileExistsError:
                continue
        raise UnsafePath(errno.EEXIST, "taken, and so is the path beside it", fallback)
    finally:
        os.unlink(tmp)


def replace(path, data):
    """Write data at path, replacing a regular file of this user's there
    (never a link, a FIFO, a device: check_target), whole or not at all."""
    check_target(path)
    tmp = _temporary(path, data)
    try:
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
