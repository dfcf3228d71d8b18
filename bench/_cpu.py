"""Where the CPU went during a benchmark: CPU seconds per process tree, read from /proc (Linux)."""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

TICK = os.sysconf("SC_CLK_TCK")


def _stat(pid: int) -> tuple[int, str, float] | None:
    """(parent pid, command name, CPU seconds of the process and of its children it has waited for)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    name = text[text.index("(") + 1 : text.rindex(")")]
    fields = text[text.rindex(")") + 2 :].split()
    ticks = sum(int(f) for f in fields[11:15])  # utime, stime, cutime, cstime
    return int(fields[1]), name, ticks / TICK


def processes() -> dict[int, tuple[int, str, float]]:
    found = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (got := _stat(int(entry))) is not None:
            found[int(entry)] = got
    return found


def tree(roots: Iterable[int], table: dict[int, tuple[int, str, float]]) -> set[int]:
    """``roots`` and every live descendant."""
    children: dict[int, list[int]] = {}
    for pid, (ppid, _, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    found, todo = set(), [r for r in roots if r in table]
    while todo:
        pid = todo.pop()
        found.add(pid)
        todo.extend(children.get(pid, []))
    return found


def tree_seconds(roots: Iterable[int], table: dict[int, tuple[int, str, float]]) -> float:
    """CPU seconds of ``roots`` and every live descendant (ended ones are in their waiting parent's count)."""
    return sum(table[pid][2] for pid in tree(roots, table))


def running(fragment: str, table: dict[int, tuple[int, str, float]]) -> list[int]:
    """Pids whose command line contains ``fragment`` and whose parent's does not."""
    found = set()
    for pid in table:
        try:
            if fragment.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                found.add(pid)
        except OSError:
            continue
    return [pid for pid in found if table[pid][0] not in found]


def machine_busy_seconds() -> tuple[float, float]:
    """(busy, idle) CPU seconds of the whole machine since boot."""
    values = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = values[3] + values[4]  # idle, iowait
    return (sum(values[:8]) - idle) / TICK, idle / TICK


@dataclass(frozen=True)
class Usage:
    parts: dict[str, float]  # label -> CPU seconds
    busy: float
    idle: float


def usage(
    groups: dict[str, list[int]],
    *,
    by_name: dict[str, str] | None = None,
    by_command: dict[str, str] | None = None,
) -> Usage:
    """CPU seconds so far of each labelled group of process trees, of processes named in ``by_name``
    (command name -> label, e.g. every ``postgres``), of the process trees whose command line holds a
    ``by_command`` fragment and that no group holds already (fragment -> label: the grading workers'
    template processes, which fork the ranks and are not the workers' children), and of this process
    (``load generator``)."""
    table = processes()
    parts = {label: tree_seconds(roots, table) for label, roots in groups.items()}
    counted = tree([pid for roots in groups.values() for pid in roots], table)
    for fragment, label in (by_command or {}).items():
        roots = [pid for pid in running(fragment, table) if pid not in counted]
        parts[label] = parts.get(label, 0.0) + tree_seconds(roots, table)
    for name, label in (by_name or {}).items():
        parts[label] = parts.get(label, 0.0) + sum(s for _, n, s in table.values() if n == name)
    t = os.times()
    parts["load generator"] = t.user + t.system
    busy, idle = machine_busy_seconds()
    return Usage(parts, busy, idle)


def between(before: Usage, after: Usage) -> list[tuple[str, float, float]]:
    """(label, CPU seconds, share of the machine's CPU time) per part, then everything else and idle."""
    total = (after.busy - before.busy) + (after.idle - before.idle)
    rows = [(label, after.parts[label] - before.parts.get(label, 0.0)) for label in after.parts]
    rest = (after.busy - before.busy) - sum(s for _, s in rows)
    rows += [("other", max(0.0, rest)), ("idle", after.idle - before.idle)]
    return [(label, seconds, seconds / total if total > 0 else 0.0) for label, seconds in rows]
