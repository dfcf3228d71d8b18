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
import time
import traceback
from typing import Any

from labs.rank import channel, faults, harness, jobfiles, script, warmup
from labs.rank.procs import pids_of, usage_by_uid
from labs.rank.ranks import STORE_SLOT, RankState, Sample, busy, owners, private_dir
from labs.rank.window import WIRE_POLL_S, Window

MAX_JOB = 1 << 24
MAX_INPUT = 1 << 30
MAX_RESULT = 1 << 28
MAX_JOB_RESULTS = 64 << 20  # every result of a job together: what the worker holds for the judge
STALL_S = 1.5
SAMPLE_S = 0.1
CRASH_GRACE_S = 0.1  # in a phase that expects a crash: how long the other ranks may end on their own
FAULT_NICE = 10  # a group with a fault plan: its ranks yield the CPU to the zygote that watches them


class Zygote:
    def __init__(self, fd: int, job: dict[str, Any]):
        self.fd = fd
        self.job = job
        self.limits = job["limits"]
        self.deadline = time.monotonic() + float(self.limits["wall_s"])
        self.output_cap = int(self.limits["output_bytes"])
        self.last_output = 0.0
        self.result_bytes = 0
        self.inputs: dict[tuple[int, int], bytes] = {}  # (rank, call) -> that call's inputs, this group only
        self.open_call: int | None = None  # the call whose inputs are out and whose results are not all in
        self.window: Window | None = None
        self.injector: faults.Injector | None = None  # this group's fault plan, received after the fork
        self.exiting: list[int] = []  # stores killed, and ranks that outlived the group's end, not yet reaped

    def tell(self, meta: dict[str, Any], payload: bytes = b"") -> None:
        channel.send(self.fd, meta, payload)

    def run(self) -> None:
        warmup.preload(self.job.get("preload") or [])
        jobfiles.lay_out(self.job)
        for g, group in enumerate(self.job["groups"]):
            if self.job.get("shared_dir"):  # closed to a group that does not share it
                os.chmod(str(self.job["shared_dir"]), 0o777 if group.get("shares_dir") else 0)
            status, infos = self.run_group(g, group)
            self.tell({"kind": "group_end", "group": g, "status": status, "ranks": infos})
            if group.get("shares_dir"):
                entries, truncated, payload = jobfiles.collect(str(self.job["shared_dir"]))
                self.tell({"kind": "files", "group": g, "entries": entries, "truncated": truncated}, payload)
            if status != "ok" and not (status == "crashed" and group.get("expect_crash")):
                break

    def fork_ranks(self, g: int, group: dict[str, Any]) -> list[RankState]:
        ranks: list[RankState] = []
        sandboxed = bool(self.job.get("sandboxed", True))
        if "agent" not in group:  # the first group's; each later one's started while the group before it joined
            self.start_store(g)
        for r in range(int(group["world_size"])):
            parent, child = socket.socketpair()
            out_r, out_w = os.pipe()
            uid = int(self.job["uid_base"]) + 8 * g + r
            if sandboxed:
                private_dir(uid)
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
                    if group.get("fault_plan"):  # the zygote must see a checkpoint appear before ranks go past it
                        os.nice(FAULT_NICE)
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
        # The worker places each rank in its own cgroup (by pid), then sends every call's inputs, which
        # stay here until the call's window opens.
        self.tell({"kind": "need_inputs", "group": g, "pids": [rs.pid for rs in ranks]})
        for _ in range(len(ranks) * len(group["calls"])):
            got = channel.recv(self.fd, MAX_INPUT)
            if got is None:
                os._exit(0)
            self.inputs[(int(got[0]["rank"]), int(got[0]["call"]))] = got[1]
        if group.get("fault_plan"):
            # The fault plan (labs/rank/faults.py) arrives only now, after the fork, so no rank holds it; the folder
            # it names is watched from here on, before the ranks are released and any student code runs.
            got = channel.recv(self.fd, MAX_JOB)
            if got is None:
                os._exit(0)
            self.injector = faults.Injector(got[0]["plan"], str(self.job["shared_dir"]), [rs.uid for rs in ranks])
        if g + 1 < len(self.job["groups"]):  # while these ranks join; the worker has put the zygote in the job's group
            self.start_store(g + 1)
        return ranks

    def start_store(self, g: int) -> None:
        """Group ``g``'s store, listening before any of its ranks starts.

        A script lab's is torchrun's agent store, as rank 0's uid: a store per launch (call), trusted with
        nothing. Otherwise a process of its own (a uid no rank has) serves the group's store; the ranks are
        its clients, and its traffic is counted with the ranks' own.
        """
        group = self.job["groups"][g]
        sandboxed = bool(self.job.get("sandboxed", True))
        if self.job.get("entry") == "script":
            uid = self.job["uid_base"] + 8 * g
            group["agent"], group["master_ports"] = script.start_agent_store(
                int(group["world_size"]), len(group["calls"]), uid, sandboxed, self.fd
            )
        else:
            uid = self.job["uid_base"] + 8 * g + STORE_SLOT
            group["agent"], (group["store_port"],) = script.start_agent_store(
                int(group["world_size"]), 1, uid, sandboxed, self.fd
            )
        group["agent_uid"] = uid

    def end_store(self, group: dict[str, Any]) -> None:
        """SIGKILL the group's store (as its uid: the zygote holds no CAP_KILL) without waiting for its exit, and
        reap what has exited since; the last ones go with the sandbox."""
        pid = group.pop("agent")
        if self.job.get("sandboxed", True):
            faults.kill({pid: int(group["agent_uid"])})
        else:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        self.exiting.append(pid)
        for old in list(self.exiting):
            try:
                if os.waitpid(old, os.WNOHANG)[0]:
                    self.exiting.remove(old)
            except ChildProcessError:
                self.exiting.remove(old)

    def run_group(self, g: int, group: dict[str, Any]) -> tuple[str, list[dict[str, Any]]]:
        ranks = self.fork_ranks(g, group)
        sel = selectors.DefaultSelector()
        for rs in ranks:
            rs.ctl.setblocking(False)
            os.set_blocking(rs.out, False)
            sel.register(rs.ctl, selectors.EVENT_READ, (rs, "ctl"))
            sel.register(rs.out, selectors.EVENT_READ, (rs, "out"))
        watched = self.injector.fileno() if self.injector is not None else None
        if watched is not None:
            sel.register(watched, selectors.EVENT_READ, (None, "fault"))
        uids = {rs.uid for rs in ranks}
        samples: list[Sample] = []
        last_progress = time.monotonic()
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
            active = busy(samples, ranks) or now - self.last_output < 1.0
            if now >= self.deadline:
                status = "time_limit" if active else "deadlock"
                break
            if now - last_progress > STALL_S and samples[0][0] <= now - STALL_S and not active:
                status = "deadlock"
                break
            wait = 0.25 if first_death is None else first_death + CRASH_GRACE_S - now
            if self.window is not None:
                self.window.poll()
                wait = min(wait, WIRE_POLL_S)
            for key, _ in sel.select(timeout=min(wait, max(0.0, self.deadline - now))):
                rs, kind = key.data
                if kind == "fault":  # a file event in the fault plan's folder: maybe a rank to end now
                    self.inject(ranks)
                    continue
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
                    self.progress(g, ranks)
                    continue
                try:
                    messages = rs.reader.feed(data)
                except channel.ProtocolError as exc:
                    self.refuse(rs, ranks, f"broke the result channel: {exc}", sel)
                    continue
                for meta, payload in messages:
                    why = self.handle(g, rs, ranks, meta, payload)
                    if why:
                        self.refuse(rs, ranks, why, sel)
                        break
        infos = self.finish(ranks, sel, samples, status, expect_crash)
        if self.window is not None:  # the group ended with a call's results still owed: its bytes all the same
            self.report_wire(g, ranks)
        self.inputs.clear()
        self.open_call = None
        if group.get("agent"):  # killed, and reaped later: the next group need not wait for its exit
            self.end_store(group)
        if self.injector is not None:
            self.report_fault(g, ranks)
        return status, infos

    def inject(self, ranks: list[RankState]) -> None:
        """End the ranks the fault plan names now: every process of each one's uid (only its pid, unsandboxed)."""
        assert self.injector is not None
        for r in self.injector.poll():
            for victim in (rs for rs in ranks if rs.rank == r):
                if victim.closed:  # it had ended before its crash was seen
                    self.injector.too_late()
                faults.kill({victim.pid: victim.uid})  # its main process first: no /proc walk before it
                if self.job.get("sandboxed", True):
                    faults.kill(faults.processes({victim.uid}))

    def report_fault(self, g: int, ranks: list[RankState]) -> None:
        """Complete the group's fault once none of its processes can write any more, and tell the worker."""
        injector, self.injector = self.injector, None
        assert injector is not None
        uids = {rs.uid for rs in ranks}
        sandboxed = self.job.get("sandboxed", True)

        def living() -> set[int]:
            if sandboxed:
                procs = faults.processes(uids)
                faults.kill(procs)
                return set(procs)
            self.kill_group(ranks)
            for rs in ranks:  # unsandboxed (development): the ranks themselves, reaped here
                if rs.status is None:
                    with contextlib.suppress(ChildProcessError):
                        pid, st = os.waitpid(rs.pid, os.WNOHANG)
                        rs.status = st if pid else None
            return {rs.pid for rs in ranks if rs.status is None}

        self.tell({"kind": "fault_report", "group": g, **injector.close(living)})

    def kill_group(self, ranks: list[RankState]) -> None:
        """SIGKILL every process of the group's ranks: their uids' (sandboxed), else the ranks themselves."""
        self.end_processes({rs.pid for rs in ranks if rs.status is None}, {rs.uid for rs in ranks})

    def end_processes(self, pids: set[int], uids: set[int] | frozenset[int] = frozenset()) -> None:
        """SIGKILL ``pids`` and, sandboxed, every process of ``uids``. The zygote holds no CAP_KILL: it signals
        each process under that process's own uid (``faults.kill``), which its CAP_SETUID allows."""
        if not self.job.get("sandboxed", True):
            for pid in pids:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            return
        targets = {pid: uid for pid, uid in owners(pids | pids_of(set(uids))).items()}
        faults.kill(targets)

    def handle(self, g: int, rs: RankState, ranks: list[RankState], meta: dict[str, Any], payload: bytes) -> str | None:
        """Take one message from a rank; a reason when the message is one the grader does not accept.

        The student's code can send anything on this socket, so every message is checked against
        where the rank is: a grader fault is believed only before the rank was ready (no student code
        had run), a call's inputs go out only when every rank asked for them, a result only answers
        the call the rank holds, once.
        """
        kind = meta.get("kind")
        if not rs.ready:
            if kind == "fault":
                self.tell({**meta, "group": g, "rank": rs.rank})
                return None
            if kind == "ready":
                rs.ready = True
                self.release_if_ready(g, ranks)
                return None
            return f"sent {kind!r} before it was set up"
        if not rs.released or rs.done:
            return f"sent {kind!r} {'after it said it was done' if rs.done else 'before the group was released'}"
        if kind == "error" and meta.get("phase") == "import" and rs.next_call == 0 and rs.current is None:
            if rs.import_failed or rs.wanting is not None:
                return "reported a second import error"
            rs.import_failed = True
            self.tell({**meta, "group": g, "rank": rs.rank, "call": None})
            return None
        if kind == "want":
            if meta.get("call") != rs.next_call or rs.current is not None or rs.wanting is not None:
                return f"asked for call {meta.get('call')!r} out of turn"
            rs.wanting = rs.next_call
            rs.waiting = f"call {rs.next_call}"
            self.progress(g, ranks)
            return None
        if kind in ("result", "error"):
            if rs.current is None or meta.get("call") != rs.current:
                return f"sent a {kind} for call {meta.get('call')!r}, which it was not running"
            self.result_bytes += len(payload)
            if self.result_bytes > MAX_JOB_RESULTS:
                return f"returned more than {MAX_JOB_RESULTS >> 20} MiB of results in all (the output limit)"
            self.tell({**meta, "group": g, "rank": rs.rank, "call": rs.current}, payload)
            rs.current = None
            rs.next_call += 1
            self.progress(g, ranks)
            return None
        if kind == "done":
            if rs.current is not None or rs.wanting is not None:
                return "said it was done in the middle of a call"
            rs.done = True
            rs.waiting = "the end"
            self.tell({"kind": "done", "group": g, "rank": rs.rank, "guard": meta.get("guard")})
            self.progress(g, ranks)
            return None
        if kind == "fault":
            return "claimed a grader fault after its own code had started (that is the submission's error)"
        return f"sent a message the grader does not accept ({str(kind)[:40]!r})"

    def refuse(self, rs: RankState, ranks: list[RankState], why: str, sel: selectors.BaseSelector) -> None:
        """A rank broke the protocol: it is ended (every process of its uid), and says why in the verdict."""
        rs.problem = why
        with contextlib.suppress(KeyError, ValueError):
            sel.unregister(rs.ctl)
        rs.closed = True
        self.end_processes({rs.pid}, {rs.uid})

    def release_if_ready(self, g: int, ranks: list[RankState]) -> None:
        """Once every rank joined its group (no student code has run yet), the worker takes its baselines
        (each rank's memory), then the ranks go on to load the submission."""
        if not all(x.ready for x in ranks):
            return
        self.tell({"kind": "ranks_ready", "group": g})
        got = channel.recv(self.fd, MAX_JOB)
        if got is None or got[0].get("kind") != "go":
            os._exit(0)
        for x in ranks:
            self.send_rank(x, {"kind": "go"})
            x.released = True

    def progress(self, g: int, ranks: list[RankState]) -> None:
        """Close the open call once every rank still running answered it; hand out the next call's inputs once
        every rank still running asked for it; release everyone once every rank is done."""
        running = [x for x in ranks if not x.closed and not x.done]
        i = self.open_call
        if i is not None and all(x.current != i for x in running):
            if self.window is not None:
                self.report_wire(g, ranks)
            self.open_call = None
        if self.open_call is None and running:
            want = running[0].wanting
            if want is not None and all(x.wanting == want for x in running):
                self.start_call(g, want, running)
        if all(x.closed or x.done for x in ranks) and not all(x.ended or x.closed for x in ranks):
            for x in ranks:
                if not x.closed:
                    self.send_rank(x, {"kind": "go"})
                    x.ended = True
                    x.waiting = None

    def start_call(self, g: int, i: int, running: list[RankState]) -> None:
        """Open call ``i``'s window (a measured one: counters read here, before any rank holds its inputs), then
        give each rank its inputs: nothing about call ``i`` existed in a rank before this point."""
        calls = self.job["groups"][g]["calls"]
        if calls[i].get("measure"):
            self.window = Window(i)
        self.open_call = i
        for x in running:
            x.wanting = None
            x.waiting = None
            x.current = i
            x.last_call = i
            self.send_rank(x, {"kind": "inputs", "call": i}, self.inputs.pop((x.rank, i), b""))

    def send_rank(self, rs: RankState, meta: dict[str, Any], payload: bytes = b"") -> None:
        try:
            rs.ctl.setblocking(True)
            channel.write_all(rs.ctl.fileno(), channel.encode(meta, payload))
        except OSError:
            rs.closed = True
        finally:
            with contextlib.suppress(OSError):
                rs.ctl.setblocking(False)

    def report_wire(self, g: int, ranks: list[RankState]) -> None:
        window, self.window = self.window, None
        assert window is not None
        self.tell({"kind": "wire", "group": g, **window.report({rs.uid: rs.rank for rs in ranks})})

    def take_output(self, rs: RankState, data: bytes, sel: selectors.BaseSelector, fd: int) -> None:
        if not data:
            sel.unregister(fd)
            return
        rs.output_bytes += len(data)
        self.last_output = time.monotonic()
        room = self.output_cap - len(rs.output)
        if room > 0:
            rs.output += data[:room]

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
            for key, _ in sel.select(timeout=0.002):  # a rank whose socket closed is a moment from its exit status
                rs, kind = key.data
                if kind == "out":
                    with contextlib.suppress(BlockingIOError, InterruptedError):
                        self.take_output(rs, os.read(key.fd, 1 << 20), sel, key.fd)
        self.exiting += [rs.pid for rs in ranks if rs.status is None]
        cpu = samples[-1][1] if samples else {}
        infos = []
        for rs in ranks:
            state = "finished" if rs.ended else "exited" if rs.status is not None else "running"
            if state == "running" and rs.waiting:
                state = f"waiting at {rs.waiting}"
            infos.append(rs.info(cpu.get(rs.uid, 0.0), state))
        sel.close()
        return infos


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
    warmup.warm()
    serve(int(sys.argv[1]) if len(sys.argv) > 1 else 3)
