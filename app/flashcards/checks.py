"""The flashcards of a failed lab check.

A check of ``lab.yaml`` may name the cards that teach it (``checks[].cards``). When a graded
submission fails such a check, its cards are *flagged* at the moment the verdict came in, and
studied in the same focused session as the cards of missed quiz questions (``missed``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from app.errors import InvalidInput, NotFound
from app.labs import catalog
from app.labs.models import Submission, SubmissionStatus


@dataclass(frozen=True)
class FailedCheck:
    """One check a submission failed, and the cards its lab names for it."""

    submission_id: int
    lab_id: str
    lab_title: str
    check_id: str
    check_title: str
    card_ids: tuple[str, ...]
    failed_at: datetime


def check_failed(verdict: dict[str, Any] | None, check_id: str) -> bool:
    """Whether the verdict ran the check and it did not pass (pure)."""
    for check in (verdict or {}).get("checks", []):
        if check.get("id") == check_id:
            return not check.get("passed", False)
    return False


def failed_check(submission_id: int, check_id: str, user_id: int, *, session: Session) -> FailedCheck:
    """The student's own graded submission's failed check; NotFound or InvalidInput with the reason otherwise."""
    submission = session.get(Submission, submission_id)
    if submission is None or submission.user_id != user_id:
        raise NotFound(f"No submission {submission_id} of yours.")
    lab = catalog.submitted_lab(session, submission.lab_id, submission.lab_version)
    spec = next((c for c in lab.spec.checks if c.id == check_id), None)
    if spec is None:
        raise NotFound(f"Lab '{lab.id}' has no check '{check_id}'.")
    if submission.status != SubmissionStatus.graded or submission.finished_at is None:
        raise InvalidInput(f"Submission {submission_id} has no graded verdict yet: its checks have not run.")
    if not check_failed(submission.verdict, check_id):
        raise InvalidInput(f"Submission {submission_id} passed the check '{spec.title}': nothing to study for it.")
    return FailedCheck(
        submission.id, lab.id, lab.spec.title, spec.id, spec.title, tuple(spec.cards), submission.finished_at
    )


def check_flags(failed: FailedCheck) -> list[tuple[str, datetime]]:
    """The check's cards, flagged when its verdict came in (pure)."""
    return [(card_id, failed.failed_at) for card_id in failed.card_ids]
