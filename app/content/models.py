"""Pydantic models for authored content: what a valid file may say.

These models validate one item at a time. Rules that span items (unique ids,
sections that exist, scoring tiers that cover every score) live in
``app.content.rules`` so they can report every problem at once.
"""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, time
from typing import Annotated, Literal

from pydantic import AwareDatetime, BaseModel, BeforeValidator, ConfigDict, Field, field_validator

ID_PATTERN = r"^[a-z0-9][a-z0-9._-]*$"
Id = Annotated[str, Field(pattern=ID_PATTERN, max_length=80)]
Text = Annotated[str, Field(min_length=1)]
OPTION_KEY = re.compile(r"^[A-Z]$")


def _due(value: object) -> object:
    # A date alone means the end of that day, UTC; a time without a zone is UTC.
    if isinstance(value, str):
        try:
            value = date.fromisoformat(value.strip()) if len(value.strip()) == 10 else datetime.fromisoformat(value)
        except ValueError:
            return value  # pydantic reports it
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    if isinstance(value, date):
        return datetime.combine(value, time(23, 59, 59), UTC)
    return value


Due = Annotated[AwareDatetime, BeforeValidator(_due)]
"""A due date: ``2026-12-01`` (end of that day, UTC) or ``2026-12-01T17:00:00+01:00``."""
ShowAnswers = Literal["at_once", "after_due", "never"]


class Strict(BaseModel):
    """Unknown fields are an authoring error, not something to ignore."""

    model_config = ConfigDict(extra="forbid", frozen=True, str_strip_whitespace=True)


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

    @field_validator("options", mode="before")
    @classmethod
    def _options_from_mapping(cls, value: object) -> object:
        # Authors write options as an ordered mapping `A: text`; keep its order.
        if isinstance(value, dict):
            return [{"key": str(k), "text": v} for k, v in value.items()]
        return value


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


class Exercise(Strict):
    id: Id
    number: Text
    title: str | None = None
    section: Id | None = None
    difficulty: int | None = Field(default=None, ge=1, le=4)
    body: Text


class ExerciseSet(Strict):
    id: Id
    title: Text
    description: str = ""
    sections: list[Section] = Field(default_factory=list)
    difficulty_legend: dict[int, str] = Field(default_factory=dict)
    exercises: list[Exercise]


class DeckMeta(Strict):
    id: Id
    title: Text
    description: str = ""
    rating_prompt: str = "How well did you know this?"
    rating_labels: dict[int, str] = Field(default_factory=dict)


class Card(Strict):
    id: Id
    number: int | None = None
    topic: str | None = None
    front: Text
    back: Text


class Deck(Strict):
    id: Id
    title: Text
    description: str = ""
    rating_prompt: str = "How well did you know this?"
    rating_labels: dict[int, str] = Field(default_factory=dict)
    cards: list[Card]


class ContentTree(Strict):
    """Everything under one content directory, validated."""

    quizzes: list[Quiz] = Field(default_factory=list)
    exercise_sets: list[ExerciseSet] = Field(default_factory=list)
    decks: list[Deck] = Field(default_factory=list)
