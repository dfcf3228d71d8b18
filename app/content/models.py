"""Pydantic models for authored content: what a valid file may say.

These models validate one item at a time. Rules that span items (unique ids,
sections that exist, scoring tiers that cover every score) live in
``app.content.rules`` so they can report every problem at once.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from datetime import UTC, date, datetime, time
from typing import Annotated, Any, Literal

from pydantic import AwareDatetime, BaseModel, BeforeValidator, ConfigDict, Field, field_validator

ID_PATTERN = r"^[a-z0-9][a-z0-9._-]*$"
Id = Annotated[str, Field(pattern=ID_PATTERN, max_length=80)]
Text = Annotated[str, Field(min_length=1)]
OPTION_KEY = re.compile(r"^[A-Z]$")


ShowAnswers = Literal["at_once", "after_due", "never"]


class Strict(BaseModel):
    """Unknown fields are an authoring error, not something to ignore."""

    model_config = ConfigDict(extra="forbid", frozen=True, str_strip_whitespace=True)


class Erratum(Strict):
    """Where an item says something other than its source document, on purpose.

    ``field`` names what was corrected (``answer``, ``explanation``, ``options.B``, ``value``,
    ``back``...), ``source`` is what the source document says there, verbatim, so the product
    stays traceable to it, and ``note`` (Markdown, one paragraph) tells students what changed
    and why; it is shown as "Corrected: <note>" wherever the corrected field is shown.
    A changed key or part value also re-scores what was marked against the old one.
    """

    field: Text
    source: str
    note: Text
    # False where the text corrected was this product's own, not the source document's (an answer
    # part's value or tolerance, written when the source was converted): ``source`` is then what
    # the product said before, and fidelity checks leave the field as it is now.
    in_source: bool = True

    @field_validator("source", mode="before")
    @classmethod
    def _source_as_text(cls, value: object) -> object:
        # A corrected number (`source: 2.0007`) is kept as the text the source printed.
        if isinstance(value, int | float) and not isinstance(value, bool):
            return repr(value) if isinstance(value, float) else str(value)
        return value


class Section(Strict):
    id: Id
    title: Text


class Tier(Strict):
    """One row of a scoring guide: raw scores ``min..max`` inclusive."""

    min: int = Field(ge=0)
    max: int = Field(ge=0)
    level: Text
    recommendation: Text


class Option(Strict):
    key: str
    text: Text


class Question(Strict):
    id: Id
    section: Id | None = None
    prompt: Text
    options: list[Option] = Field(min_length=2)
    answer: str
    explanation: Text
    cards: list[Id] = Field(default_factory=list)
    errata: list[Erratum] = Field(default_factory=list)

    @field_validator("options", mode="before")
    @classmethod
    def _options_from_mapping(cls, value: object) -> object:
        # Authors write options as an ordered mapping `A: text`; keep its order.
        if isinstance(value, dict):
            return [{"key": str(k), "text": v} for k, v in value.items()]
        return value


def _end_of_day(value: object) -> object:
    """A date alone is the end of that day, UTC; a time without a zone is UTC (as a lab.yaml ``due``)."""
    text = value.strip() if isinstance(value, str) else None
    if text is not None:
        try:
            value = date.fromisoformat(text) if len(text) == 10 else datetime.fromisoformat(text)
        except ValueError:
            return value  # pydantic says what is wrong with it
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    return datetime.combine(value, time(23, 59, 59), UTC) if isinstance(value, date) else value


Due = Annotated[AwareDatetime, BeforeValidator(_end_of_day)]
"""A quiz's due date: ``2026-12-01`` (the end of that day, UTC) or ``2026-12-01T17:00:00+01:00``."""


class Quiz(Strict):
    id: Id
    title: Text
    description: str = ""
    version: str | None = None
    last_updated: str | None = None
    passing_score: float | None = Field(default=None, gt=0, le=1)
    time_limit_minutes: int | None = Field(default=None, gt=0)
    shuffle_options: bool = False
    max_attempts: int | None = Field(default=None, gt=0)
    show_answers: ShowAnswers = "at_once"
    due: Due | None = None
    sections: list[Section] = Field(default_factory=list)
    scoring_guide: list[Tier] = Field(default_factory=list)
    questions: list[Question] = Field(min_length=1)

    @field_validator("version", "last_updated", mode="before")
    @classmethod
    def _as_text(cls, value: object) -> object:
        # YAML reads `1.0` as a float and `2025-10-16` as a date; both are labels here.
        return None if value is None else str(value)


class ExerciseSetMeta(Strict):
    id: Id
    title: Text
    description: str = ""
    sections: list[Section] = Field(default_factory=list)
    difficulty_legend: dict[int, str] = Field(default_factory=dict)


TOLERANCE = re.compile(r"^\d+(\.\d+)?%$")


class AnswerPart(Strict):
    """One numeric sub-question of an exercise, checked on the server.

    ``tolerance`` is absolute in the part's unit (``0.5``) or relative to the value (``"2%"``).
    With ``unit: "%"`` the value is a percentage, and answers as a fraction are accepted too.
    """

    id: Id
    prompt: Text
    value: float
    tolerance: float | str = 0
    unit: str
    explanation: Text
    # Offered after two wrong answers: a nudge toward the method (Markdown), never the value.
    hint: Text | None = None
    errata: list[Erratum] = Field(default_factory=list)

    @field_validator("value", mode="before")
    @classmethod
    def _finite_number(cls, value: object) -> object:
        # YAML reads `1e21` as text; a number written any other way is an authoring mistake.
        if isinstance(value, bool):
            raise ValueError("must be a number")
        if isinstance(value, str):
            try:
                value = float(value)
            except ValueError:
                raise ValueError(f"must be a number, not {value!r}") from None
        if isinstance(value, int | float) and not math.isfinite(value):
            raise ValueError("must be a finite number")
        return value

    @field_validator("tolerance", mode="before")
    @classmethod
    def _tolerance(cls, value: object) -> object:
        if isinstance(value, bool):
            raise ValueError("must be a number or a percentage such as '1%'")
        if isinstance(value, int | float):
            if value < 0 or not math.isfinite(value):
                raise ValueError("must be zero or more")
            return float(value)
        if isinstance(value, str) and TOLERANCE.match(value.strip()):
            return value.strip()
        raise ValueError(f"must be a number or a percentage such as '1%', not {value!r}")


class Exercise(Strict):
    id: Id
    number: Text
    title: str | None = None
    section: Id | None = None
    difficulty: int | None = Field(default=None, ge=1, le=4)
    parts: list[AnswerPart] = Field(default_factory=list)
    errata: list[Erratum] = Field(default_factory=list)
    body: Text


class ExerciseSet(Strict):
    id: Id
    title: Text
    description: str = ""
    sections: list[Section] = Field(default_factory=list)
    difficulty_legend: dict[int, str] = Field(default_factory=dict)
    exercises: list[Exercise]


# /flashcards/<name> pages that are not decks: a deck with one of these ids could never be opened.
RESERVED_DECK_IDS = frozenset({"mine", "missed", "settings"})


class DeckMeta(Strict):
    id: Id
    title: Text
    description: str = ""
    rating_prompt: str = "How well did you know this?"
    rating_labels: dict[int, str] = Field(default_factory=dict)

    @field_validator("id")
    @classmethod
    def _not_a_page(cls, value: str) -> str:
        if value in RESERVED_DECK_IDS:
            names = ", ".join(sorted(RESERVED_DECK_IDS))
            raise ValueError(f"'{value}' names a page under /flashcards/; a deck id cannot be {names}")
        return value


class Card(Strict):
    id: Id
    number: int | None = None
    topic: str | None = None
    front: Text
    back: Text
    errata: list[Erratum] = Field(default_factory=list)


class Deck(Strict):
    id: Id
    title: Text
    description: str = ""
    rating_prompt: str = "How well did you know this?"
    rating_labels: dict[int, str] = Field(default_factory=dict)
    cards: list[Card]


class LabContent(Strict):
    """A validated lab folder: its ``lab.yaml`` as data and every file of the folder (``mutants/`` aside)."""

    model_config = ConfigDict(str_strip_whitespace=False)  # files are kept byte for byte

    id: Id
    title: Text
    exercise: Id
    spec: dict[str, Any]
    files: dict[str, str]

    @property
    def digest(self) -> str:
        """Changes whenever any file of the lab does: a new digest is a new version."""
        return hashlib.sha256(json.dumps([self.spec, self.files], sort_keys=True).encode()).hexdigest()


LatePolicy = Literal["accept", "refuse"]


class Assignment(Strict):
    """One assessment as a course assigns it; every field left out keeps what the item's own file says.

    ``due`` is a date (the end of that day in the course's time zone) or a date and time;
    ``late: refuse`` closes the assessment at ``due`` (``accept``, the default, marks work late);
    ``max_attempts`` limits quiz attempts or lab submissions; ``show_answers`` is when a quiz's key
    or a lab's reference is revealed.
    """

    due: date | datetime | None = None
    late: LatePolicy = "accept"
    max_attempts: int | None = Field(default=None, gt=0)
    show_answers: ShowAnswers | None = None

    def due_at(self, time_zone: str) -> datetime | None:
        from zoneinfo import ZoneInfo

        zone = ZoneInfo(time_zone)
        if self.due is None:
            return None
        if isinstance(self.due, datetime):
            return self.due if self.due.tzinfo else self.due.replace(tzinfo=zone)
        return datetime.combine(self.due, time(23, 59, 59), zone)


def _assignments(value: object) -> object:
    # ``quiz-id:`` alone (null) assigns an item with its own settings.
    if isinstance(value, list):
        return {item: {} for item in value}
    return {k: ({} if v is None else v) for k, v in value.items()} if isinstance(value, dict) else value


Assignments = Annotated[
    dict[Annotated[str, Field(pattern=ID_PATTERN, max_length=80)], Assignment], BeforeValidator(_assignments)
]


class CourseContent(Strict):
    """A course instance (``courses/<id>/course.yaml``): when it runs and what it assigns."""

    id: Id = Field(max_length=40)
    title: Text
    term: str | None = None
    starts: date | None = None
    ends: date | None = None
    time_zone: str = "UTC"
    quizzes: Assignments = Field(default_factory=dict)
    exercises: Assignments = Field(default_factory=dict)
    decks: Assignments = Field(default_factory=dict)
    labs: Assignments = Field(default_factory=dict)

    @field_validator("term", mode="before")
    @classmethod
    def _term_text(cls, value: object) -> object:
        return None if value is None else str(value)

    @field_validator("time_zone")
    @classmethod
    def _known_zone(cls, value: str) -> str:
        from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"unknown time zone '{value}' (use an IANA name such as Europe/Berlin)") from None
        return value

    def kinds(self) -> dict[str, dict[str, Assignment]]:
        return {"quiz": self.quizzes, "exercises": self.exercises, "deck": self.decks, "lab": self.labs}


class ContentTree(Strict):
    """Everything under one content directory, validated."""

    quizzes: list[Quiz] = Field(default_factory=list)
    exercise_sets: list[ExerciseSet] = Field(default_factory=list)
    decks: list[Deck] = Field(default_factory=list)
    labs: list[LabContent] = Field(default_factory=list)
    courses: list[CourseContent] = Field(default_factory=list)
