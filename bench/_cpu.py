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


def tree_seconds(roots: Iterable[int], table: dict[int, tuple[int, str, float]]) -> float:
    """CPU seconds of ``roots`` and every live descendant (ended ones are in their waiting parent's count)."""
    children: dict[int, list[int]] = {}
    for pid, (ppid, _, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    total, todo = 0.0, [r for r in roots if r in table]
    while todo:
        pid = todo.pop()
        total += table[pid][2]
        todo.extend(children.get(pid, []))
    return total


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


def usage(groups: dict[str, list[int]], *, by_name: dict[str, str] | None = None) -> Usage:
    """CPU seconds so far of each labelled group of process trees, of processes named in ``by_name``
    (command name -> label, e.g. every ``postgres``), and of this process (``load generator``)."""
    table = processes()
    parts = {label: tree_seconds(roots, table) for label, roots in groups.items()}
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
