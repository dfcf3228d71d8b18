"""Progressive hints per lab check: which ones a student has earned, revealed, and who used which.

A check's hints (``checks[].hints`` in ``lab.yaml``) are earned by losing points on it: once a
student's graded submissions have lost points on that check ``hint_after`` times, the first hint
can be revealed; each further submission that loses points there earns the next. An earned hint
stays hidden until the student asks for it, and that is recorded (``HintView``). The rule is
pure (``available``); the rest reads and writes the rows.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.errors import Forbidden, NotFound
from app.labs.catalog import PublishedLab as Lab
from app.labs.models import HintView, Submission, SubmissionStatus

# A verdict on the student's code: a graded run, or a run their code broke. Our own errors never count.
COUNTED = (SubmissionStatus.graded, SubmissionStatus.failed)


def available(failures: int, hint_after: int, total: int) -> int:
    """How many of a check's ``total`` hints are earned after ``failures`` submissions lost points on it."""
    if total <= 0 or failures < hint_after:
        return 0
    return min(total, failures - hint_after + 1)


def still_needed(failures: int, hint_after: int, total: int) -> int:
    """How many more submissions must lose points on the check before its next hint is earned; 0 when none is left."""
    earned = available(failures, hint_after, total)
    if earned >= total:
        return 0
    return hint_after + earned - failures


def lost_points(check: Mapping[str, Any]) -> bool:
    """A verdict's check that scored less than it was worth (a feedback check, worth 0, never loses)."""
    return float(check.get("score", 0)) < float(check.get("points", 0))  # partial credit: 1.5 of 2 lost points


def failures(verdicts: Iterable[Mapping[str, Any] | None]) -> Counter[str]:
    """For each check id, how many of these verdicts lost points on it."""
    counts: Counter[str] = Counter()
    for verdict in verdicts:
        for check in (verdict or {}).get("checks", []):
            if lost_points(check):
                counts[check["id"]] += 1
    return counts


@dataclass(frozen=True)
class CheckHints:
    """One check's hints as one student stands with them. ``texts`` holds only the revealed ones."""

    lab_id: str
    check_id: str
    total: int
    earned: int
    failures: int
    needed: int  # further submissions losing points here before the next hint is earned
    texts: Mapping[int, str]  # hint index -> markdown, revealed hints only

    @property
    def next_index(self) -> int | None:
        """The first earned hint not revealed yet, which the student may reveal now."""
        return next((i for i in range(self.earned) if i not in self.texts), None)


def _failures(lab_id: str, user_id: int, *, session: Session) -> Counter[str]:
    mine = (Submission.user_id == user_id) & (Submission.lab_id == lab_id) & Submission.status.in_(COUNTED)
    return failures(session.scalars(select(Submission.verdict).where(mine)))


def _revealed(lab_id: str, user_id: int, *, session: Session) -> set[tuple[str, int]]:
    query = select(HintView.check_id, HintView.hint_index).where(HintView.user_id == user_id, HintView.lab_id == lab_id)
    return {(check_id, index) for check_id, index in session.execute(query)}


def states(lab: Lab, user_id: int, *, session: Session) -> dict[str, CheckHints]:
    """Each check of ``lab`` that has hints, by id, as ``user_id`` stands with it."""
    with_hints = [c for c in lab.spec.checks if c.hints]
    if not with_hints:
        return {}
    counts = _failures(lab.id, user_id, session=session)
    shown = _revealed(lab.id, user_id, session=session)
    found = {}
    for check in with_hints:
        total, lost = len(check.hints), counts[check.id]
        earned = available(lost, lab.spec.hint_after, total)
        texts = {i: check.hints[i] for i in range(earned) if (check.id, i) in shown}
        needed = still_needed(lost, lab.spec.hint_after, total)
        found[check.id] = CheckHints(lab.id, check.id, total, earned, lost, needed, texts)
    return found


def reveal(lab: Lab, user_id: int, check_id: str, index: int, *, session: Session, now: datetime) -> CheckHints:
    """Reveal hint ``index`` (0 for the first) of a check, recording when; Forbidden until it is earned."""
    check = next((c for c in lab.spec.checks if c.id == check_id), None)
    if check is None or not check.hints:
        raise NotFound(f"Lab '{lab.id}' has no hints for a check '{check_id}'.")
    if not 0 <= index < len(check.hints):
        raise NotFound(f"The check '{check.title}' has {len(check.hints)} hint(s); there is no hint {index + 1}.")
    state = states(lab, user_id, session=session)[check_id]
    if index >= state.earned:
        more = state.needed + index - state.earned
        raise Forbidden(
            f"Hint {index + 1} of {state.total} for '{check.title}' is not available yet: it unlocks after "
            f"{more} more graded submission{'s' if more != 1 else ''} that lose{'s' if more == 1 else ''} "
            "points on this check."
        )
    if index not in state.texts:
        try:
            with session.begin_nested():  # two quick clicks: the second finds the row and records nothing
                session.add(HintView(user_id=user_id, lab_id=lab.id, check_id=check_id, hint_index=index, shown_at=now))
        except IntegrityError:
            pass
    return states(lab, user_id, session=session)[check_id]


@dataclass(frozen=True)
class HintUse:
    """A revealed hint, for instructors."""

    lab_id: str
    lab_title: str
    check_id: str
    check_title: str
    number: int  # 1 for the first hint
    total: int
    shown_at: datetime


def usage(user_id: int, labs: Mapping[str, Lab], *, session: Session) -> list[HintUse]:
    """Every hint the student revealed, newest first, with titles from ``labs`` (the live ones) where known."""
    rows = session.scalars(
        select(HintView).where(HintView.user_id == user_id).order_by(HintView.shown_at.desc(), HintView.id.desc())
    )
    used = []
    for row in rows:
        lab = labs.get(row.lab_id)
        check = next((c for c in lab.spec.checks if c.id == row.check_id), None) if lab else None
        used.append(
            HintUse(
                lab_id=row.lab_id,
                lab_title=lab.spec.title if lab else row.lab_id,
                check_id=row.check_id,
                check_title=check.title if check else row.check_id,
                number=row.hint_index + 1,
                total=len(check.hints) if check else 0,
                shown_at=row.shown_at,
            )
        )
    return used
