"""Load the rank's seccomp filter (stdlib only; mounted in the sandbox).

The program is compiled outside the sandbox (``labs.host.seccomp``) and arrives in the job as base64:
the bytes of a ``struct sock_filter[]``. A rank loads it itself, after dropping to its own uid and
setting no-new-privileges (``become``), before any student code runs. A zygote forked
into a sandbox by the template never went through bwrap's exec, so bwrap's ``--seccomp`` would
not cover it; loading it here covers cold and forked zygotes alike, and every process a rank
starts inherits it.
"""

from __future__ import annotations

import base64
import ctypes
import os

PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 22, 2
PR_SET_NO_NEW_PRIVS, PR_SET_PDEATHSIG = 38, 1
INSTRUCTION_BYTES = 8  # struct sock_filter: u16 code, u8 jt, u8 jf, u32 k
MAX_INSTRUCTIONS = 4096  # BPF_MAXINSNS


class SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def install(blob_b64: str | None) -> None:
    """Load the filter into this process (single-threaded: later threads and children inherit it).

    None (a development run without a sandbox) loads nothing. Raises OSError if the kernel refuses
    the program, ValueError if it is not a whole number of instructions.
    """
    if blob_b64 is None:
        return
    program = base64.b64decode(blob_b64, validate=True)
    count, extra = divmod(len(program), INSTRUCTION_BYTES)
    if extra or not 0 < count <= MAX_INSTRUCTIONS:
        raise ValueError(f"a seccomp program of {len(program)} bytes is not 1 to {MAX_INSTRUCTIONS} instructions")
    buffer = ctypes.create_string_buffer(program, len(program))
    prog = SockFprog(count, ctypes.cast(buffer, ctypes.c_void_p))
    libc = ctypes.CDLL(None, use_errno=True)
    zero = ctypes.c_ulong(0)
    if libc.prctl(ctypes.c_int(PR_SET_SECCOMP), ctypes.c_ulong(SECCOMP_MODE_FILTER), ctypes.byref(prog), zero, zero):
        err = ctypes.get_errno()
        raise OSError(err, f"prctl(PR_SET_SECCOMP) refused the rank's filter: {os.strerror(err)}")


def become(uid: int, sandboxed: bool) -> None:
    """Die with the zygote; sandboxed, switch to ``uid`` for good (no capabilities, no new privileges)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, 9, 0, 0, 0)
    if not sandboxed:
        return
    os.setgroups([])
    os.setgid(uid)
    os.setuid(uid)
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
