"""A quiz's attempt policy and due date, as pure functions over plain values.

Authored per quiz (``max_attempts``, ``show_answers``, ``due``; docs/reference/content.md).
A late attempt is marked, never refused.
"""

from __future__ import annotations

from datetime import datetime

AT_ONCE, AFTER_DUE, NEVER = "at_once", "after_due", "never"
SHOW_ANSWERS_LABELS = {
    AT_ONCE: "as soon as the attempt is submitted",
    AFTER_DUE: "after the due date",
    NEVER: "never",
}


def key_visible(show_answers: str, due_at: datetime | None, now: datetime) -> bool:
    """May a student see the answer key and explanations of a submitted attempt now?"""
    if show_answers == NEVER:
        return False
    if show_answers == AFTER_DUE:
        return due_at is not None and now >= due_at
    return True


def is_late(submitted_at: datetime | None, due_at: datetime | None) -> bool:
    """Submitted after the due date (nothing is late without one)."""
    return submitted_at is not None and due_at is not None and submitted_at > due_at


def attempts_left(max_attempts: int | None, used: int) -> int | None:
    """Attempts the student may still start; None when unlimited."""
    return None if max_attempts is None else max(0, max_attempts - used)
