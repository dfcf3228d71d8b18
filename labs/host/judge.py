"""Trusted comparison, outside the sandbox: turn what the ranks sent into check results.

The ranks' results arrive as ``torch.save`` bytes and are loaded with
``weights_only=True`` (plain tensors, numbers, strings and containers only), then
compared with the expected trees that the lab's ``checks.py`` computed here from a
single-process reference. Nothing a rank prints, returns as an exit code or writes
to a file counts. Byte counts come from the zygote's kernel counters.
"""

from __future__ import annotations

import io
import re
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from labs.rank import trees
from labs.rank.trees import Tolerance


@dataclass
class Case:
    """One call on every rank of one world size.

    Without ``driver``: the student's function ``fn`` is called with ``inputs[r]`` as its only
    argument; ``expected[r]`` is what rank r must end with (the argument after an in-place call,
    else the return value). With ``driver``: the lab's public ``driver.<driver>(submission,
    inputs[r])`` runs the loop and returns a tree; ``expected[r]`` is the reference tree.
    ``expected`` (or an entry of it) may be ``later(reference, ...)``: computed while the ranks run, in
    place before any rule reads it. ``parts`` maps check ids to the top-level keys of the result they
    judge (default: the whole result, for ``check``); ``tolerance`` maps path prefixes to (rtol, atol).
    ``missing``: the placeholder the lab's driver puts in the result where the state it reads holds no value (an
    optimizer without a moment for a parameter); such a leaf is reported as missing, and in which
    phase, never as a value the student computed.
    """

    check: str
    fn: str
    label: str
    inputs: list[Any]
    expected: list[Any]
    inplace: bool = False
    measure: bool = False
    driver: str | None = None
    parts: dict[str, list[str]] | None = None
    tolerance: dict[str, Tolerance] | None = None
    missing: str | None = None

    def judges(self, check: str) -> bool:
        return check in (self.parts or {}) or (self.check == check and not (self.parts and check in self.parts))

    def keys(self, check: str | None) -> list[str] | None:
        return (self.parts or {}).get(check) if check else None


@dataclass
class Phase:
    """A group of ranks that a lab runs after the previous one, sharing its scratch directory.

    ``expect_crash``: a rank is killed on purpose (a crash to recover from in a later phase). A rank
    dying is then no verdict: the other ranks are killed after a short grace, and the next phase
    runs. Its cases' results are there only from ranks whose call returned.
    ``fault``: a plan the zygote carries out from outside the ranks (``labs.rank.faults``: watch a folder
    of the shared directory, kill a rank when a checkpoint appears there, cut the file it was
    writing). It reaches the zygote only after the group's ranks were forked, never a rank; what
    the zygote saw and did comes back as ``GroupRun.fault_report``.
    """

    name: str | None
    world_size: int
    cases: list[Case]
    expect_crash: bool = False
    fault: dict[str, Any] | None = None
    shares_dir: bool = False  # its ranks see the scratch directory that the phases sharing one pass on


@dataclass
class RankRun:
    results: dict[int, bytes] = field(default_factory=dict)
    errors: list[dict[str, Any]] = field(default_factory=list)
    guard: dict[str, Any] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)
    duplicate: bool = False
    fault: str | None = None  # the harness failed before any student code ran
    loaded: dict[int, Any] = field(default_factory=dict)
    # The rank's memory high-water, read by the worker from the rank's cgroup (None: not measured):
    # {"baseline_bytes": usage before any student code ran, "peak_bytes": the most it held since,
    #  "limit_bytes": its cgroup's limit, the baseline plus the lab's memory_limit_mb}.
    memory: dict[str, int] | None = None
    oom_killed: bool = False  # the kernel's OOM killer ended it at its cgroup's memory limit
    pids_limited: bool = False  # a fork was refused at its cgroup's process limit


@dataclass
class GroupRun:
    world_size: int
    cases: list[Case]
    ranks: list[RankRun]
    wire: dict[int, dict[str, Any]] = field(default_factory=dict)
    status: str | None = None  # None: the group never ran
    verdicts: dict[tuple[int, int, str | None], str | None] = field(default_factory=dict)
    phase: str | None = None  # a name when the lab runs phases (e.g. "save", "load")
    expect_crash: bool = False  # a rank is killed on purpose (Phase.expect_crash)
    # Files the group left in the phases' shared scratch directory, read by the zygote after the group
    # (trusted: the ranks had exited). Contents up to a cap; sizes for every file.
    files: dict[str, bytes] = field(default_factory=dict)
    file_sizes: dict[str, int] = field(default_factory=dict)
    files_truncated: bool = False
    shares_dir: bool = False  # Phase.shares_dir: its ranks see the phases' shared scratch directory
    fault: dict[str, Any] | None = None  # Phase.fault: the plan the zygote carried out (never sent to a rank)
    # What the zygote observed and did for that plan (labs.rank.faults.Injector.close); empty without a plan.
    fault_report: dict[str, Any] = field(default_factory=dict)
    packed: dict[tuple[int, int], bytes] = field(default_factory=dict)  # (rank, call) -> its inputs, serialized

    @property
    def name(self) -> str:
        return f"{self.phase} (world size {self.world_size})" if self.phase else f"world size {self.world_size}"


@dataclass
class Facts:
    """Everything the judge knows about one submission's run."""

    groups: list[GroupRun]


# References a lab computes while its ranks run (``later``): one thread, as each rank computes with one.
_REFERENCES = ThreadPoolExecutor(max_workers=1, thread_name_prefix="labs-reference")


def later(reference: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
    """``reference(*args, **kwargs)``, computed in the grading process while the ranks run: for
    ``Case.expected`` (the whole list) or an entry of it. The grader waits for it (``settle``) only once
    every group has ended. Arguments are values already drawn, never the plan's generator, so the order
    of draws is the same either way; a reference may wait for (``.result()``) one made before it."""
    return _REFERENCES.submit(reference, *args, **kwargs)


def settle(cases: list[Case]) -> None:
    """Put every ``later`` reference of ``cases`` in place (waiting for those still being computed)."""
    for case in cases:
        expected: Any = case.expected
        if isinstance(expected, Future):
            case.expected = expected = list(expected.result())
        if any(isinstance(want, Future) for want in expected):
            case.expected = [want.result() if isinstance(want, Future) else want for want in expected]


@dataclass
class Outcome:
    passed: bool
    message: str
    data: dict[str, Any] = field(default_factory=dict)
    fraction: float | None = None  # partial credit, 0..1; None: all or nothing


Rule = Callable[[Facts], Outcome]


def load(payload: bytes) -> Any:
    """A rank's result, read as plain data only; ``trees.Mismatch`` if it cannot be."""
    import torch

    try:
        return torch.load(io.BytesIO(payload), weights_only=True)
    except Exception as exc:
        return trees.Mismatch("", f"the result could not be read ({type(exc).__name__})")


def result(group: GroupRun, index: int, rank: int) -> Any:
    """Rank ``rank``'s result of case ``index``, loaded, or None if it sent none (or an unreadable one)."""
    run = group.ranks[rank]
    if index not in run.results:
        return None
    if index not in run.loaded:
        run.loaded[index] = load(run.results[index])
    got = run.loaded[index]
    return None if isinstance(got, trees.Mismatch) else got


def case_failure(group: GroupRun, index: int, rank: int, part: str | None = None) -> str | None:
    """Why rank ``rank`` failed case ``index`` of ``group`` (only the keys ``part`` judges), or None."""
    key = (index, rank, part)
    if key not in group.verdicts:
        group.verdicts[key] = _case_failure(group, index, rank, part)
    return group.verdicts[key]


def _case_failure(group: GroupRun, index: int, rank: int, part: str | None) -> str | None:
    case = group.cases[index]
    run = group.ranks[rank]
    if group.status is None:
        return "not run: an earlier world size ended the run"
    errors = [e for e in run.errors if e.get("call") == index or e.get("phase") == "import"]
    if errors:
        e = errors[0]
        where = f" (line {e['line']})" if e.get("line") else ""
        return f"{e.get('error')}: {e.get('message')}{where}"
    if run.duplicate:
        return "the rank sent a result twice"
    if index not in run.results:
        state = run.info.get("state", "no report")
        return f"no result: the run ended with this rank {state}"
    if index not in run.loaded:
        run.loaded[index] = load(run.results[index])
    got = run.loaded[index]
    if isinstance(got, trees.Mismatch):
        return str(got)
    keys = case.keys(part)
    absent = trees.Absent(case.missing, f" after the {group.phase} phase" if group.phase else "")
    found = trees.compare(
        trees.select(case.expected[rank], keys), trees.select(got, keys), case.tolerance, absent=absent
    )
    return str(found) if found else None


def correctness(facts: Facts, check: str) -> Outcome:
    """Every case that judges ``check`` is right on every rank of every world size.

    Partial credit: the fraction of (case, rank) results that are right.
    """
    total = passed = 0
    failures: list[dict[str, Any]] = []
    for group in facts.groups:
        for i, case in enumerate(group.cases):
            if not case.judges(check):
                continue
            part = check if check in (case.parts or {}) else None
            for rank in range(group.world_size):
                total += 1
                why = case_failure(group, i, rank, part)
                if why is None:
                    passed += 1
                else:
                    failures.append(
                        {"group": group.name, "world_size": group.world_size, "rank": rank, "case": case.label}
                        | {"reason": why}
                    )
    data: dict[str, Any] = {"rank_cases": total, "passed": passed}
    if not total:
        return Outcome(False, "no cases were run for this check", data, 0.0)
    if not failures:
        return Outcome(True, f"all {counted(total, facts.groups)} correct", data)
    data["first_failure"] = failures[0]
    return Outcome(False, summarise_failures(failures, total), data, passed / total)


def counted(total: int, groups: list[GroupRun], unit: str | None = None) -> str:
    """``total`` results named for what they are: "8 rank results", "4 case results" when one rank runs each case.

    ``unit`` is the lab's own word for its results ("results at 4 segment counts" reads better than
    "4 rank results" in a single-rank lab whose cases are segment counts): "{total} {unit}".
    """
    if unit:
        return f"{total} {unit}"
    many = any(g.world_size > 1 for g in groups)
    return f"{total} rank results" if many else f"{total} case results"


def _shape(text: str) -> str:
    """A failure's reason with its numbers blanked, so the same mistake at other sizes reads as one."""
    return re.sub(r"-?\d+(\.\d+)?(e[-+]?\d+)?", "#", text)


def summarise_failures(failures: list[dict[str, Any]], total: int) -> str:
    """The first failure in full; the same mistake elsewhere said once, as where else it happened."""
    first = failures[0]
    message = f"{first['group']}, rank {first['rank']}, {first['case']}: {first['reason']}"
    same = [f for f in failures[1:] if _shape(f["reason"]) == _shape(first["reason"])]
    groups = sorted({f["group"] for f in same} - {first["group"]})
    if groups:
        message += f" (the same at {', '.join(groups)})"
    others = len(failures) - 1 - len(same)
    if others:
        message += f"; {others} other result{'s' if others > 1 else ''} wrong"
    return f"{message} [{total - len(failures)} of {total} right]"


def sent_p2p(facts: Facts) -> bool:
    """Some rank said it handed bytes to send/isend: counted inside the ranks, so feedback only."""
    return any(sum((run.guard.get("sent") or {}).values()) > 0 for g in facts.groups for run in g.ranks)


def no_builtin_collectives(facts: Facts) -> Outcome:
    """No rank reported a built-in collective call, and the ranks said they communicated point to point.

    Feedback, never points (a lab gives the check ``points: 0``): the counts come from wrappers
    inside the ranks, which the student's code can undo or rewrite, so passing proves nothing and
    failing is only what the ranks said. What earns points about the communication is judged from
    the kernel's byte counts instead (e.g. ring-allreduce's ring-neighbours check). This check holds
    on its own: wrong results are the correctness checks' business, not this one's.
    """
    calls: dict[str, int] = {}
    for group in facts.groups:
        for rank, run in enumerate(group.ranks):
            for name, n in (run.guard.get("collectives") or {}).items():
                key = f"{group.name}, rank {rank}: {name}"
                calls[key] = calls.get(key, 0) + int(n)
    if calls:
        first, n = next(iter(calls.items()))
        name = first.rpartition(": ")[2]
        return Outcome(
            False,
            f"built-in collective torch.distributed.{name} was called ({first}, {n}x): "
            "build the operation from send/recv/isend/irecv (feedback: this check earns no points)",
            {"calls": calls},
        )
    if not sent_p2p(facts):
        return Outcome(False, "no rank sent anything with send/isend: the ranks must exchange data", {"calls": {}})
    return Outcome(True, "only point-to-point primitives were used", {"calls": {}})


def memory_peak(g: GroupRun, rank: int) -> int | None:
    """Bytes: rank ``rank``'s memory high-water above what it held before any student code ran.

    Measured by the kernel, outside the rank: its control group's peak since the rank had joined
    its group minus its usage at that moment. Everything the rank's processes hold counts (heap,
    shared memory, page cache, kernel memory), so junk allocated by student code only raises it;
    a rule may rely on it as an upper bound's proof ("held no more than ..."). None when not
    measured (a grader without control groups, or a rank that never got that far).
    """
    memory = g.ranks[rank].memory if 0 <= rank < len(g.ranks) else None
    if not memory or "peak_bytes" not in memory or "baseline_bytes" not in memory:
        return None
    return max(0, int(memory["peak_bytes"]) - int(memory["baseline_bytes"]))


def wire_matrix(group: GroupRun) -> list[list[int]]:
    """Bytes rank r sent to rank p over every measured call of ``group`` (kernel counts)."""
    n = group.world_size
    matrix = [[0] * n for _ in range(n)]
    for wire in group.wire.values():
        for src, peers in (wire.get("sent") or {}).items():
            for dst, nbytes in peers.items():
                s, d = int(src), int(dst)
                if 0 <= s < n and 0 <= d < n:
                    matrix[s][d] += int(nbytes)
    return matrix
