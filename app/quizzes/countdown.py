"""When a timed attempt's countdown speaks and warns, as pure functions of the student's own limit.

The attempt page hands these to static/js/quizzes.js, which says "10 minutes left" in a polite
live region at each point and shows a written warning near the end (a colour alone tells a
screen reader, or someone who cannot tell amber from black, nothing).
"""

from __future__ import annotations

# Said when this many minutes are left, if the limit is longer: a 90-minute limit hears all five,
# a 10-minute one 5 and 1.
ANNOUNCE_MINUTES = (60, 30, 10, 5, 1)
WARN_SECONDS = 300
MIN_WARN_SECONDS = 30


def announce_at(limit_seconds: int) -> tuple[int, ...]:
    """The seconds-left marks at which the time left is announced, longest first.

    A mark equal to the limit would speak as the page opens, so only shorter ones count; a limit of
    two minutes or less also hears "30 seconds left".
    """
    marks = [m * 60 for m in ANNOUNCE_MINUTES if m * 60 < limit_seconds]
    if limit_seconds <= 120 and limit_seconds > 30:
        marks.append(30)
    return tuple(marks)


def warn_at(limit_seconds: int) -> int:
    """Seconds left when the written "time is nearly up" warning appears: 5 minutes, or the last
    tenth of a limit under 50 minutes (never less than 30 seconds)."""
    return min(WARN_SECONDS, max(MIN_WARN_SECONDS, limit_seconds // 10))


def words(seconds: int) -> str:
    """A duration as a person says it: "1 hour 5 minutes", "10 minutes", "45 seconds"."""
    seconds = max(0, seconds)
    if seconds < 60:
        return _plural(seconds, "second")
    hours, minutes = divmod(seconds // 60, 60)
    parts = [_plural(hours, "hour")] if hours else []
    if minutes or not hours:
        parts.append(_plural(minutes, "minute"))
    return " ".join(parts)


def _plural(n: int, unit: str) -> str:
    return f"{n} {unit}{'' if n == 1 else 's'}"
