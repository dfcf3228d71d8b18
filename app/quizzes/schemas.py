"""JSON shapes of the quiz API."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field


class QuizOut(BaseModel):
    id: str
    title: str
    question_count: int
    passing_score: float | None
    time_limit_minutes: int | None
    due: datetime | None = Field(None, description="your due date in the request's course (an extension's if granted)")
    max_attempts: int | None = Field(None, description="attempts you may make in the course (extensions included)")
    closes_at_due: bool = Field(False, description="the course takes no attempt after the due date")


class OptionOut(BaseModel):
    key: str = Field(description="the option's stable id (its authored letter): what an answer's choice names")
    text: str
    label: str = Field(description="the letter shown for it in this attempt, A, B, C... in the order listed")


class QuestionOut(BaseModel):
    id: str
    section: str | None
    prompt: str
    options: list[OptionOut]


class AnswerIn(BaseModel):
    choice: str = Field(min_length=1, max_length=4, examples=["B"])


class AnswerOut(BaseModel):
    question_id: str
    choice: str
    saved_at: datetime


class GuideOut(BaseModel):
    level: str
    recommendation: str


class SectionOut(BaseModel):
    id: str | None
    title: str
    score: int
    max_score: int
    percent: float


class MarkOut(BaseModel):
    """One question of a result; ``answer``, ``correct`` and ``explanation`` are null while the
    quiz's policy hides the key (``show_answers``)."""

    id: str
    choice: str | None
    answer: str | None
    correct: bool | None
    explanation: str | None
    choice_label: str | None = Field(default=None, description="the letter the chosen option was shown under")
    answer_label: str | None = Field(default=None, description="the letter the right option was shown under")


class RescoreOut(BaseModel):
    """The attempt was marked again after a question's key was corrected. ``question_id`` and the
    keys are null while the quiz's policy hides the key."""

    question_id: str | None
    old_answer: str | None
    new_answer: str | None
    old_score: int
    new_score: int
    max_score: int
    rescored_at: datetime


class ResultOut(BaseModel):
    score: int
    max_score: int
    percent: float
    passed: bool | None
    guide: GuideOut | None
    sections: list[SectionOut]
    questions: list[MarkOut]
    submitted_at: datetime
    auto_submitted: bool
    key_shown: bool = True
    late: bool = False
    rescores: list[RescoreOut] = []


class AttemptOut(BaseModel):
    """An attempt. ``choices`` are the student's own saved answers; ``result`` (with the key) only once submitted."""

    id: int
    quiz_id: str
    status: str
    started_at: datetime
    deadline: datetime | None
    submitted_at: datetime | None
    questions: list[QuestionOut]
    choices: dict[str, str]
    result: ResultOut | None
