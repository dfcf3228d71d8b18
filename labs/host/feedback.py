"""What a run came to, in words: the verdict's status and one sentence a student can act on.

Pure functions over the facts the grader collected (``GroupRun``): how each group of ranks
ended, the errors they reported, and the limits they hit. Torch-free.
"""

from __future__ import annotations

from typing import Any

from labs.host.judge import GroupRun
from labs.verdict import CheckResult, Status, worst

OUTPUT_BYTES = 16_384  # a rank's stdout and stderr kept for the page
NPROC = 64  # processes (threads included) a rank's uid may have
SIGSYS = 31  # what the rank's seccomp filter (labs.host.seccomp) kills a process with
NO_SPACE = "[Errno 28]"  # ENOSPC: the sandbox's /tmp is full, in bytes or in files
TMP_LIMITS = "64 MiB in at most 4096 files and directories, for every rank together"


def summarise(groups: list[GroupRun], end: dict[str, Any], results: list[CheckResult]) -> tuple[Status, str]:
    """The verdict's status and one sentence a student can act on."""
    faults = [str(end.get("traceback", ""))] if end.get("kind") == "fault" else []
    faults += [r.fault for g in groups for r in g.ranks if r.fault]
    if any(NO_SPACE in fault for fault in faults):
        # Only the ranks write more than a few files in /tmp: when the grader found it full, they had filled it.
        return "runtime_error", (
            f"the sandbox's /tmp ran out of room ({TMP_LIMITS}) and the next group of ranks could not start: "
            "your code filled it; write fewer and smaller files, and remove those you no longer need"
        )
    if end.get("kind") == "fault":
        return "internal_error", "the grader failed inside the sandbox; this is not your fault: " + faults[0][-300:]
    statuses: list[Status] = []
    notes: list[str] = []
    if faults:
        return "internal_error", "a rank failed to start; this is not your fault: " + faults[0][-300:]
    for g in groups:
        infos = [r.info for r in g.ranks]
        errors = [(rank, e) for rank, r in enumerate(g.ranks) for e in r.errors]
        memory = [(rank, e) for rank, e in errors if is_memory_error(e)]
        if memory:
            statuses.append("memory_limit")
            rank, e = memory[0]
            what = "GPU memory (the lab's gpu_memory_mb)" if is_gpu_memory_error(e) else "memory (the limit)"
            notes.append(f"world size {g.world_size}, rank {rank} ran out of {what}")
        killed = [rank for rank, r in enumerate(g.ranks) if r.oom_killed]  # by the kernel, at its cgroup's limit
        if killed and not memory:
            statuses.append("memory_limit")
            notes.append(f"world size {g.world_size}, {out_of_memory(g, killed[0])}")
        forbidden = [i for i in infos if i.get("signal") == SIGSYS]
        if forbidden:  # in any group, a crash phase's too: a lab kills its ranks with SIGKILL, never this
            statuses.append("runtime_error")
            notes.append(f"world size {g.world_size}, {forbidden_call(forbidden[0])}")
        elif killed:
            pass  # the rest of the group failed because of it: said above
        elif g.status == "crashed" and g.expect_crash:
            pass  # the lab killed a rank on purpose: how the later phases recover is what the checks judge
        elif g.status in ("time_limit", "deadlock", "crashed"):
            # A rank at its process limit was busy forking, not waiting on a peer.
            statuses.append("time_limit" if g.status == "deadlock" and forked_out(g) else g.status)  # type: ignore[arg-type]
            notes.append(f"world size {g.world_size}: {describe_end(g)}")
        elif forked_out(g):  # finished, but a fork was refused at the rank's process limit on the way
            statuses.append("runtime_error")
            notes.append(
                f"world size {g.world_size}: rank {forked_out(g)[0]['rank']} reached the limit of {NPROC} processes "
                "and threads and was refused more (a fork bomb?); a rank needs no processes of its own: remove the "
                "code that starts them"
            )
        elif errors and not memory:
            statuses.append("runtime_error")
            rank, e = errors[0]
            notes.append(
                f"world size {g.world_size}, rank {rank}: {e.get('error')}: {e.get('message')}"
                + (f" (line {e['line']})" if e.get("line") else "")
                + sandbox_hint(e)
            )
        if any(i.get("output_bytes", 0) > len(i.get("output", "").encode()) for i in infos):
            notes.append(f"world size {g.world_size}: output was cut at {OUTPUT_BYTES} bytes per rank")
    if end.get("kind") == "lost":
        statuses.append("time_limit")
        notes.append(f"the sandbox was stopped: {end.get('detail') or 'no answer'}")
    if not statuses:
        # A check worth 0 points is feedback (measured where the student could fake it): it never fails a run.
        statuses.append("passed" if all(r.passed for r in results if r.points > 0) else "failed")
    status = worst(statuses)
    if not notes:
        failed = [r for r in results if not r.passed and r.points > 0] or [r for r in results if not r.passed]
        notes = ["all checks passed"] if not failed else [f"{failed[0].title}: {failed[0].message}"]
    return status, "; ".join(notes)[:2000]


def forbidden_call(info: dict[str, Any]) -> str:
    """A rank the seccomp filter killed: which kind of call it was, and that the rank needs none."""
    return (
        f"rank {info.get('rank')} was stopped by the sandbox (signal {SIGSYS}, SIGSYS): your code made a system "
        "call that ranks may not make (the kernel keyring, ptrace or another process's memory, mounts or new "
        "namespaces, System V shared memory, semaphores or message queues, POSIX message queues, io_uring, perf "
        "or bpf); remove it: a rank needs none of these, and talks to the others only through torch.distributed"
    )


def sandbox_hint(e: dict[str, Any]) -> str:
    """What the sandbox refuses, after an error it caused (permission denied, /tmp full)."""
    text = f"{e.get('error')} {e.get('message')}"
    if e.get("error") == "PermissionError" or "Operation not permitted" in text or "Permission denied" in text:
        return (
            " (the sandbox refused it: a rank may write only in its own working directory, which is also its $HOME "
            "and $TMPDIR, and talks to other ranks only through torch.distributed over TCP: no unix or UDP sockets, "
            "no shared memory in /dev/shm)"
        )
    if NO_SPACE in text or "No space left on device" in text:
        return f" (/tmp is full: it holds {TMP_LIMITS}; write fewer and smaller files)"
    return ""


def is_memory_error(e: dict[str, Any]) -> bool:
    text = f"{e.get('error')} {e.get('message')}"
    return (
        e.get("error") == "MemoryError"
        or "can't allocate memory" in text
        or "bad_alloc" in text
        or is_gpu_memory_error(e)
    )


def is_gpu_memory_error(e: dict[str, Any]) -> bool:
    return e.get("error") == "OutOfMemoryError" or "CUDA out of memory" in str(e.get("message"))


def forked_out(g: GroupRun, nproc: int = NPROC) -> list[dict[str, Any]]:
    """The ranks seen at (or within two of) their limit of processes and threads, or refused one by it
    (their control group's count, ``RankRun.pids_limited``)."""
    return [
        {"rank": rank, **r.info}
        for rank, r in enumerate(g.ranks)
        if r.pids_limited or int(r.info.get("processes") or 0) >= nproc - 2
    ]


def out_of_memory(g: GroupRun, rank: int) -> str:
    """A rank the kernel's OOM killer ended at its control group's memory limit."""
    memory = g.ranks[rank].memory or {}
    limit, baseline = memory.get("limit_bytes"), memory.get("baseline_bytes")
    allowed = f" of {(limit - baseline) >> 20} MB" if limit is not None and baseline is not None else ""
    return (
        f"rank {rank} was killed by the kernel for using more than its memory limit{allowed}: everything the "
        "rank's processes hold counts, shared memory (mmap MAP_SHARED, /dev/shm) and child processes included; "
        "hold less at once: free tensors and buffers you no longer need and keep no extra copies of the data"
    )


def describe_end(g: GroupRun, nproc: int = NPROC) -> str:
    infos = [r.info for r in g.ranks]
    bombs = forked_out(g, nproc)
    if bombs:
        i = bombs[0]
        return (
            f"rank {i['rank']} reached the limit of {nproc} processes and threads: it kept starting processes "
            "(a fork bomb?) instead of finishing; a rank needs no processes of its own"
        )
    if g.status == "crashed":
        dead = [i for i in infos if i.get("state") == "exited"]
        if dead:
            i = dead[0]
            how = f"signal {i['signal']}" if i.get("signal") else f"exit code {i.get('exit')}"
            why = f" ({i['problem']})" if i.get("problem") else ""
            return f"rank {i['rank']} ended ({how}) before reporting all its results{why}"
        return "a rank stopped reporting before its results were in"
    stuck = [
        f"rank {i['rank']} ({i.get('state')}{call_label(g, i.get('last_call'))})"
        for i in infos
        if i.get("state") != "finished"
    ]
    if not stuck:  # every rank returned, yet its connection stayed open: a process of its own held it
        return (
            "every rank returned its results, but processes a rank started were still running (a fork bomb, "
            "a daemon or a child process left behind); a rank must not leave processes running"
        )
    if g.status == "deadlock":  # the zygote cannot tell a hung collective from a rank out of processes
        return (
            "deadlock: every unfinished rank was waiting: " + ", ".join(stuck) + " (a rank that started too many "
            "processes, such as a fork bomb, also stops like this: at most 64 per rank)"
        )
    return "time limit exceeded while ranks were busy: " + ", ".join(stuck)


def call_label(g: GroupRun, index: Any) -> str:
    if isinstance(index, int) and 0 <= index < len(g.cases):
        return f", in {g.cases[index].label}"
    return ", before its first call"
