"""A job's groups of ranks, seen from the host: what the grader sends the zygote and files from it.

The groups a submission runs (``plan``), rank uids leased per job, each call's inputs sent to the
zygote, each rank placed in a control group of its own before any student code runs and armed when
every rank joined, what the kernel saw of the group once it ended (high-water, OOM kills, refused
forks, the bytes on the wire, a planned crash that landed late), and every message from the zygote
filed under its group and rank (``labs.host.judge.GroupRun``).
"""

from __future__ import annotations

import io
from types import ModuleType
from typing import Any

from labs.host import cgroups, pidns, sandbox, uids
from labs.host.judge import GroupRun, RankRun, load, wire_matrix


def lease_uids() -> uids.UidLease:
    """A block of rank uids no other job on this host holds (``labs.host.uids``)."""
    try:
        return uids.lease()
    except (OSError, uids.NoFreeUids) as exc:
        raise sandbox.SandboxError(f"no rank uids could be leased: {exc}") from exc


def pack(tree: Any) -> bytes:
    import torch

    buffer = io.BytesIO()
    torch.save(tree, buffer)
    return buffer.getvalue()


def pack_inputs(groups: list[GroupRun]) -> None:
    """Every call's inputs for every rank, serialized while the zygote starts the first group."""
    for group in groups:
        for i, c in enumerate(group.cases):
            for rank in range(group.world_size):
                group.packed[(rank, i)] = pack([c.inputs[rank]])


def send_inputs(box: sandbox.Sandbox, group: GroupRun, *, per_call: bool) -> None:
    """Each rank's own inputs: one message per call (``{"kind": "inputs", "rank", "call"}``, payload
    ``torch.save([args])``) or, from a zygote that sends no pids, one per rank with every call's."""
    for rank in range(group.world_size):
        if not per_call:
            box.send({"kind": "inputs", "rank": rank}, pack([[c.inputs[rank]] for c in group.cases]))
            continue
        # The zygote hands a rank call i's inputs only when it opens call i's measurement window.
        for i, c in enumerate(group.cases):
            payload = group.packed.get((rank, i)) or pack([c.inputs[rank]])
            box.send({"kind": "inputs", "rank": rank, "call": i}, payload)


def adopt_sandbox(
    job: cgroups.JobCgroups, namespace: tuple[int, int], box: sandbox.Sandbox, ranks: list[Any]
) -> int | None:
    """The sandbox's own processes (its init, the zygote, the first group's store) into the job's group, when the
    zygote asks for the first group's inputs: no student code has run, and none runs before its rank is placed.
    Every process of the sandbox's pid namespace: a zygote forked from the template is no descendant of the
    sandbox's first process. Returns the zygote's host pid (the ranks' parent)."""
    inside = pidns.processes_in(namespace)
    job.adopt(host for pid, host in inside.items() if pid not in ranks)
    return inside.get(int(box.info.get("pid") or -1))


def place_ranks(
    job: cgroups.JobCgroups, namespace: tuple[int, int], g: int, pids: list[Any], zygote: int | None
) -> None:
    """Group ``g``'s ranks, by their pids in the sandbox, each into a control group of its own.

    The ranks are the zygote's children (``zygote``: its host pid), else found among every process."""
    job.begin_group(g)
    host = pidns.processes_in(namespace, pidns.children(zygote)) if zygote is not None else {}
    if not all(pid in host for pid in pids):
        host = pidns.processes_in(namespace)
    for rank, pid in enumerate(pids):
        if isinstance(pid, int) and pid in host:  # a rank that already exited has nothing to limit
            job.place(host[pid], rank)


def arm(job: cgroups.JobCgroups, group: GroupRun) -> None:
    """No student code has run: each rank's usage now is its baseline, and its limit counts from there."""
    for rank, baseline in job.arm().items():
        if rank < len(group.ranks):
            memory = {"baseline_bytes": baseline, "peak_bytes": baseline}
            limit = job.limit(rank)
            group.ranks[rank].memory = memory if limit is None else {**memory, "limit_bytes": limit}


def measure(job: cgroups.JobCgroups, group: GroupRun, end: dict[str, Any]) -> None:
    """What the kernel saw of each rank of the group that just ended: its high-water, OOM kills, refused forks."""
    sigkilled = {int(i["rank"]): i.get("signal") == 9 for i in end.get("ranks", []) if isinstance(i, dict)}
    for rank, run in enumerate(group.ranks):
        run.oom_killed = job.oom_killed(rank, sigkilled=sigkilled.get(rank, False))
        run.pids_limited = job.pids_denied(rank)
        peak = job.peak(rank)
        if run.memory is not None and peak is not None:
            run.memory["peak_bytes"] = peak


def record(groups: list[GroupRun], meta: dict[str, Any], payload: bytes) -> None:
    """File one message from the zygote under its group and rank."""
    kind = meta.get("kind")
    group = groups[int(meta["group"])]
    if kind == "group_end":
        group.status = str(meta.get("status"))
        for info in meta.get("ranks", []):
            group.ranks[int(info["rank"])].info = info
        return
    if kind == "wire":
        group.wire[int(meta["call"])] = meta
        return
    if kind == "fault_report":  # what the zygote saw and did for the group's fault plan
        group.fault_report = {k: v for k, v in meta.items() if k not in ("kind", "group")}
        return
    if kind == "files":
        group.files_truncated = bool(meta.get("truncated"))
        for entry in meta.get("entries", []):
            path, size = str(entry["path"]), int(entry["size"])
            group.file_sizes[path] = size
            if entry.get("length") is not None:
                start = int(entry["offset"])
                group.files[path] = payload[start : start + int(entry["length"])]
        return
    run = group.ranks[int(meta["rank"])]
    if isinstance(meta.get("guard"), dict):
        run.guard = meta["guard"]
    call = meta.get("call")
    if kind == "result" and isinstance(call, int) and 0 <= call < len(group.cases):
        if call in run.results:
            run.duplicate = True
        else:  # read now, while the ranks go on: the judge then only compares
            run.loaded[call] = load(payload)
        run.results.setdefault(call, payload)
    elif kind == "error":
        run.errors.append(meta)
    elif kind == "fault":
        run.fault = str(meta.get("traceback", ""))


def seen(group: GroupRun) -> bool:
    """Whether the kernel saw anything of a group's ranks: a fork refused at the limit, an OOM kill."""
    return any(run.pids_limited or run.oom_killed for run in group.ranks)


def rank_data(run: RankRun) -> dict[str, Any]:
    """How a rank ended, for the verdict's data: the zygote's report and what the kernel measured."""
    data = {k: v for k, v in run.info.items() if k != "output"}
    if run.memory:
        data["memory"] = dict(run.memory)
    return data | {flag: True for flag in ("oom_killed", "pids_limited") if getattr(run, flag)}


def plan(checks: ModuleType, sizes: list[int], seed: int) -> list[GroupRun]:
    """The groups of ranks to run, in order, with their cases, from a seed drawn per submission.

    A lab's ``checks.py`` either gives ``cases(world_size, generator)`` (one group per world
    size) or ``phases(world_sizes, generator) -> [judge.Phase]`` (groups that follow each other
    and share one scratch directory: save on 4 ranks, load on 2). References are computed here,
    with one thread, as the ranks compute with one thread each; those a lab made ``later`` are computed
    in a thread while the ranks run. The grading process stays at one intra-op thread from then on
    (``torch.set_num_threads`` is process-wide): more threads would round float16 and bfloat16 products
    otherwise than the ranks do (docs/authoring-labs.md, "References").
    """
    import torch

    torch.set_num_threads(1)
    gen = torch.Generator().manual_seed(seed)
    if hasattr(checks, "phases"):
        return [
            GroupRun(
                p.world_size,
                p.cases,
                [RankRun() for _ in range(p.world_size)],
                phase=p.name,
                expect_crash=p.expect_crash,
                fault=p.fault,
                shares_dir=p.shares_dir,
            )
            for p in checks.phases(sizes, gen)
        ]
    return [GroupRun(n, checks.cases(n, gen), [RankRun() for _ in range(n)]) for n in sizes]


def late_faults(groups: list[GroupRun]) -> list[str]:
    """The groups whose planned crash landed late (``labs.rank.faults``): that run did not test the crash."""
    return [
        f"{g.phase} on {g.world_size} ranks"
        for g in groups
        if g.fault_report and (g.fault_report.get("fault") or {}).get("late")
    ]


def wire_pictures(groups: list[GroupRun]) -> dict[str, list[list[int]]]:
    """Who sent how many bytes to whom, per group of ranks that had measured calls (kernel counts)."""
    return {g.name: wire_matrix(g) for g in groups if g.wire}
