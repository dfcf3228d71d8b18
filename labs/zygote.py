"""The zygote: a warm process waiting inside a fresh sandbox for one job.

It imports torch before any job arrives (the expensive part of starting a
rank), then, on a job, forks the ranks of each world size in turn. It is the
only trusted code in the sandbox: it runs as the sandbox's root with no
student code in it, while each rank drops to its own unprivileged uid, so a
rank can neither signal, trace nor read it. It relays each rank's messages to
the worker, releases the ranks through their sync points, measures bytes on
the wire around measured calls, and enforces the wall-clock deadline, telling
a deadlock (every rank idle) from a busy loop. The worker kills the whole
sandbox once the zygote reports the end, so no rank outlives its job.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import socket
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from typing import Any

from labs import channel, harness, netstat, script
from labs.procs import pids_of, usage_by_uid

MAX_JOB = 1 << 24
MAX_INPUT = 1 << 30
MAX_RESULT = 1 << 28
STALL_S = 1.5
SAMPLE_S = 0.1
BUSY_CPU_FRACTION = 0.2
CRASH_GRACE_S = 0.1  # in a phase that expects a crash: how long the other ranks may end on their own

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
    ended: bool = False  # reached the final sync point
    closed: bool = False  # its socket reached end of stream: exited or gave up the channel
    waiting: str | None = None
    last_call: int | None = None
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


class Zygote:
    def __init__(self, fd: int, job: dict[str, Any]):
        self.fd = fd
        self.job = job
        self.limits = job["limits"]
        self.deadline = time.monotonic() + float(self.limits["wall_s"])
        self.output_cap = int(self.limits["output_bytes"])
        self.last_output = 0.0

    def tell(self, meta: dict[str, Any], payload: bytes = b"") -> None:
        channel.send(self.fd, meta, payload)

    def run(self) -> None:
        preload(self.job.get("preload") or [])
        self.prepare_files()
        for g, group in enumerate(self.job["groups"]):
            status, infos = self.run_group(g, group)
            self.tell({"kind": "group_end", "group": g, "status": status, "ranks": infos})
            if status != "ok" and not (status == "crashed" and group.get("expect_crash")):
                break

    def prepare_files(self) -> None:
        """The lab's public files, read-only for the ranks, and the scratch directory phases share."""
        sandboxed = bool(self.job.get("sandboxed", True))
        public = self.job.get("public") or {}
        base = "/tmp" if sandboxed else tempfile.mkdtemp(prefix="ringlab-job-")
        if public:
            folder = os.path.join(base, "lab")
            os.mkdir(folder, 0o755)
            for name, text in public.items():
                path = os.path.join(folder, os.path.basename(name))
                with open(path, "w", encoding="utf-8") as f:
                    f.write(text)
                os.chmod(path, 0o444)
            os.chmod(folder, 0o555)
            self.job["public_dir"] = folder
        shared = os.path.join(base, "shared")
        os.mkdir(shared)
        os.chmod(shared, 0o777)
        self.job["shared_dir"] = shared
        # The ranks meet through a file, not a TCP store: a TCP client that connects before rank 0
        # listens backs off and retries, which cost 0.4-0.7 s in about one rendezvous in four.
        rendezvous = os.path.join(base, "rendezvous")
        os.mkdir(rendezvous)
        os.chmod(rendezvous, 0o777)
        self.job["rendezvous_dir"] = rendezvous

    def fork_ranks(self, g: int, group: dict[str, Any]) -> list[RankState]:
        ranks: list[RankState] = []
        store = group["store"] = os.path.join(self.job["rendezvous_dir"], f"group-{g}")
        # Made here, writable by every rank's uid: FileStore itself would create it 0644 as the first rank.
        with open(store, "wb"):
            pass
        os.chmod(store, 0o666)
        if self.job.get("entry") == "script":
            # torchrun's agent store, as rank 0's uid: it serves this submission's ranks, trusted with nothing.
            uid, sandboxed = self.job["uid_base"] + 8 * g, bool(self.job.get("sandboxed", True))
            group["agent"], group["master_ports"] = script.start_agent_store(
                int(group["world_size"]), len(group["calls"]), uid, sandboxed, self.fd
            )
        for r in range(int(group["world_size"])):
            parent, child = socket.socketpair()
            out_r, out_w = os.pipe()
            uid = int(self.job["uid_base"]) + 8 * g + r
            pid = os.fork()
            if pid == 0:  # the rank: keep only its own ends
                code = 1
                try:
                    os.close(self.fd)
                    parent.close()
                    os.close(out_r)
                    for other in ranks:
                        other.ctl.close()
                        os.close(other.out)
                    os.dup2(out_w, 1)
                    os.dup2(out_w, 2)
                    os.close(out_w)
                    harness.run_rank(self.job, group, r, uid, child.fileno())
                    code = 0
                except BaseException:
                    traceback.print_exc()
                finally:
                    sys.stdout.flush()
                    sys.stderr.flush()
                    os._exit(code)
            child.close()
            os.close(out_w)
            ranks.append(RankState(r, uid, pid, parent, out_r, channel.Reader(MAX_RESULT)))
        self.tell({"kind": "need_inputs", "group": g})
        for _ in ranks:
            got = channel.recv(self.fd, MAX_INPUT)
            if got is None:
                os._exit(0)
            channel.write_all(ranks[int(got[0]["rank"])].ctl.fileno(), channel.encode(got[0], got[1]))
        return ranks

    def run_group(self, g: int, group: dict[str, Any]) -> tuple[str, list[dict[str, Any]]]:
        ranks = self.fork_ranks(g, group)
        sel = selectors.DefaultSelector()
        for rs in ranks:
            rs.ctl.setblocking(False)
            os.set_blocking(rs.out, False)
            sel.register(rs.ctl, selectors.EVENT_READ, (rs, "ctl"))
            sel.register(rs.out, selectors.EVENT_READ, (rs, "out"))
        uids = {rs.uid for rs in ranks}
        samples: list[Sample] = []
        last_progress = time.monotonic()
        wire_before: tuple[dict[Any, Any], int] | None = None
        status = "ok"
        expect_crash = bool(group.get("expect_crash"))
        first_death: float | None = None
        while True:
            if all(rs.closed for rs in ranks):
                status = "ok" if all(rs.ended for rs in ranks) else "crashed"
                break
            dead = [rs for rs in ranks if rs.closed and not rs.ended]
            now = time.monotonic()
            if dead and expect_crash:
                # The lab killed a rank on purpose: the others would fail in their next collective or hang
                # in it. They get a moment to end on their own, then the group is torn down.
                first_death = first_death or now
                if now - first_death >= CRASH_GRACE_S:
                    self.kill_group(ranks)
                    status = "crashed"
                    break
            elif dead and now - last_progress > 0.5:
                status = "crashed"
                break
            # Sampled at most every SAMPLE_S: reading /proc for each message would slow every sync point.
            if not samples or now - samples[-1][0] >= SAMPLE_S:
                used, counts, queued = usage_by_uid()
                cpu = {u: c for u, c in used.items() if u in uids}
                wanted = {u: c + queued.get(u, 0.0) for u, c in cpu.items()}
                for rs in ranks:  # a fork bomb shows as a rank at its process limit
                    rs.processes = max(rs.processes, counts.get(rs.uid, 0))
                samples = [s for s in samples if now - s[0] <= STALL_S + 0.5] + [(now, cpu, wanted)]
            # A rank that keeps printing is busy even if the pipe, not the CPU, is what holds it up.
            active = self.busy(samples, ranks) or now - self.last_output < 1.0
            if now >= self.deadline:
                status = "time_limit" if active else "deadlock"
                break
            if now - last_progress > STALL_S and samples[0][0] <= now - STALL_S and not active:
                status = "deadlock"
                break
            wait = 0.25 if first_death is None else first_death + CRASH_GRACE_S - now
            for key, _ in sel.select(timeout=min(wait, max(0.0, self.deadline - now))):
                rs, kind = key.data
                try:
                    data = os.read(key.fd, 1 << 20)
                except (BlockingIOError, InterruptedError):
                    continue
                except OSError:
                    data = b""
                if kind == "out":
                    self.take_output(rs, data, sel, key.fd)
                    continue
                last_progress = time.monotonic()
                if not data:
                    sel.unregister(key.fd)
                    rs.closed = True
                    continue
                try:
                    messages = rs.reader.feed(data)
                except channel.ProtocolError as exc:
                    rs.problem = f"broke the result channel: {exc}"
                    sel.unregister(key.fd)
                    rs.closed = True
                    continue
                for meta, payload in messages:
                    wire_before = self.handle(g, rs, ranks, meta, payload, wire_before)
        infos = self.finish(ranks, sel, samples, status, expect_crash)
        if group.get("agent"):
            with contextlib.suppress(OSError):
                os.kill(group["agent"], signal.SIGKILL)
                os.waitpid(group["agent"], 0)
        return status, infos

    def kill_group(self, ranks: list[RankState]) -> None:
        """SIGKILL every process of the group's ranks: their uids' (sandboxed), else the ranks themselves."""
        targets = {rs.pid for rs in ranks if rs.status is None}
        if self.job.get("sandboxed", True):
            targets |= pids_of({rs.uid for rs in ranks})
        for pid in targets:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)

    def handle(
        self,
        g: int,
        rs: RankState,
        ranks: list[RankState],
        meta: dict[str, Any],
        payload: bytes,
        wire_before: tuple[dict[Any, Any], int] | None,
    ) -> tuple[dict[Any, Any], int] | None:
        kind = meta.get("kind")
        if kind in ("ready", "start", "result", "error", "done", "fault"):
            if kind == "start" and isinstance(meta.get("call"), int):
                rs.last_call = meta["call"]
            self.tell({**meta, "group": g, "rank": rs.rank}, payload)
            return wire_before
        if kind != "sync":
            rs.problem = f"sent an unknown message kind {kind!r}"
            return wire_before
        rs.waiting = str(meta.get("tag"))
        live = [x for x in ranks if not x.closed]
        if any(x.waiting != rs.waiting for x in live):
            return wire_before
        tag = rs.waiting
        if tag.startswith("before:"):
            wire_before = (netstat.snapshot(), netstat.loopback_tx_bytes())
        elif tag.startswith("after:") and wire_before is not None:
            self.report_wire(g, int(tag.partition(":")[2]), ranks, wire_before)
            wire_before = None
        for x in live:
            x.waiting = None
            x.ended = x.ended or tag == "end"
            try:
                channel.send(x.ctl.fileno(), {"kind": "go"})
            except OSError:
                x.closed = True
        return wire_before

    def report_wire(self, g: int, call: int, ranks: list[RankState], before: tuple[dict[Any, Any], int]) -> None:
        after = netstat.snapshot()
        lo = netstat.loopback_tx_bytes() - before[1]
        by_uid = netstat.traffic(before[0], after)
        rank_of = {rs.uid: rs.rank for rs in ranks}
        per_rank = {
            str(rank_of.get(uid, -1)): {str(rank_of.get(peer, -1)): n for peer, n in peers.items()}
            for uid, peers in by_uid.items()
        }
        self.tell({"kind": "wire", "group": g, "call": call, "sent": per_rank, "loopback_bytes": lo})

    def take_output(self, rs: RankState, data: bytes, sel: selectors.BaseSelector, fd: int) -> None:
        if not data:
            sel.unregister(fd)
            return
        rs.output_bytes += len(data)
        self.last_output = time.monotonic()
        room = self.output_cap - len(rs.output)
        if room > 0:
            rs.output += data[:room]

    def busy(self, samples: list[Sample], ranks: list[RankState]) -> bool:
        """Whether some unfinished rank used, or waited in the run queue for, the CPU in the recent window:
        a rank blocked in a collective sleeps, while one starved by a loaded machine is runnable."""
        if len(samples) < 2:
            return True
        (t0, _, c0), (t1, _, c1) = samples[0], samples[-1]
        span = max(t1 - t0, 1e-3)
        return any(
            (c1.get(rs.uid, 0.0) - c0.get(rs.uid, 0.0)) / span > BUSY_CPU_FRACTION for rs in ranks if not rs.ended
        )

    def finish(
        self,
        ranks: list[RankState],
        sel: selectors.BaseSelector,
        samples: list[Sample],
        status: str,
        expect_crash: bool = False,
    ) -> list[dict[str, Any]]:
        grace = time.monotonic() + (0.5 if status == "ok" or expect_crash else 0.05)
        while time.monotonic() < grace and any(rs.status is None for rs in ranks):
            for rs in ranks:
                if rs.status is None:
                    pid, st = os.waitpid(rs.pid, os.WNOHANG)
                    rs.status = st if pid else None
            for key, _ in sel.select(timeout=0.01):
                rs, kind = key.data
                if kind == "out":
                    with contextlib.suppress(BlockingIOError, InterruptedError):
                        self.take_output(rs, os.read(key.fd, 1 << 20), sel, key.fd)
        cpu = samples[-1][1] if samples else {}
        infos = []
        for rs in ranks:
            state = "finished" if rs.ended else "exited" if rs.status is not None else "running"
            if state == "running" and rs.waiting:
                state = f"waiting at {rs.waiting}"
            infos.append(rs.info(cpu.get(rs.uid, 0.0), state))
        sel.close()
        return infos


def warm(modules: list[str] | None = None) -> None:
    """Import what every rank needs, before any job: the expensive part of starting a rank."""
    import warnings

    warnings.filterwarnings("ignore", message="Failed to initialize NumPy")
    import torch.distributed as dist
    import torch.distributed.distributed_c10d  # noqa: F401

    assert dist.is_gloo_available()
    preload(modules or [])


def preload(modules: list[str]) -> None:
    """Import the modules a lab's code would import lazily (``lab.yaml``'s ``preload``)."""
    import importlib

    for name in modules:
        if name not in sys.modules:
            importlib.import_module(name)


def serve(fd: int) -> None:
    """Say ready on ``fd``, run the one job that comes, report how it ended, exit."""
    import torch

    channel.send(fd, {"kind": "ready", "pid": os.getpid(), "torch": torch.__version__})
    got = channel.recv(fd, MAX_JOB)
    if got is None:
        os._exit(0)
    try:
        Zygote(fd, got[0]).run()
        channel.send(fd, {"kind": "end"})
    except BaseException:
        channel.send(fd, {"kind": "fault", "traceback": traceback.format_exc()[-4000:]})
    os._exit(0)


def main() -> None:
    """Entry point inside the sandbox, started cold: ``python -I zygote-launcher FD``."""
    warm()
    serve(int(sys.argv[1]) if len(sys.argv) > 1 else 3)
