"""Memory labs: make the kernel's count of a rank's memory follow the tensors that are alive.

Public, as a lab's driver is: the driver calls it in every rank before the loop whose memory
the kernel counts (the control group's high-water mark, read outside your process).
"""

from __future__ import annotations

import ctypes


def release_freed_buffers() -> None:
    """Buffers of 64 KiB and more come straight from the kernel and go back to it when freed.

    glibc's malloc otherwise keeps freed buffers of up to 32 MiB in its heap for reuse, and raises
    that size as the process frees larger ones: the memory a process holds then depends on the
    order of its allocations, not only on what it keeps alive. Fixing the thresholds
    (``mallopt``) makes the kernel's count follow the tensors that are alive.
    """
    libc = ctypes.CDLL(None)
    libc.mallopt(-3, 64 << 10)  # M_MMAP_THRESHOLD
    libc.mallopt(-1, 128 << 10)  # M_TRIM_THRESHOLD
