"""Files a run writes (traces, results.json, caches, notebooks, docs): checked before the
work, written whole or not at all. Pure standard library: the bottom layer, importable by all.

A file written in place is destroyed by a full disk or a Ctrl-C half way through (the old
content is gone, the new one truncated). ``write_atomic`` writes a temporary file in the same
folder, flushes it to disk, then renames it over the target: rename(2) within one file
system is atomic, so a reader sees the old file or the new one, never a mix (the same
pattern as git's lockfiles and ``atomicwrites``; POSIX rename(2), "If newpath already
exists, it shall be atomically replaced").
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path


def check_writable(path) -> Path:
    """``path`` as a Path if a file can be written there: not a directory, its folder exists
    and is writable. Otherwise a ValueError saying which, to run before minutes of work."""
    path = Path(path)
    folder = path.parent
    if path.is_dir():
        raise ValueError(f"{path} is a directory; give a file name")
    if not folder.is_dir():
        raise ValueError(f"folder {folder} does not exist" if not folder.exists() else f"{folder} is not a folder")
    probe = _temporary(path)  # creating a file is the test that holds for root, read-only mounts, /proc
    try:
        os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        probe.unlink()
    except OSError as exc:
        raise ValueError(f"folder {folder} is not writable: {exc.strerror}") from None
    if path.exists() and not os.access(path, os.W_OK):
        raise ValueError(f"{path} is read-only")
    return path


def _temporary(path: Path) -> Path:
    """A name beside ``path`` that no other writer uses (hidden, so a listing skips it)."""
    return path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")


def write_atomic(path, data: str | bytes) -> Path:
    """Write ``data`` (text as UTF-8) to ``path`` whole: a temporary file beside it, fsync, then
    os.replace. On any error (ENOSPC, Ctrl-C) the temporary file is removed and ``path`` keeps
    its old content. The new file has the mode open(2) gives under the umask (0o666 & ~umask)."""
    path = Path(path)
    payload = data.encode() if isinstance(data, str) else data
    tmp = _temporary(path)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(payload)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path
