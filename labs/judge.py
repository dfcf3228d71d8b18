"""Trusted comparison, outside the sandbox: turn what the ranks sent into check results.

The ranks' outputs arrive as ``torch.save`` bytes and are loaded with
``weights_only=True``, then compared with the expected outputs that the lab's
``checks.py`` computed here. Nothing a rank prints, returns as an exit code or
writes to a file counts. Byte counts come from the zygote's kernel counters.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch


@dataclass
class Case:
    """One call of a student function on every rank of one world size.

    ``inputs[r]`` is rank r's only argument; ``expected[r]`` what rank r must end
    with (the argument after an in-place call, else the return value).
    """

    check: str
    fn: str
    label: str
    inputs: list[torch.Tensor]
    expected: list[torch.Tensor]
    inplace: bool
    measure: bool = False


@dataclass
class RankRun:
    results: dict[int, bytes] = field(default_factory=dict)
    errors: list[dict[str, Any]] = field(default_factory=list)
    guard: dict[str, Any] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)
    duplicate: bool = False
    fault: str | None = None  # the harness failed before any student code ran


@dataclass
class GroupRun:
    world_size: int
    cases: list[Case]
    ranks: list[RankRun]
    wire: dict[int, dict[str, Any]] = field(default_factory=dict)
    status: str | None = None  # None: the group never ran
    verdicts: dict[tuple[int, int], str | None] = field(default_factory=dict)  # (case, rank) -> failure


@dataclass
class Facts:
    """Everything the judge knows about one submission's run."""

    groups: list[GroupRun]


@dataclass
class Outcome:
    passed: bool
    message: str
    data: dict[str, Any] = field(default_factory=dict)


Rule = Callable[[Facts], Outcome]
TOLERANCE = {"torch.float32": (1e-5, 1e-5), "torch.float64": (1e-10, 1e-10), "torch.float16": (1e-2, 1e-2)}


def _fmt(value: Any) -> Any:
    return value.item() if hasattr(value, "item") else value


def compare(expected: torch.Tensor, payload: bytes) -> str | None:
    """None if the payload holds a tensor equal to ``expected``, else what differs."""
    import torch

    try:
        got = torch.load(io.BytesIO(payload), weights_only=True)
    except Exception as exc:
        return f"the result could not be read as a tensor ({type(exc).__name__})"
    if not isinstance(got, torch.Tensor) or type(got) is not torch.Tensor:
        return f"expected a torch.Tensor, got {type(got).__name__}"
    if got.dtype != expected.dtype:
        return f"dtype is {got.dtype}, expected {expected.dtype}"
    if tuple(got.shape) != tuple(expected.shape):
        return f"shape is {tuple(got.shape)}, expected {tuple(expected.shape)}"
    if expected.is_floating_point():
        rtol, atol = TOLERANCE.get(str(expected.dtype), (1e-5, 1e-5))
        if torch.allclose(got, expected, rtol=rtol, atol=atol):
            return None
        bad = ~torch.isclose(got, expected, rtol=rtol, atol=atol)
    else:
        if torch.equal(got, expected):
            return None
        bad = got != expected
    flat = int(bad.flatten().nonzero()[0])
    index = tuple(int(i) for i in torch.unravel_index(torch.tensor(flat), expected.shape)) if expected.dim() else ()
    where = f"[{', '.join(map(str, index))}]" if index else ""
    return (
        f"element {where or 'value'} is {_fmt(got.flatten()[flat])}, expected {_fmt(expected.flatten()[flat])}"
        f" ({int(bad.sum())} of {expected.numel()} elements differ)"
    )


def case_failure(group: GroupRun, index: int, rank: int) -> str | None:
    """Why rank ``rank`` failed case ``index`` of ``group``, or None if it passed."""
    key = (index, rank)
    if key not in group.verdicts:
        group.verdicts[key] = _case_failure(group, index, rank)
    return group.verdicts[key]


def _case_failure(group: GroupRun, index: int, rank: int) -> str | None:
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
    return compare(case.expected[rank], run.results[index])


def correctness(facts: Facts, check: str) -> Outcome:
    """Every case of ``check`` on every rank of every world size is right."""
    total = passed = 0
    first: dict[str, Any] | None = None
    for group in facts.groups:
        for i, case in enumerate(group.cases):
            if case.check != check:
                continue
            for rank in range(group.world_size):
                total += 1
                why = case_failure(group, i, rank)
                if why is None:
                    passed += 1
                elif first is None:
                    first = {"world_size": group.world_size, "rank": rank, "case": case.label, "reason": why}
    data: dict[str, Any] = {"rank_cases": total, "passed": passed}
    if not total:
        return Outcome(False, "no cases were run for this check", data)
    if first is None:
        return Outcome(True, f"all {total} rank results correct", data)
    data["first_failure"] = first
    return Outcome(
        False, f"world size {first['world_size']}, rank {first['rank']}, {first['case']}: {first['reason']}", data
    )


def no_builtin_collectives(facts: Facts) -> Outcome:
    """No rank reported a built-in collective call, and every correctness case passed.

    The call counts come from inside the ranks, so they are only ever used to
    fail: a student who hides a collective still has to get every result right.
    """
    calls: dict[str, int] = {}
    for group in facts.groups:
        for rank, run in enumerate(group.ranks):
            for name, n in (run.guard.get("collectives") or {}).items():
                key = f"world size {group.world_size}, rank {rank}: {name}"
                calls[key] = calls.get(key, 0) + int(n)
    if calls:
        first, n = next(iter(calls.items()))
        name = first.rpartition(": ")[2]
        return Outcome(
            False,
            f"built-in collective torch.distributed.{name} was called ({first}, {n}x): "
            "build the operation from send/recv/isend/irecv",
            {"calls": calls},
        )
    checks = sorted({c.check for g in facts.groups for c in g.cases})
    wrong = [c for c in checks if not correctness(facts, c).passed]
    if wrong:
        return Outcome(False, f"no built-in collectives seen, but {', '.join(wrong)} did not pass", {"calls": {}})
    return Outcome(True, "only point-to-point primitives were used", {"calls": {}})
