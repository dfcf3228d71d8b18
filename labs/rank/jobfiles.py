"""A job's files in the sandbox: the lab's public files laid out for the ranks, and what a phase left in
the shared directory collected, by content, for the judge outside.

Stdlib only (it runs in the sandbox, in the zygote).
"""

from __future__ import annotations

import os
import stat
import tempfile
from typing import Any

MAX_FILES_BYTES = 32 << 20  # contents of the files a phase leaves in the shared directory, sent for judging
MAX_FILES = 4096


def lay_out(job: dict[str, Any]) -> None:
    """The lab's public files, read-only for the ranks, and the scratch directory phases share; their
    folders go into ``job`` (``public_dir``, ``shared_dir``)."""
    sandboxed = bool(job.get("sandboxed", True))
    public = job.get("public") or {}
    base = "/tmp" if sandboxed else tempfile.mkdtemp(prefix="ringlab-job-")
    if public:
        folder = os.path.join(base, "lab")
        os.mkdir(folder, 0o755)
        for name, text in public.items():
            path = os.path.join(folder, os.path.basename(name))
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
            os.chmod(path, 0o444)
        os.chmod(folder, 0o555)
        job["public_dir"] = folder
    if any(group.get("shares_dir") for group in job["groups"]):
        # Only phases that ask for it (save on 4 ranks, load on 2) share a directory; other ranks share none.
        shared = os.path.join(base, "shared")
        os.mkdir(shared)
        os.chmod(shared, 0o777)
        job["shared_dir"] = shared


def collect(root: str) -> tuple[list[dict[str, Any]], bool, bytes]:
    """What a group left under ``root`` (the shared directory), by content, for the judge: the entries
    (path, size, where its bytes are in the payload), whether some were left out, and the payload. Read
    after every rank of the group ended: regular files only, never following a link."""
    entries: list[dict[str, Any]] = []
    chunks: list[bytes] = []
    total, truncated = 0, False
    for folder, dirs, files in os.walk(root, followlinks=False):
        dirs.sort()
        for name in sorted(files):
            if len(entries) >= MAX_FILES:
                truncated = True
                break
            path = os.path.join(folder, name)
            rel = os.path.relpath(path, root)
            try:
                fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
            except OSError:
                continue
            with os.fdopen(fd, "rb") as f:
                if not stat.S_ISREG(os.fstat(fd).st_mode):
                    continue
                size = os.fstat(fd).st_size
                entry: dict[str, Any] = {"path": rel, "size": size, "offset": total, "length": None}
                if total + size <= MAX_FILES_BYTES:
                    data = f.read(size)
                    entry["length"] = len(data)
                    chunks.append(data)
                    total += len(data)
                else:
                    truncated = True
                entries.append(entry)
    return entries, truncated, b"".join(chunks)
