"""Write a file whole or not at all: a temporary file beside it, renamed over it on success.

``with atomic_output(path) as stream:`` writes to ``.NAME.XXXX.tmp`` in ``path``'s directory
(the same file system, so the rename is atomic). When the block ends normally the data is
flushed and fsynced, then :func:`os.replace` puts it in place and the directory is fsynced;
when it raises (any exception, ``KeyboardInterrupt`` included) the temporary file is removed
and an existing ``path`` keeps every byte. Only a killed process (SIGKILL, power loss) can
leave a ``.tmp`` file behind, and even then ``path`` is untouched.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO


@contextlib.contextmanager
def atomic_output(path: Path) -> Iterator[BinaryIO]:
    """A binary stream whose content replaces ``path`` only if the block succeeds."""
    fd, temp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    temp = Path(temp_name)
    try:
        with os.fdopen(fd, "wb") as stream:
            os.fchmod(stream.fileno(), _mode_for(path))
            yield stream
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temp, path)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    _fsync_directory(path.parent)


def _mode_for(path: Path) -> int:
    """The mode of the file being replaced, or what ``open`` would give a new one (umask)."""
    try:
        return path.stat().st_mode & 0o777
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def _fsync_directory(directory: Path) -> None:
    """Make the rename itself durable (best effort where directories cannot be opened)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
