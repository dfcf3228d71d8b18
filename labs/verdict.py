"""What grading returns: plain dataclasses that round-trip through JSON. Torch-free."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

Status = Literal[
    "passed",  # every check passed
    "failed",  # ran to the end; some check failed (wrong answer, forbidden collective, too many bytes)
    "compile_error",  # the code does not parse
    "not_allowed",  # the pre-check refused code that reaches into the grader (labs.precheck); nothing ran
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


@dataclass
class CheckResult:
    id: str
    title: str
    points: int
    passed: bool
    score: int
    message: str
    data: dict[str, Any] = field(default_factory=dict)


@dataclass
class Verdict:
    lab: str
    status: Status
    score: int
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
