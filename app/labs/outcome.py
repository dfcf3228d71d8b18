"""What a student is told about one submission, in one vocabulary (pure).

A run that could be judged shows its score ("6/10", "7.5/10", "10/10 Passed"), whatever went wrong on the way;
"Could not run: <reason>" is kept for runs where nothing could be judged. The stored statuses
(``SubmissionStatus``, the verdict's ``labs.verdict.Status``) do not change: this only names them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from labs.verdict import show_points

Kind = Literal["waiting", "scored", "not_run"]

# Nothing of the student's code ran, or it stopped before anything could be judged.
NOTHING_RAN = {"compile_error", "not_allowed", "refused", "internal_error"}
# The code ran and stopped early: judged when some check still earned points, else "could not run".
STOPPED = {"runtime_error", "crashed", "time_limit", "deadlock", "memory_limit"}

REASONS: dict[str, str] = {
    "compile_error": "the code does not parse",
    "not_allowed": "the code reaches into the grader, so it was not run",
    "runtime_error": "your code raised an error before any check could be judged",
    "crashed": "a rank crashed before any check could be judged",
    "time_limit": "the time limit passed before any result came back",
    "deadlock": "the ranks deadlocked before any result came back",
    "memory_limit": "the memory limit was reached before any result came back",
    "refused": "the grading sandbox could not be set up (not your fault)",
    "internal_error": "the grader failed (not your fault)",
}


@dataclass(frozen=True)
class Outcome:
    """A submission's label: ``text`` is what the pages, the announcer and the API say."""

    kind: Kind
    text: str
    reason: str = ""  # why it could not run; "" otherwise
    passed: bool = False  # full marks

    @property
    def scored(self) -> bool:
        return self.kind == "scored"


def of(status: str, verdict_status: str | None, score: float | None, max_score: int | None) -> Outcome:
    """The label of a submission whose row status is ``status`` (queued, running, graded, failed, error)
    and whose verdict (if any) says ``verdict_status``, with the score it was given."""
    if status == "queued":
        return Outcome("waiting", "Queued")
    if status == "running":
        return Outcome("waiting", "Running")
    if status == "error":
        return not_run("internal_error")
    judged = score is not None and max_score is not None
    if verdict_status in NOTHING_RAN or not judged:
        return not_run(verdict_status or "internal_error")
    assert score is not None and max_score is not None
    if verdict_status in STOPPED and score <= 0:
        return not_run(verdict_status)
    full = max_score > 0 and score >= max_score
    shown = f"{show_points(score)}/{show_points(max_score)}"
    return Outcome("scored", f"{shown} Passed" if full else shown, passed=full)


def not_run(verdict_status: str) -> Outcome:
    reason = REASONS.get(verdict_status, REASONS["internal_error"])
    return Outcome("not_run", f"Could not run: {reason}", reason=reason)


# The stored row statuses as instructors filter and count them: how a run ended, not a grade.
STATUS_NAMES: dict[str, str] = {
    "queued": "queued",
    "running": "running",
    "graded": "ran to the end",
    "failed": "stopped early (the code)",
    "error": "grader error",
}
