"""A group's ranks as the zygote keeps track of them: their state, who owns a pid, their private scratch.

Stdlib only (it runs in the sandbox, in the zygote, which never runs student code).
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass, field
from typing import Any

from labs.rank import channel

BUSY_CPU_FRACTION = 0.2
# (when, CPU seconds per uid, CPU seconds used or waited for in the run queue per uid)
Sample = tuple[float, dict[int, float], dict[int, float]]


@dataclass
class RankState:
    rank: int
    uid: int
    pid: int
    ctl: socket.socket
    out: int
    reader: channel.Reader
    output: bytearray = field(default_factory=bytearray)
    output_bytes: int = 0
    ended: bool = False  # released at the end: every rank of the group said done
    closed: bool = False  # its socket reached end of stream: exited or gave up the channel
    waiting: str | None = None  # where it waits for the others, in words (for the verdict)
    last_call: int | None = None
    ready: bool = False  # set up and joined the group; from here on, student code may run in it
    released: bool = False  # told to go on after every rank was ready
    wanting: int | None = None  # asked for this call's inputs
    current: int | None = None  # holds this call's inputs and owes its result
    next_call: int = 0
    import_failed: bool = False
    done: bool = False
    status: int | None = None
    problem: str | None = None
    processes: int = 0  # the most tasks (processes and threads) of this rank's uid seen alive at once

    def info(self, cpu_s: float, state: str) -> dict[str, Any]:
        code = sig = None
        if self.status is not None:
            code = os.waitstatus_to_exitcode(self.status)
            sig, code = (-code, None) if code < 0 else (None, code)
        return {
            "rank": self.rank,
            "state": state,
            "exit": code,
            "signal": sig,
            "cpu_s": round(cpu_s, 3),
            "last_call": self.last_call,
            "problem": self.problem,
            "processes": self.processes,
            "output": self.output.decode("utf-8", "replace"),
            "output_bytes": self.output_bytes,
        }


STORE_SLOT = 7  # uid_base + 8g + 7: the group's store; ranks are 8g + 0..6


def owners(pids: set[int]) -> dict[int, int]:
    """Each live pid's real uid (a pid that is gone is left out)."""
    found = {}
    for pid in pids:
        try:
            with open(f"/proc/{pid}/status") as f:
                found[pid] = int(next(line for line in f if line.startswith("Uid:")).split()[1])
        except (OSError, StopIteration, ValueError):
            continue
    return found


def private_dir(uid: int) -> None:
    """``/tmp/rank-<uid>``: owned by the zygote, group ``uid`` (made with that effective gid, so no chown is
    needed), mode 0770: the rank's own scratch, which no other rank can enter."""
    path = f"/tmp/rank-{uid}"
    egid = os.getegid()
    os.setegid(uid)
    try:
        os.mkdir(path, 0o770)
        os.chmod(path, 0o770)
    finally:
        os.setegid(egid)


def busy(samples: list[Sample], ranks: list[RankState]) -> bool:
    """Whether some unfinished rank used, or waited in the run queue for, the CPU in the recent window:
    a rank blocked in a collective sleeps, while one starved by a loaded machine is runnable."""
    if len(samples) < 2:
        return True
    (t0, _, c0), (t1, _, c1) = samples[0], samples[-1]
    span = max(t1 - t0, 1e-3)
    return any((c1.get(rs.uid, 0.0) - c0.get(rs.uid, 0.0)) / span > BUSY_CPU_FRACTION for rs in ranks if not rs.ended)
