"""The control-group filesystem as the worker finds it: which hierarchy holds memory and pids (v1 or v2),
its files read and written, groups emptied by killing what they hold and then removed.

``labs.host.cgroups`` builds the job's and ranks' groups on top of this.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT_NAME = "ringlab"
CONTROLLERS = ("memory", "pids")
KILL_WAIT_S = 30.0  # 64 dying torch-sized processes of a fork bomb took 3 s on 2 idle cores


class CgroupError(Exception):
    """Control groups cannot be used here, or a group could not be set up."""


@dataclass(frozen=True)
class Mount:
    point: Path
    fstype: str
    options: frozenset[str]  # the superblock options: a v1 hierarchy names its controllers there


def parse_mountinfo(text: str) -> list[Mount]:
    """The mounts of ``/proc/self/mountinfo`` (mount point, filesystem type, superblock options)."""
    mounts = []
    for line in text.splitlines():
        before, sep, after = line.partition(" - ")
        fields, tail = before.split(), after.split()
        if not sep or len(fields) < 5 or len(tail) < 3:
            continue
        point = fields[4].replace("\\040", " ").replace("\\011", "\t").replace("\\012", "\n").replace("\\134", "\\")
        mounts.append(Mount(Path(point), tail[0], frozenset(tail[2].split(","))))
    return mounts


@dataclass(frozen=True)
class Hierarchy:
    """Where ringlab's groups go: v1 has a mount per controller, v2 one for both (``memory == pids``)."""

    version: int
    memory: Path
    pids: Path

    @property
    def mode(self) -> str:
        return f"cgroup v{self.version}"

    def roots(self) -> list[Path]:
        """The hierarchies every group exists in (one on v2)."""
        return [self.memory] if self.version == 2 else [self.memory, self.pids]

    def dirs(self, *parts: str) -> list[Path]:
        """A group's directory in each hierarchy."""
        return [root.joinpath(ROOT_NAME, *parts) for root in self.roots()]


def choose_hierarchy(mounts: list[Mount], v2_controllers: dict[Path, set[str]]) -> Hierarchy | str:
    """The hierarchy that holds both the memory and the pids controller, or why there is none.

    v1 when both controllers are mounted as v1 hierarchies (a hybrid host that also mounts an empty
    cgroup2 uses those); else a cgroup2 mount whose ``cgroup.controllers`` lists both.
    """
    v1 = {c: m.point for m in mounts if m.fstype == "cgroup" for c in CONTROLLERS if c in m.options}
    if len(v1) == len(CONTROLLERS):
        return Hierarchy(1, v1["memory"], v1["pids"])
    unified = [m.point for m in mounts if m.fstype == "cgroup2"]
    for point in sorted(unified, key=lambda p: (p != Path("/sys/fs/cgroup"), str(p))):
        if set(CONTROLLERS) <= v2_controllers.get(point, set()):
            return Hierarchy(2, point, point)
    if unified:
        have = sorted(set().union(*(v2_controllers.get(p, set()) for p in unified)) | set(v1))
        return (
            "no cgroup hierarchy offers both the memory and the pids controller "
            f"(cgroup2 at {unified[0]}; controllers available: {', '.join(have) or 'none'})"
        )
    return "no cgroup filesystem is mounted (mount cgroup2 at /sys/fs/cgroup)"


def parse_keyed(text: str) -> dict[str, int]:
    """A flat keyed file (``memory.events``, ``pids.events``, v1 ``memory.oom_control``): key -> number."""
    values = {}
    for line in text.splitlines():
        key, _, value = line.strip().partition(" ")
        with contextlib.suppress(ValueError):
            values[key] = int(value.strip())
    return values


def parse_limit(text: str) -> int | None:
    """A limit file's value; None for v2's ``max`` (or v1's near-2**63 "unlimited")."""
    text = text.strip()
    if text == "max":
        return None
    value = int(text)
    return None if value >= 1 << 62 else value


def detect() -> Hierarchy | str:
    """This host's hierarchy for memory and pids, or why control groups cannot be used (not root, none)."""
    try:
        with open("/proc/self/mountinfo") as f:
            mounts = parse_mountinfo(f.read())
    except OSError as exc:
        return f"cannot read the mounts: {exc}"
    controllers = {}
    for m in mounts:
        if m.fstype == "cgroup2":
            with contextlib.suppress(OSError):
                controllers[m.point] = set((m.point / "cgroup.controllers").read_text().split())
    found = choose_hierarchy(mounts, controllers)
    if isinstance(found, str):
        return found
    if os.geteuid() != 0:
        return f"{found.mode} is mounted, but only root may create groups and move processes into them"
    for root in found.roots():
        if not os.access(root, os.W_OK):
            return f"{found.mode} is mounted read-only at {root}"
    return found


def write(path: Path, value: str) -> None:
    with open(path, "w") as f:
        f.write(value)


def read(path: Path) -> str:
    with open(path) as f:
        return f.read()


def procs(directory: Path) -> list[int]:
    try:
        return [int(x) for x in read(directory / "cgroup.procs").split()]
    except (OSError, ValueError):
        return []


def tree(top: Path) -> Iterator[Path]:
    """``top`` and every group below it, deepest first (the order to remove them in)."""
    try:
        below = sorted(p for p in top.iterdir() if p.is_dir())
    except OSError:  # gone already
        return
    for child in below:
        yield from tree(child)
    yield top


def kill_and_remove(tops: Iterable[Path], wait_s: float = KILL_WAIT_S) -> bool:
    """SIGKILL every process in these groups and those below them, then remove the groups.

    True when all are gone. A process dies asynchronously, so this waits (up to ``wait_s``) for the
    groups to empty before removing them.
    """
    groups = [g for top in tops for g in tree(top)]
    deadline = time.monotonic() + wait_s
    for g in groups:
        with contextlib.suppress(OSError):
            if (g / "cgroup.kill").exists():  # v2 (5.14+): every process at once, forks in flight included
                write(g / "cgroup.kill", "1")
    while True:
        alive = [pid for g in groups for pid in procs(g)]
        for pid in alive:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        if not alive or time.monotonic() > deadline:
            break
        time.sleep(0.01)
    done = True
    for g in groups:  # deepest first
        for attempt in range(50):
            try:
                g.rmdir()
                break
            except FileNotFoundError:
                break
            except OSError:  # EBUSY while the last task is still leaving
                if attempt == 49:
                    done = False
                time.sleep(0.01)
    return done


def enable_controllers(root: Path, group: Path) -> None:
    """v2: turn memory and pids on for the children of every group from the hierarchy's root down to ``group``."""
    parts = group.relative_to(root).parts
    for path in [root, *(root.joinpath(*parts[: i + 1]) for i in range(len(parts)))]:
        if set(CONTROLLERS) <= set(read(path / "cgroup.subtree_control").split()):
            continue
        try:
            write(path / "cgroup.subtree_control", " ".join(f"+{c}" for c in CONTROLLERS))
        except OSError as exc:
            raise CgroupError(
                f"cannot enable the memory and pids controllers below {path} ({exc.strerror}); on cgroup v2 "
                "that group must hold no processes of its own"
            ) from exc
