"""What a run came to, in words: the verdict's status and one sentence a student can act on.

Pure functions over the facts the grader collected (``GroupRun``): how each group of ranks
ended, the errors they reported, and the limits they hit. Torch-free.
"""

from __future__ import annotations

from typing import Any

from labs.judge import GroupRun
from labs.verdict import CheckResult, Status, worst

OUTPUT_BYTES = 16_384  # a rank's stdout and stderr kept for the page
NPROC = 64  # processes (threads included) a rank's uid may have


def summarise(groups: list[GroupRun], end: dict[str, Any], results: list[CheckResult]) -> tuple[Status, str]:
    """The verdict's status and one sentence a student can act on."""
    if end.get("kind") == "fault":
        return "internal_error", "the grader failed inside the sandbox; this is not your fault: " + str(
            end.get("traceback", "")
        )[-300:]
    statuses: list[Status] = []
    notes: list[str] = []
    faults = [r.fault for g in groups for r in g.ranks if r.fault]
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
        if g.status == "crashed" and g.expect_crash:
            pass  # the lab killed a rank on purpose: how the later phases recover is what the checks judge
        elif g.status in ("time_limit", "deadlock", "crashed"):
            # A rank at its process limit was busy forking, not waiting on a peer.
            statuses.append("time_limit" if g.status == "deadlock" and forked_out(g) else g.status)  # type: ignore[arg-type]
            notes.append(f"world size {g.world_size}: {describe_end(g)}")
        elif errors and not memory:
            statuses.append("runtime_error")
            rank, e = errors[0]
            notes.append(
                f"world size {g.world_size}, rank {rank}: {e.get('error')}: {e.get('message')}"
                + (f" (line {e['line']})" if e.get("line") else "")
            )
        if any(i.get("output_bytes", 0) > len(i.get("output", "").encode()) for i in infos):
            notes.append(f"world size {g.world_size}: output was cut at {OUTPUT_BYTES} bytes per rank")
    if end.get("kind") == "lost":
        statuses.append("time_limit")
        notes.append(f"the sandbox was stopped: {end.get('detail') or 'no answer'}")
    if not statuses:
        statuses.append("passed" if all(r.passed for r in results) else "failed")
    status = worst(statuses)
    if not notes:
        failed = [r for r in results if not r.passed]
        notes = ["all checks passed"] if not failed else [f"{failed[0].title}: {failed[0].message}"]
    return status, "; ".join(notes)[:2000]


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
    """The ranks seen at (or within two of) their limit of processes and threads."""
    return [r.info for r in g.ranks if int(r.info.get("processes") or 0) >= nproc - 2]


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
