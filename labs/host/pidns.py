"""The sandbox's processes, seen from the host: which pid namespace a process lives in, and the host pids
of the processes inside a sandbox (from ``/proc/PID/status``'s ``NSpid:``), for placing ranks in their
cgroups and waiting for a sandbox to empty. Stdlib only; reads ``/proc``, changes nothing.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterable
from pathlib import Path


def parse_nspid(status: str) -> list[int]:
    """``NSpid:`` of ``/proc/PID/status``: the pid in each pid namespace, outermost first."""
    for line in status.splitlines():
        if line.startswith("NSpid:"):
            return [int(x) for x in line.split()[1:]]
    return []


def namespace_of(pid: int) -> tuple[int, int] | None:
    """The identity (device, inode) of the pid namespace ``pid`` lives in."""
    try:
        st = os.stat(f"/proc/{pid}/ns/pid")
    except OSError:
        return None
    return st.st_dev, st.st_ino


def children(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (``/proc/PID/task/*/children``, else a scan of ``/proc``)."""
    try:
        found = []
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as f:
                found += [int(x) for x in f.read().split()]
        return found
    except FileNotFoundError:  # a kernel without CONFIG_PROC_CHILDREN, or ``pid`` has exited
        if not os.path.exists(f"/proc/{pid}"):
            return []
    except (OSError, ValueError):
        return []
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            with contextlib.suppress(OSError, ValueError, IndexError), open(f"/proc/{name}/stat") as f:
                if int(f.read().rpartition(")")[2].split()[1]) == pid:
                    found.append(int(name))
    return found


def sandbox_namespace(bwrap_pid: int) -> tuple[int, int] | None:
    """The pid namespace of the sandbox that ``bwrap_pid`` started: its child runs in it, as init.

    A zygote forked from the template joins that namespace too (and its init adopts it), so this is
    where every process of the sandbox lives. None when the sandbox has no namespace of its own.
    """
    ours = namespace_of(os.getpid())
    for child in children(bwrap_pid):
        ns = namespace_of(child)
        if ns is not None and ns != ours:
            return ns
    return None


def processes_in(namespace: tuple[int, int], among: Iterable[int] | None = None) -> dict[int, int]:
    """Processes of a pid namespace: their pid there -> their pid here (``NSpid``, innermost last).

    ``among``: only those host pids (cheaper than looking at every process of the host)."""
    found = {}
    for pid in among if among is not None else (int(n) for n in os.listdir("/proc") if n.isdigit()):
        if namespace_of(pid) != namespace:
            continue
        try:
            nspid = parse_nspid(Path(f"/proc/{pid}/status").read_text())
        except OSError:
            continue
        if nspid:
            found[nspid[-1]] = pid
    return found


def descendants(pid: int) -> list[int]:
    """``pid``'s children, their children, and so on."""
    found, frontier = [], [pid]
    while frontier:
        frontier = [c for p in frontier for c in children(p)]
        found += frontier
    return found


def wait_empty(namespace: tuple[int, int], wait_s: float = 2.0) -> bool:
    """Wait until no process is left in a killed sandbox's pid namespace; whether none is."""
    deadline = time.monotonic() + wait_s
    while processes_in(namespace):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True
