"""Control groups for grading jobs: limits the kernel enforces and facts it measures, per job and per rank.

The worker (root) makes one group per job and, inside it, one per rank as soon as the rank
exists, before any student code runs::

    <hierarchy>/ringlab/<worker>/job-<n>/sandbox         the sandbox's own processes (its init, the zygote)
    <hierarchy>/ringlab/<worker>/job-<n>/g<g>-rank<r>    rank r of group g (world size), placed by the worker

On cgroup v1 the same tree exists in the ``memory`` and the ``pids`` hierarchy; on v2 once, in
the unified hierarchy (the sandbox's processes sit in a leaf of their own because a v2 group
whose children have limits may hold no processes). A rank group caps the rank's memory, and
everything its processes hold is charged to it: anonymous memory, shared memory
(``mmap(MAP_SHARED)``, ``/dev/shm``, tmpfs pages), page cache and kernel memory; swap is not
allowed (v1 ``memsw``, v2 ``memory.swap.max``). It also caps the rank's tasks (processes and
threads). The job group caps the sum. The kernel keeps the numbers the judge may trust: a rank's
memory high-water (``memory.max_usage_in_bytes`` / ``memory.peak``), how many of its processes
the OOM killer ended (``oom_kill``), how many forks it refused (``pids.events max``). A rank
cannot leave its group: it is not root and the sandbox does not mount the cgroup filesystem.

Each rank group starts with room for setting the rank up; ``JobCgroups.arm`` (every rank joined
its group, no student code has run) resets the high-water marks, records each rank's usage as
its baseline and limits the rank to that baseline plus the lab's ``memory_limit_mb``, as
``RLIMIT_DATA`` is the data segment after joining plus the limit.

Groups left behind by a worker that died are removed when the next worker starts.
"""

from __future__ import annotations

import contextlib
import itertools
import os
from collections.abc import Iterable
from pathlib import Path

from labs.host.cgroupfs import (
    ROOT_NAME,
    CgroupError,
    Hierarchy,
    detect,
    enable_controllers,
    kill_and_remove,
    parse_keyed,
    parse_limit,
    read,
    write,
)
from labs.host.pidns import namespace_of

SETUP_BYTES = 1 << 30  # a rank's room before it is armed: torch's runtime, gloo's buffers, CUDA's host memory
SANDBOX_BYTES = 1 << 30  # the zygote relays inputs and results (each up to a few hundred MB)
SANDBOX_PIDS = 128  # the sandbox's init, the zygote, a script lab's agent store and their threads
# What each version calls the same thing.
V1_FILES = {"limit": "memory.limit_in_bytes", "usage": "memory.usage_in_bytes", "peak": "memory.max_usage_in_bytes"}
V2_FILES = {"limit": "memory.max", "usage": "memory.current", "peak": "memory.peak"}


# --- pure parts ------------------------------------------------------------------------------


def worker_name(pidns: int, pid: int, started: int, serial: int) -> str:
    """A worker's group name: its pid namespace (workers in containers share a host's cgroups), its pid
    there and start time (pids are reused), and which of its Graders."""
    return f"{pidns}-{pid}-{started}-{serial}"


def owner_of(name: str) -> tuple[int, int, int] | None:
    """(pid namespace, pid, start time) from a worker's group name, or None if it is not one of ours."""
    parts = name.split("-")
    if len(parts) != 4 or not all(p.isdigit() for p in parts):
        return None
    return int(parts[0]), int(parts[1]), int(parts[2])


def job_limits(ranks: int, memory_mb: int, pids_per_rank: int) -> tuple[int, int]:
    """A job's (memory bytes, tasks): every rank at its setup room plus limit, and the sandbox's own."""
    memory = ranks * (SETUP_BYTES + memory_mb * (1 << 20)) + SANDBOX_BYTES
    return memory, ranks * pids_per_rank + SANDBOX_PIDS


# --- the host ----------------------------------------------------------------------------------


def start_time(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (field 22 of ``/proc/PID/stat``)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rpartition(")")[2].split()[19])
    except (OSError, ValueError, IndexError):
        return None


class Cgroups:
    """One Grader's groups: ``ringlab/<worker>`` in each hierarchy, removed by ``close``."""

    serials = itertools.count(1)  # Graders in one process

    def __init__(self, hierarchy: Hierarchy):
        self.hierarchy = hierarchy
        self.pidns = (namespace_of(os.getpid()) or (0, 0))[1]
        self.name = worker_name(self.pidns, os.getpid(), start_time(os.getpid()) or 0, next(Cgroups.serials))
        self.jobs = 0
        try:
            self.remove_stale()
            for top in hierarchy.dirs():
                top.mkdir(exist_ok=True)
            if hierarchy.version == 2:
                enable_controllers(hierarchy.memory, hierarchy.memory / ROOT_NAME)
            for d in hierarchy.dirs(self.name):
                d.mkdir()
            if hierarchy.version == 2:
                enable_controllers(hierarchy.memory, hierarchy.dirs(self.name)[0])
        except OSError as exc:
            raise CgroupError(f"cannot create control groups under {hierarchy.memory}: {exc}") from exc

    @classmethod
    def open(cls) -> Cgroups:
        """This worker's groups on this host; ``CgroupError`` saying why not."""
        found = detect()
        if isinstance(found, str):
            raise CgroupError(found)
        return cls(found)

    @property
    def mode(self) -> str:
        return self.hierarchy.mode

    def remove_stale(self) -> None:
        """Remove the groups of workers that are no longer running (killed before they could clean up).

        Only workers of this pid namespace can be told dead or alive from here: a worker in another
        container cleans up its own when it starts again."""
        for top in self.hierarchy.dirs():
            if not top.is_dir():
                continue
            for d in top.iterdir():
                owner = owner_of(d.name) if d.is_dir() else None
                if owner is not None and owner[0] == self.pidns and start_time(owner[1]) != owner[2]:
                    kill_and_remove([d], wait_s=1.0)

    def job(self, *, ranks: int, memory_mb: int, pids_per_rank: int) -> JobCgroups:
        """Groups for one job of at most ``ranks`` ranks at a time."""
        self.jobs += 1
        return JobCgroups(self, f"job-{self.jobs}", ranks, memory_mb, pids_per_rank)

    def close(self) -> None:
        kill_and_remove(self.hierarchy.dirs(self.name), wait_s=1.0)


class JobCgroups:
    """One job's groups: the job's limits, the sandbox's own processes, and a group per rank.

    ``place`` puts a rank in its group, ``arm`` starts measuring (and limits each rank to its
    baseline plus the lab's limit), ``peak``/``oom_killed``/``pids_denied`` read what the kernel
    saw, ``close`` kills whatever is left and removes every group of the job.
    """

    def __init__(self, owner: Cgroups, name: str, ranks: int, memory_mb: int, pids_per_rank: int):
        self.h = owner.hierarchy
        self.base = (owner.name, name)
        self.rank_bytes = memory_mb * (1 << 20)
        self.pids_per_rank = pids_per_rank
        self.group = -1
        self.ranks: dict[int, list[Path]] = {}  # rank -> its group's directory in each hierarchy
        self.baselines: dict[int, int] = {}
        self.peak_fds: dict[int, int] = {}  # v2: a memory.peak reset through its fd is read through it
        memory, pids = job_limits(ranks, memory_mb, pids_per_rank)
        try:
            self._make(self.dirs(), memory, pids, parent_of_limited=True)
            self._make(self.dirs("sandbox"), None, None)
        except OSError as exc:
            self.close()
            raise CgroupError(f"cannot set up the job's control groups: {exc}") from exc

    def dirs(self, *parts: str) -> list[Path]:
        return self.h.dirs(*self.base, *parts)

    def _file(self, rank: int, controller: str, name: str) -> Path:
        memory, pids = self.ranks[rank][0], self.ranks[rank][-1]
        return (memory if controller == "memory" else pids) / name

    def _make(self, dirs: list[Path], memory: int | None, pids: int | None, parent_of_limited: bool = False) -> None:
        for d in dirs:
            d.mkdir()
        if self.h.version == 2 and parent_of_limited:
            enable_controllers(self.h.memory, dirs[0])
        if memory is not None:
            self._limit_memory(dirs[0], memory)
        if pids is not None:
            write(dirs[-1] / "pids.max", str(pids))

    def _limit_memory(self, d: Path, limit: int) -> None:
        if self.h.version == 2:
            write(d / "memory.max", str(limit))
            if (d / "memory.swap.max").exists():
                write(d / "memory.swap.max", "0")
            return
        # v1: memory+swap may never be below memory, so which goes first depends on the direction.
        current = parse_limit(read(d / "memory.limit_in_bytes"))
        names = ["memory.limit_in_bytes"]
        if (d / "memory.memsw.limit_in_bytes").exists():
            lowering = current is None or limit < current
            names = [*names, "memory.memsw.limit_in_bytes"] if lowering else ["memory.memsw.limit_in_bytes", *names]
        for name in names:
            write(d / name, str(limit))
        with contextlib.suppress(OSError):  # kernel memory is charged to the group's usage anyway on 5.x and later
            write(d / "memory.kmem.limit_in_bytes", str(limit))

    def adopt(self, pids: Iterable[int]) -> None:
        """Put the sandbox's own processes (host pids) in the job's ``sandbox`` group."""
        for pid in pids:
            self._move(pid, self.dirs("sandbox"))

    def begin_group(self, g: int) -> None:
        """A new group of ranks: the last group's rank groups (and anything left in them) go."""
        old = [d for dirs in self.ranks.values() for d in dirs]
        self._close_peaks()
        self.ranks, self.baselines, self.group = {}, {}, g
        kill_and_remove(old, wait_s=1.0)

    def place(self, host_pid: int, rank: int) -> bool:
        """Move rank ``rank``'s process into a new group of its own; False if it has already exited."""
        dirs = self.dirs(f"g{max(self.group, 0)}-rank{rank}")
        if rank not in self.ranks:
            try:
                self._make(dirs, self.rank_bytes + SETUP_BYTES, self.pids_per_rank)
                if self.h.version == 2:
                    with contextlib.suppress(OSError):  # an OOM kill ends the whole rank, not one of its processes
                        write(dirs[0] / "memory.oom.group", "1")
            except OSError as exc:
                raise CgroupError(f"cannot create the control group of rank {rank}: {exc}") from exc
            self.ranks[rank] = dirs
        return self._move(host_pid, dirs)

    def _move(self, pid: int, dirs: list[Path]) -> bool:
        for d in dirs:
            try:
                write(d / "cgroup.procs", str(pid))
            except ProcessLookupError:
                return False
            except OSError as exc:
                raise CgroupError(f"cannot move process {pid} into {d}: {exc}") from exc
        return True

    def reset_peaks(self) -> dict[int, int]:
        """Reset every placed rank's memory high-water to its usage now; returns those usages (baselines)."""
        for rank, dirs in self.ranks.items():
            with contextlib.suppress(OSError):
                if self.h.version == 1:
                    write(dirs[0] / "memory.max_usage_in_bytes", "0")
                else:
                    fd = os.open(dirs[0] / "memory.peak", os.O_RDWR | os.O_CLOEXEC)
                    try:
                        os.write(fd, b"reset\n")  # 6.12 and later; before, the peak counts from the group's creation
                    except OSError:
                        os.close(fd)
                    else:
                        self.peak_fds[rank] = fd
            usage = self.usage(rank)
            if usage is not None:
                self.baselines[rank] = usage
        return dict(self.baselines)

    def arm(self) -> dict[int, int]:
        """Start measuring: reset the peaks, take the baselines, cap each rank at its baseline plus the lab's limit."""
        baselines = self.reset_peaks()
        for rank, baseline in baselines.items():
            try:
                self._limit_memory(self.ranks[rank][0], baseline + self.rank_bytes)
            except OSError as exc:
                raise CgroupError(f"cannot set the memory limit of rank {rank}: {exc}") from exc
        return baselines

    def _memory_file(self, rank: int, what: str) -> str | None:
        if rank not in self.ranks:
            return None
        try:
            return read(self.ranks[rank][0] / (V1_FILES if self.h.version == 1 else V2_FILES)[what])
        except OSError:
            return None

    def usage(self, rank: int) -> int | None:
        """Bytes charged to the rank's group now."""
        text = self._memory_file(rank, "usage")
        return int(text) if text else None

    def limit(self, rank: int) -> int | None:
        """The rank's memory limit in bytes now (its baseline plus the lab's limit once armed)."""
        text = self._memory_file(rank, "limit")
        return parse_limit(text) if text else None

    def peak(self, rank: int) -> int | None:
        """The most bytes the rank's group held since ``reset_peaks`` (the kernel's high-water mark)."""
        fd = self.peak_fds.get(rank)
        if fd is not None:
            with contextlib.suppress(OSError, ValueError):
                return int(os.pread(fd, 64, 0))
        text = self._memory_file(rank, "peak")
        return int(text) if text else None

    def oom_killed(self, rank: int, sigkilled: bool = False) -> bool:
        """Whether the OOM killer ended a process of the rank at its group's limit.

        v1 kernels before 4.13 have no ``oom_kill`` count: there a rank that hit its limit
        (``memory.failcnt``) and died by SIGKILL (``sigkilled``) counts as killed.
        """
        if rank not in self.ranks:
            return False
        d = self.ranks[rank][0]
        try:
            events = parse_keyed(read(d / ("memory.oom_control" if self.h.version == 1 else "memory.events")))
            if "oom_kill" in events:
                return events["oom_kill"] > 0
            return sigkilled and int(read(d / "memory.failcnt")) > 0
        except (OSError, ValueError):
            return False

    def pids_denied(self, rank: int) -> bool:
        """Whether the rank's group refused a fork or a new thread at its task limit."""
        if rank not in self.ranks:
            return False
        try:
            return parse_keyed(read(self._file(rank, "pids", "pids.events"))).get("max", 0) > 0
        except OSError:
            return False

    def _close_peaks(self) -> None:
        for fd in self.peak_fds.values():
            os.close(fd)
        self.peak_fds = {}

    def close(self) -> None:
        """Kill everything left in the job's groups and remove them all."""
        self._close_peaks()
        kill_and_remove(self.dirs())
