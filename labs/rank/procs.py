"""What the zygote reads of its ranks' processes in /proc: CPU used, CPU waited for, tasks, pids.

Stdlib only: it runs inside the sandbox, as the zygote (the sandbox's root), over the pid
namespace the sandbox has.
"""

from __future__ import annotations

import os


def usage_by_uid() -> tuple[dict[int, float], dict[int, int], dict[int, float]]:
    """Per uid in this pid namespace: CPU seconds used so far by its live processes, their tasks
    (threads included: what RLIMIT_NPROC counts), and the seconds their threads spent runnable but
    waiting for a CPU (a rank starved by a loaded machine is not an idle one)."""
    tick = os.sysconf("SC_CLK_TCK")
    out: dict[int, float] = {}
    count: dict[int, int] = {}
    queued: dict[int, float] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            # The real uid from status: /proc/PID itself is owned by root once a rank's setuid
            # has made it non-dumpable, so its owner says nothing about whose process it is.
            with open(f"/proc/{name}/status") as f:
                status = f.read().splitlines()
            uid = int(next(line for line in status if line.startswith("Uid:")).split()[1])
            threads = int(next(line for line in status if line.startswith("Threads:")).split()[1])
            with open(f"/proc/{name}/stat") as f:
                fields = f.read().rpartition(")")[2].split()
        except (OSError, StopIteration, ValueError):
            continue
        out[uid] = out.get(uid, 0.0) + (int(fields[11]) + int(fields[12])) / tick
        count[uid] = count.get(uid, 0) + threads
        queued[uid] = queued.get(uid, 0.0) + run_queue_wait_s(name)
    return out, count, queued


def run_queue_wait_s(pid: str) -> float:
    """Seconds the process's threads have spent runnable, waiting for a CPU (0 where unknown).

    Every thread's, not the main thread's alone: a rank whose main thread sleeps while one of its own
    threads (gloo's, say) waits for a CPU on a loaded machine is starved, not idle."""
    total, found = 0.0, False
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        tasks = []
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                total += int(f.read().split()[1]) / 1e9
                found = True
        except (OSError, IndexError, ValueError):
            continue
    if found:
        return total
    try:
        with open(f"/proc/{pid}/schedstat") as f:
            return int(f.read().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return 0.0


def pids_of(uids: set[int]) -> set[int]:
    """The processes in this pid namespace whose real uid is one of ``uids``."""
    found = set()
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/status") as f:
                uid = int(next(line for line in f if line.startswith("Uid:")).split()[1])
        except (OSError, StopIteration, ValueError):
            continue
        if uid in uids:
            found.add(int(name))
    return found
