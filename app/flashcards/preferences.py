"""Per-student study settings: reading them, and checking and saving the form."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import cast
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from sqlalchemy import Table, bindparam, select
from sqlalchemy.orm import Session

from app.db import utcnow
from app.errors import InvalidInput
from app.flashcards.models import StudySettings
from app.flashcards.scheduling import Prefs

RETENTION_RANGE = (0.70, 0.97)


_SETTINGS = cast(Table, StudySettings.__table__)
# Built once, on the table: this runs for every card shown and rated.
_PREFS = select(
    _SETTINGS.c.desired_retention, _SETTINGS.c.learning_steps, _SETTINGS.c.relearning_steps,
    _SETTINGS.c.new_per_day, _SETTINGS.c.reviews_per_day, _SETTINGS.c.time_zone,
).where(_SETTINGS.c.user_id == bindparam("user_id"))  # fmt: skip


def get_prefs(user_id: int, *, session: Session) -> Prefs:
    """The student's settings, or the defaults when they never saved any."""
    row = session.execute(_PREFS, {"user_id": user_id}).first()
    if row is None:
        return Prefs()
    retention, learning, relearning, new, reviews, zone = row
    return Prefs(desired_retention=retention, learning_steps=tuple(learning), relearning_steps=tuple(relearning),
                 new_per_day=new, reviews_per_day=reviews, time_zone=zone)  # fmt: skip


@dataclass(frozen=True)
class SettingsForm:
    desired_retention: str
    new_per_day: str
    reviews_per_day: str
    learning_steps: str
    relearning_steps: str
    time_zone: str


def _steps(text: str, field: str) -> tuple[int, ...]:
    """'1m 10m' or '1 10' or '1h' -> minutes."""
    minutes: list[int] = []
    for part in text.replace(",", " ").split():
        unit = part[-1].lower() if part[-1].isalpha() else "m"
        number = part[:-1] if part[-1].isalpha() else part
        if unit not in "mhd" or not number.isdigit() or int(number) == 0:
            raise InvalidInput(f"Write steps as minutes, like '1m 10m' (got '{part}').", field=field)
        minutes.append(int(number) * {"m": 1, "h": 60, "d": 1440}[unit])
    if len(minutes) > 10:
        raise InvalidInput("At most 10 steps.", field=field)
    return tuple(minutes)


def _int(text: str, field: str, label: str, top: int) -> int:
    if not text.strip().isdigit() or not 0 <= int(text) <= top:
        raise InvalidInput(f"{label} must be a whole number from 0 to {top}.", field=field)
    return int(text)


def parse(form: SettingsForm) -> Prefs:
    """Check the settings form; InvalidInput names the field that is wrong."""
    low, high = RETENTION_RANGE
    try:
        retention = float(form.desired_retention)
    except ValueError:
        retention = -1.0
    if not low <= retention <= high:
        raise InvalidInput(f"Desired retention must be between {low:.2f} and {high:.2f}.", field="desired_retention")
    check_zone(form.time_zone)
    return Prefs(
        desired_retention=round(retention, 3),
        learning_steps=_steps(form.learning_steps, "learning_steps"),
        relearning_steps=_steps(form.relearning_steps, "relearning_steps"),
        new_per_day=_int(form.new_per_day, "new_per_day", "New cards per day", 9999),
        reviews_per_day=_int(form.reviews_per_day, "reviews_per_day", "Reviews per day", 99999),
        time_zone=form.time_zone,
    )


def save(user_id: int, prefs: Prefs, *, session: Session) -> None:
    row = session.get(StudySettings, user_id) or StudySettings(user_id=user_id)
    row.desired_retention = prefs.desired_retention
    row.new_per_day = prefs.new_per_day
    row.reviews_per_day = prefs.reviews_per_day
    row.learning_steps = list(prefs.learning_steps)
    row.relearning_steps = list(prefs.relearning_steps)
    row.time_zone = prefs.time_zone
    row.updated_at = utcnow()
    session.add(row)
    session.flush()


def steps_text(minutes: tuple[int, ...]) -> str:
    return " ".join(f"{m // 1440}d" if m % 1440 == 0 else f"{m // 60}h" if m % 60 == 0 else f"{m}m" for m in minutes)


@cache
def time_zones() -> list[str]:
    """The zone names a student chooses from (the IANA database's, as Python has it)."""
    return sorted(available_timezones())


def check_zone(name: str) -> str:
    """``name`` if it is a time zone of the list; InvalidInput (field ``time_zone``) otherwise."""
    if name != "UTC" and name not in time_zones():
        message = f"Unknown time zone '{name}'; choose one from the list, like Europe/Paris."
        raise InvalidInput(message, field="time_zone")
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise InvalidInput(f"Unknown time zone '{name}'; choose one from the list.", field="time_zone") from None
    return name


def zone_of(user_id: int, *, session: Session) -> str:
    """The student's time zone: what every time on the site is shown in, and where the study day starts."""
    zone = session.scalar(select(StudySettings.time_zone).where(StudySettings.user_id == user_id))
    return zone or "UTC"


def shortcuts_on(user_id: int, *, session: Session) -> bool:
    """Whether the study page answers one-key shortcuts for this student (on until they turn them off)."""
    on = session.scalar(select(StudySettings.keyboard_shortcuts).where(StudySettings.user_id == user_id))
    return True if on is None else on


def set_shortcuts(user_id: int, on: bool, *, session: Session) -> None:
    """Turn the student's one-key study shortcuts on or off, keeping their other settings."""
    row = _row(user_id, session)
    row.keyboard_shortcuts = on
    row.updated_at = utcnow()
    session.add(row)
    session.flush()


def _row(user_id: int, session: Session) -> StudySettings:
    """The student's settings row; a new one holding the defaults when they never saved any."""
    row = session.get(StudySettings, user_id)
    if row is not None:
        return row
    defaults = Prefs()
    return StudySettings(
        user_id=user_id, desired_retention=defaults.desired_retention, new_per_day=defaults.new_per_day,
        reviews_per_day=defaults.reviews_per_day, learning_steps=list(defaults.learning_steps),
        relearning_steps=list(defaults.relearning_steps), time_zone=defaults.time_zone,
    )  # fmt: skip


def set_time_zone(user_id: int, zone: str, *, session: Session) -> None:
    """Set the student's time zone (checked), keeping their other settings."""
    row = session.get(StudySettings, user_id)
    if row is None:
        defaults = Prefs()
        row = StudySettings(
            user_id=user_id, desired_retention=defaults.desired_retention, new_per_day=defaults.new_per_day,
            reviews_per_day=defaults.reviews_per_day, learning_steps=list(defaults.learning_steps),
            relearning_steps=list(defaults.relearning_steps),
        )  # fmt: skip
    row.time_zone = check_zone(zone)
    row.updated_at = utcnow()
    session.add(row)
    session.flush()
