"""What grading returns: plain dataclasses that round-trip through JSON. Torch-free."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

Status = Literal[
    "passed",  # every check passed
    "failed",  # ran to the end; some check failed (wrong answer, forbidden collective, too many bytes)
    "compile_error",  # the code does not parse
    "not_allowed",  # the pre-check refused code that reaches into the grader (labs.spec.precheck); nothing ran
    "runtime_error",  # the student's code raised
    "crashed",  # a rank died without reporting (exit, signal, closed its channel)
    "time_limit",  # ran past the wall-clock or CPU limit while busy
    "deadlock",  # every unfinished rank was waiting
    "memory_limit",  # an allocation failed at the memory limit
    "refused",  # the sandbox could not be set up; nothing ran
    "internal_error",  # the grader itself failed; not the student's fault
]
# Worst first: the verdict's status is the first of these that applies.
SEVERITY: tuple[Status, ...] = (
    "refused",
    "internal_error",
    "compile_error",
    "not_allowed",
    "memory_limit",
    "time_limit",
    "deadlock",
    "crashed",
    "runtime_error",
    "failed",
    "passed",
)


def points_share(available: int, fraction: float) -> float:
    """``fraction`` of ``available`` points, to one decimal, rounded down (a share never rounds up to full marks)."""
    share = available * max(0.0, min(1.0, fraction))
    return math.floor(share * 10 + 1e-6) / 10


def total_points(scores: Iterable[float]) -> float:
    """The sum of checks' points, to one decimal (0.1 + 0.2 is 0.3, not 0.30000000000000004)."""
    return round(sum(scores), 1)


def points_number(value: float | None) -> int | float | None:
    """Points as a JSON number: 10 rather than 10.0 when whole, else to one decimal (7.5)."""
    if value is None:
        return None
    shown = round(float(value), 1)
    return int(shown) if shown.is_integer() else shown


def show_points(value: float | None) -> str:
    """Points as people read them: "7.5", "10" (no trailing ".0"), "-" for none."""
    if value is None:
        return "-"
    return f"{round(float(value), 1):g}"


@dataclass
class CheckResult:
    id: str
    title: str
    points: int
    passed: bool
    score: float  # the points it earned: its share of ``points``, to one decimal
    message: str
    data: dict[str, Any] = field(default_factory=dict)


@dataclass
class Verdict:
    lab: str
    status: Status
    score: float  # the checks' points together, to one decimal
    max_score: int
    message: str
    checks: list[CheckResult] = field(default_factory=list)
    output: dict[str, str] = field(default_factory=dict)  # "ws4/rank2" -> trimmed stdout+stderr
    elapsed_s: float = 0.0
    data: dict[str, Any] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return self.status == "passed"

    def check(self, check_id: str) -> CheckResult:
        return next(c for c in self.checks if c.id == check_id)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict())

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Verdict:
        checks = [CheckResult(**c) for c in data.get("checks", [])]
        return cls(**{**data, "checks": checks})

    @classmethod
    def from_json(cls, text: str) -> Verdict:
        return cls.from_dict(json.loads(text))


def worst(statuses: list[Status]) -> Status:
    return min(statuses, key=SEVERITY.index) if statuses else "passed"
