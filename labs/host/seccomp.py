"""The seccomp filter every rank runs under, built on the worker's side (never mounted in the sandbox).

A rank already has no capabilities, its own uid and no new privileges. What it could still reach
are kernel interfaces that ignore all of that, or that open channels the trusted side does not
measure. The filter lets every system call through except these:

- killed (the whole rank process, with SIGSYS, which the verdict explains): the kernel keyring
  (``add_key``, ``request_key``, ``keyctl``: shared across the host, not namespaced), reading or
  writing other processes (``ptrace``, ``process_vm_readv/writev``), ``perf_event_open``, ``bpf``,
  ``userfaultfd``, ``io_uring_*`` (a long record of kernel bugs), mounts and new namespaces
  (``mount`` and the new mount API, ``unshare``, ``setns``, ``clone`` with any ``CLONE_NEW*`` flag: a
  user namespace would hand the rank every capability inside it), kernel modules, ``kexec``,
  ``reboot``, swap, ``acct``, ``quotactl``, file handles (``open_by_handle_at``), and the System V and
  POSIX message/shared-memory objects (``shmget``, ``shmat``, ``msgget``, ``semget``, ``mq_open``) that
  ranks of one sandbox could share past their uids;
- ``clone3`` fails with ENOSYS: its flags sit in memory a filter cannot read, and glibc then falls
  back to ``clone``, whose flags it can (as container runtimes do);
- sockets fail with EPERM, on CPU (gloo) jobs, unless they are TCP over IPv4/IPv6 or netlink route
  (glibc's ``getifaddrs``, which gloo uses to find ``lo``): no unix sockets or socket pairs, UDP,
  raw or packet sockets, SCTP or MPTCP. Ranks must talk through ``torch.distributed``, over TCP the
  zygote counts byte by byte; a failed ``socket()`` is an error a library copes with (glibc's nscd
  lookup does), where a killed process would not.

GPU (NCCL) jobs keep unix sockets and socket pairs: NCCL's proxy thread passes descriptors over
them. That is the known gap on GPUs: ranks there can reach each other outside the counted TCP
traffic (abstract unix sockets).

Other architectures' system calls (32-bit ``int 0x80``, x32) kill the process: the filter is for
the native one only, and another ABI would slip past its numbers.
"""

from __future__ import annotations

import base64
import errno
import functools
import tempfile
from typing import Any

KILLED = (
    "add_key",
    "request_key",
    "keyctl",
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "perf_event_open",
    "bpf",
    "userfaultfd",
    "mount",
    "umount2",
    "pivot_root",
    "move_mount",
    "open_tree",
    "fsopen",
    "fsmount",
    "fsconfig",
    "fspick",
    "mount_setattr",
    "unshare",
    "setns",
    "init_module",
    "finit_module",
    "delete_module",
    "kexec_load",
    "kexec_file_load",
    "reboot",
    "swapon",
    "swapoff",
    "acct",
    "quotactl",
    "open_by_handle_at",
    "name_to_handle_at",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "shmget",
    "shmat",
    "msgget",
    "semget",
    "mq_open",
)
CLONE_NEW = {
    "CLONE_NEWNS": 0x00020000,
    "CLONE_NEWCGROUP": 0x02000000,
    "CLONE_NEWUTS": 0x04000000,
    "CLONE_NEWIPC": 0x08000000,
    "CLONE_NEWUSER": 0x10000000,
    "CLONE_NEWPID": 0x20000000,
    "CLONE_NEWNET": 0x40000000,
}  # CLONE_NEWTIME (0x80) is no clone() flag: those bits are its exit signal
AF_UNIX, AF_INET, AF_INET6, AF_NETLINK = 1, 2, 10, 16
SOCK_STREAM, IPPROTO_TCP, NETLINK_ROUTE = 1, 6, 0
ALL_BUT_LOW = (1 << 64) - 1  # masks below keep every upper bit: a family with high bits set never matches them


def _socket_rules(gpu: bool) -> list[tuple[str, list[tuple[int, int, int, int]]]]:
    """(syscall, [(arg, op, a, b)]) rules that refuse sockets other than TCP and netlink route.

    libseccomp takes one comparison per argument in a rule, so "not one of the allowed families"
    is spelled as ranges: a value with any of its upper 32 bits set falls in the last one (the
    kernel would read only its low 32 bits as the family).
    """
    import pyseccomp as sc

    low = [(0, sc.LE, AF_UNIX - 1 if gpu else AF_UNIX, 0)]  # AF_UNSPEC, and AF_UNIX but on GPUs
    refused = [
        low,
        [(0, sc.EQ, 3, 0)],
        [(0, sc.MASKED_EQ, ALL_BUT_LOW ^ 3, 4)],  # 4..7
        [(0, sc.MASKED_EQ, ALL_BUT_LOW ^ 1, 8)],  # 8..9
        [(0, sc.EQ, 11, 0)],
        [(0, sc.MASKED_EQ, ALL_BUT_LOW ^ 3, 12)],  # 12..15
        [(0, sc.GT, AF_NETLINK, 0)],  # 17 and up
        [(0, sc.EQ, AF_NETLINK, 0), (2, sc.NE, NETLINK_ROUTE, 0)],
    ]
    for family in (AF_INET, AF_INET6):
        # Only SOCK_STREAM (the type's low four bits; the rest are SOCK_CLOEXEC/SOCK_NONBLOCK), only TCP.
        for mask, value in ((0xF, 0), (0xE, 2), (0xC, 4), (0x8, 8)):
            refused.append([(0, sc.EQ, family, 0), (1, sc.MASKED_EQ, mask, value)])
        refused.append([(0, sc.EQ, family, 0), (2, sc.GT, IPPROTO_TCP, 0)])
    rules = [("socket", r) for r in refused]
    if not gpu:
        rules.append(("socketpair", []))
    return rules


def build(gpu: bool) -> Any:
    """The filter as a ``pyseccomp.SyscallFilter`` (default: allow)."""
    import pyseccomp as sc

    f = sc.SyscallFilter(sc.ALLOW)
    f.set_attr(sc.Attr.ACT_BADARCH, sc.KILL_PROCESS)
    for name in KILLED:
        f.add_rule(sc.KILL_PROCESS, name)
    for flag in CLONE_NEW.values():
        f.add_rule(sc.KILL_PROCESS, "clone", sc.Arg(0, sc.MASKED_EQ, flag, flag))
    f.add_rule(sc.ERRNO(errno.ENOSYS), "clone3")
    for name, args in _socket_rules(gpu):
        f.add_rule(sc.ERRNO(errno.EPERM), name, *(sc.Arg(*a) for a in args))
    return f


@functools.cache
def program(gpu: bool = False) -> bytes:
    """The compiled BPF program (``struct sock_filter[]``) for a CPU or a GPU job."""
    with tempfile.TemporaryFile() as out:
        build(gpu).export_bpf(out)
        out.seek(0)
        return out.read()


def program_b64(gpu: bool = False) -> str:
    """``program`` as base64 text, to travel in the job (``labs.rank.confine.install`` loads it in a rank)."""
    return base64.b64encode(program(gpu)).decode("ascii")


def problem() -> str | None:
    """None if the filter can be built here, else what is missing (for a clear refusal)."""
    try:
        program(False)
        program(True)
    except (ImportError, OSError, AttributeError) as exc:
        return (
            f"the seccomp filter could not be built ({type(exc).__name__}: {exc}): install the system's "
            "libseccomp (Debian: libseccomp2) and the Python package pyseccomp"
        )
    return None
