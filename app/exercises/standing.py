"""Where a student stands on one answer part, and when its hint is offered: pure rules, no database.

A part is *solved* by a right answer given before the student gave up on it; once they give up
("Show the answer"), nothing they answer afterwards makes it solved. Its hint, where it has one,
is offered after ``HINT_AFTER_WRONG`` wrong answers while the part is still open to answer.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

HINT_AFTER_WRONG = 2


class Standing(StrEnum):
    """One part for one student; the value is the word students and instructors read."""

    untried = "not tried"
    tried = "tried"
    solved = "solved"
    gave_up = "gave up"


def counts_as_solved(solved_at: datetime | None, given_up_at: datetime | None) -> bool:
    """Solved by an answer given before giving up (an answer re-marked right later keeps its time)."""
    return solved_at is not None and (given_up_at is None or solved_at <= given_up_at)


def standing(attempts: int, solved_at: datetime | None, given_up_at: datetime | None) -> Standing:
    """The part's standing: solved, gave up, tried (answered, never right) or not tried."""
    if counts_as_solved(solved_at, given_up_at):
        return Standing.solved
    if given_up_at is not None:
        return Standing.gave_up
    return Standing.tried if attempts > 0 else Standing.untried


def wrong_answers(attempts: int, solved: bool) -> int:
    """Recorded answers that were wrong: every one but the last when solved (answers stop there)."""
    return max(attempts - 1, 0) if solved else attempts


def hint_offered(*, has_hint: bool, wrong: int, finished: bool) -> bool:
    """Whether the part offers its hint: it has one, the student is still answering, and has been wrong twice."""
    return has_hint and not finished and wrong >= HINT_AFTER_WRONG
