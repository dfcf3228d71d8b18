"""Touches 2 GiB of shared anonymous memory (which RLIMIT_DATA does not count) before computing as
the honest solution does. Imitates: averages."""

import mmap

_HOARD = mmap.mmap(-1, 2 << 30, flags=mmap.MAP_SHARED | mmap.MAP_ANONYMOUS)
for _offset in range(0, len(_HOARD), 4096):
    _HOARD[_offset] = 1
