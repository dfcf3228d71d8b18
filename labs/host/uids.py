"""Rank uids unique on this host: every job leases a block of 64 uids that no other job holds.

A rank runs as a uid of its own, so ``RLIMIT_NPROC`` (counted per uid across the whole host),
the zygote's per-uid CPU and process counts, the kernel's per-socket byte counts attributed by
uid, and ``kill_group`` (every process of the group's uids) see that rank alone. Two workers on one
host, or two Graders in one process, must therefore never hand out the same uids at once.

Block ``k`` is uids ``UID_BASE + 64 k`` to ``+ 63``. A job leases the first free block by taking an
exclusive ``flock`` on ``block-<k>`` in a directory only root can enter (``/run/ringlab/uids``),
and keeps the file open while it runs. ``flock`` locks belong to the open file, so two leases in
one process exclude each other as two processes' do, and the kernel drops the lock of a worker
that dies. The caller releases the lease once the job's sandbox, and so every process with those
uids, is gone.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
from pathlib import Path

UID_BASE = 200_000
BLOCK = 64  # a job's uids: uid_base + 8 * group + rank
BLOCKS = 512
RUN_DIR = Path("/run/ringlab/uids")


class NoFreeUids(Exception):
    """Every block is leased (more jobs at once on this host than ``BLOCKS``)."""


def default_dir() -> Path:
    """Root: ``/run/ringlab/uids``; anyone else (development, cold sandboxes): a directory of their own."""
    if os.geteuid() == 0:
        return RUN_DIR
    return Path(tempfile.gettempdir()) / f"ringlab-{os.geteuid()}" / "uids"


class UidLease:
    """A leased block: ``base`` is its first uid. ``release`` (or leaving a ``with``) gives it back."""

    def __init__(self, block: int, fd: int):
        self.block = block
        self.base = UID_BASE + BLOCK * block
        self.fd: int | None = fd

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)  # drops the lock
            self.fd = None

    def __enter__(self) -> UidLease:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def lease(directory: Path | None = None, blocks: int = BLOCKS) -> UidLease:
    """The first block no job on this host holds, leased until released; ``NoFreeUids`` if none is free."""
    folder = directory or default_dir()
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(folder, 0o700)
    for k in range(blocks):
        fd = os.open(folder / f"block-{k}", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        except BaseException:
            with contextlib.suppress(OSError):
                os.close(fd)
            raise
        return UidLease(k, fd)
    raise NoFreeUids(f"all {blocks} blocks of rank uids on this host are in use by other jobs")
