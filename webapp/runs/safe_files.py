"""Reading a run's files without following what the upload may have planted.

A run's upload and output folders are written by code that came with the
upload, so anything in them may be a symbolic link (to ``/proc/self/environ``,
the database, another run), a hard link to a file outside, a FIFO (a read
would block forever) or a device.  The downloads (the zip, report.html, the
failed run's source line) read them only through this module, which takes a
file only when it is a *regular file of the run's own*:

- every folder from ``MEDIA_ROOT`` down to it is a real folder, not a link
  (the path resolves to where it says it is);
- the file itself is not a link (``O_NOFOLLOW``) and, once opened, is a
  regular file (``fstat``: no FIFO, socket or device; opened with
  ``O_NONBLOCK`` so a FIFO swapped in after the check cannot hang the read);
- it has one link (``st_nlink == 1``): a hard link to a file outside the
  folder shares that file's inode, and LEGO itself never hard-links output.

Anything else is left out and logged, never followed.
"""
from __future__ import annotations

import logging
import os
import stat
from collections.abc import Iterator
from pathlib import Path

from django.conf import settings

log = logging.getLogger(__name__)

_OPEN_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)


class UnsafeFile(OSError):
    """The path is not a regular file of the run's own (a link, a special
    file, a hard link, or under a folder that is a link)."""


def inside_media(path: Path) -> bool:
    """Whether ``path`` (under ``MEDIA_ROOT``) resolves to itself: no folder
    on the way from ``MEDIA_ROOT`` to it, nor ``path`` itself, is a link."""
    media = Path(os.path.realpath(settings.MEDIA_ROOT))
    try:
        relative = Path(os.path.abspath(path)).relative_to(os.path.abspath(settings.MEDIA_ROOT))
    except ValueError:
        return False
    return os.path.realpath(path) == str(media / relative)


def is_plain_dir(path: Path) -> bool:
    """Whether ``path`` is a real folder under ``MEDIA_ROOT`` (not a link to one)."""
    return inside_media(path) and os.path.isdir(path) and not os.path.islink(path)


def _check_regular(fd: int, what: str) -> os.stat_result:
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        raise UnsafeFile(f"{what} is not a regular file")
    if st.st_nlink != 1:
        raise UnsafeFile(f"{what} has {st.st_nlink} hard links (it may be a file from outside the run)")
    return st


def open_regular(path: Path, *, dir_fd: int | None = None) -> tuple[int, os.stat_result]:
    """Open ``path`` for reading if it is a regular file with one link, not a
    symbolic link; returns ``(fd, stat)``; the caller closes ``fd``.  Raises
    UnsafeFile (or another OSError, e.g. FileNotFoundError) otherwise.
    Without ``dir_fd`` the path must also lie under ``MEDIA_ROOT`` with no
    link on the way."""
    if dir_fd is None and not inside_media(Path(path).parent):
        raise UnsafeFile(f"{path} is not inside the media folder (a folder on the way is a link)")
    before = os.stat(path, dir_fd=dir_fd, follow_symlinks=False)
    if not stat.S_ISREG(before.st_mode):  # never open a FIFO, device or link at all
        raise UnsafeFile(f"{path} is not a regular file")
    fd = os.open(path, _OPEN_FLAGS, dir_fd=dir_fd)
    try:
        st = _check_regular(fd, str(path))
        if (st.st_dev, st.st_ino) != (before.st_dev, before.st_ino):
            raise UnsafeFile(f"{path} changed while it was opened")
    except BaseException:
        os.close(fd)
        raise
    return fd, st


def read_regular(path: Path, limit: int | None = None) -> bytes:
    """The bytes of ``path`` (at most ``limit``) when it is a run's own
    regular file (``open_regular``); UnsafeFile or OSError otherwise."""
    fd, _ = open_regular(path)
    with os.fdopen(fd, "rb") as fh:
        return fh.read() if limit is None else fh.read(limit)


def regular_files(root: Path, skip_dirs: tuple[str, ...] = ("__pycache__",)) -> Iterator[tuple[str, int, os.stat_result]]:
    """``(relative posix path, open fd, stat)`` of every regular file under
    the folder ``root``, sorted, never entering a linked folder
    (``os.fwalk`` with ``follow_symlinks=False``); links, special files and
    hard-linked files are skipped and logged.  The caller closes each fd
    (before asking for the next is fine).  Nothing when ``root`` is not a
    real folder under ``MEDIA_ROOT``."""
    if not is_plain_dir(root):
        log.warning("%s is not a plain folder under MEDIA_ROOT; nothing of it is served", root)
        return
    for dirpath, dirnames, filenames, dirfd in os.fwalk(root, follow_symlinks=False):
        dirnames[:] = sorted(d for d in dirnames if d not in skip_dirs)
        relative_dir = Path(dirpath).relative_to(root)
        for name in sorted(filenames):
            relative = (relative_dir / name).as_posix()
            try:
                fd, st = open_regular(name, dir_fd=dirfd)
            except OSError as exc:
                log.warning("left %s of %s out of the download: %s", relative, root, exc)
                continue
            yield relative, fd, st
