"""Time accommodations: extra time on timed quizzes for a student whose accommodation letter asks for it.

One per student, granted by an instructor (the student's page, the instructor API) or from the
terminal (``ringlab users accommodate``). It applies to every timed quiz on the server (there are
no courses to scope it to) and is fixed into an attempt's deadline when the attempt starts, so
a change applies to attempts started afterwards, never to one already running.
"""

from __future__ import annotations

import math
from datetime import datetime

from sqlalchemy import delete
from sqlalchemy.orm import Session

from app.accounts.models import User
from app.db import insert_for
from app.errors import InvalidInput, NotFound
from app.quizzes.models import QuizAccommodation

# Bounds that catch a slip of the finger (15 for 1.5, 300 for 30), not policy: letters ask for
# 1.25x to 2x, or a fixed number of minutes more.
MAX_MULTIPLIER = 4.0
MAX_EXTRA_MINUTES = 600
MAX_NOTE = 200


def limit_minutes(limit: int | None, multiplier: float = 1.0, extra_minutes: int = 0) -> int | None:
    """A student's time limit in whole minutes: ``limit`` x ``multiplier`` (rounded up, in the
    student's favour) + ``extra_minutes``; None for an untimed quiz, which stays untimed (pure)."""
    if not limit:
        return None
    # Rounded first so a float's noise (10 x 1.1 = 11.000000000000002) is not a minute more.
    return math.ceil(round(limit * multiplier, 6)) + extra_minutes


def check(multiplier: float, extra_minutes: int, note: str = "") -> None:
    """Raise InvalidInput, naming the field, unless the values make a valid accommodation."""
    if not math.isfinite(multiplier) or not 1 <= multiplier <= MAX_MULTIPLIER:
        raise InvalidInput(
            f"The time multiplier must be between 1 and {MAX_MULTIPLIER:g} (1.5 is time and a half); "
            f"got {multiplier:g}.",
            field="time_multiplier",
        )
    if not 0 <= extra_minutes <= MAX_EXTRA_MINUTES:
        raise InvalidInput(
            f"Extra minutes must be between 0 and {MAX_EXTRA_MINUTES}; got {extra_minutes}.", field="extra_minutes"
        )
    if multiplier == 1 and extra_minutes == 0:
        raise InvalidInput(
            "A multiplier of 1 and no extra minutes gives no extra time: set one of them, or remove the accommodation.",
            field="time_multiplier",
        )
    if len(note) > MAX_NOTE:
        raise InvalidInput(f"The note is {len(note)} characters long; keep it to {MAX_NOTE}.", field="note")


def get(user_id: int, *, session: Session) -> QuizAccommodation | None:
    """The student's accommodation, or None."""
    return session.get(QuizAccommodation, user_id)


def student_limit(limit: int | None, user_id: int, *, session: Session) -> int | None:
    """The time limit, in minutes, that ``user_id`` gets on a quiz whose limit is ``limit``."""
    found = get(user_id, session=session) if limit else None
    if found is None:
        return limit
    return limit_minutes(limit, found.time_multiplier, found.extra_minutes)


def grant(
    user_id: int,
    *,
    multiplier: float,
    extra_minutes: int,
    note: str = "",
    granted_by: int | None,
    session: Session,
    now: datetime,
) -> QuizAccommodation:
    """Give the student this accommodation, replacing any earlier one.

    Raises NotFound (no such user) or InvalidInput (see ``check``).
    """
    note = note.strip()
    check(multiplier, extra_minutes, note)
    if session.get(User, user_id) is None:
        raise NotFound(f"There is no student {user_id}.")
    values = {
        "time_multiplier": round(multiplier, 2),
        "extra_minutes": extra_minutes,
        "note": note,
        "granted_by": granted_by,
        "granted_at": now,
    }
    # An upsert: two instructors saving at once leave one row, the later one's.
    stmt = insert_for(session)(QuizAccommodation).values(user_id=user_id, **values)
    session.execute(stmt.on_conflict_do_update(index_elements=["user_id"], set_=values))
    found = session.get(QuizAccommodation, user_id, populate_existing=True)
    assert found is not None
    return found


def remove(user_id: int, *, session: Session) -> bool:
    """Take the student's accommodation away; False if there was none."""
    done = session.execute(delete(QuizAccommodation).where(QuizAccommodation.user_id == user_id))
    return bool(getattr(done, "rowcount", 0))


def describe(accommodation: QuizAccommodation) -> str:
    """In words, as pages and the terminal show it: "1.5x the time limit + 10 minutes"."""
    parts = []
    if accommodation.time_multiplier != 1:
        parts.append(f"{accommodation.time_multiplier:g}\u00d7 the time limit")
    if accommodation.extra_minutes:
        minutes = accommodation.extra_minutes
        parts.append(f"{minutes} extra minute{'s' if minutes != 1 else ''}")
    return " + ".join(parts) or "no extra time"
