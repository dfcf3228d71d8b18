"""JSON shapes of the labs API."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field


class LabOut(BaseModel):
    id: str
    title: str
    exercise: str
    world_sizes: list[int]
    needs_gpu: bool


class LabListOut(LabOut):
    max_score: int
    best_score: int | float | None = Field(
        default=None,
        description="with a bearer token: your best graded score so far (points to one decimal: partial credit"
        " is the share of a check's cases that are right); else null",
    )


class CheckSpecOut(BaseModel):
    id: str
    title: str
    points: int


class LabDetailOut(LabOut):
    backends: list[str]
    functions: list[str]
    time_limit_s: float
    max_score: int
    checks: list[CheckSpecOut]
    statement: str = Field(description="Markdown, with $math$")
    starter_code: str
    public_files: list[str] = Field(
        description="files the lab runs beside your code (such as driver.py), each at /labs/{id}/public/{name}"
    )


class SubmissionIn(BaseModel):
    code: str = Field(description="The Python module to grade (at most 256 KiB)")


class SubmissionCreated(BaseModel):
    id: int
    status: str


class CheckOut(BaseModel):
    id: str
    name: str
    passed: bool
    points: int | float = Field(description="points earned, to one decimal: a check's share of its max_points")
    max_points: int
    message: str


class VerdictOut(BaseModel):
    status: str = Field(
        description="passed, failed, compile_error, not_allowed, runtime_error, crashed, time_limit, ..."
    )
    message: str
    elapsed_s: float | None = None
    output: dict[str, str] = Field(default_factory=dict, description="trimmed stdout+stderr per 'wsN/rankR'")
    data: dict[str, Any] = Field(default_factory=dict)


class SubmissionOut(BaseModel):
    id: int
    lab_id: str
    status: str = Field(
        description="how the run ended, as stored: queued, running, graded (ran to the end), failed (your code "
        "stopped early or could not run) or error (ours). Show `result` to a person"
    )
    result: str = Field(
        default="",
        description='what the pages say: "Queued", "Running", the score ("6/10", "7.5/10", "10/10 Passed") for every '
        'run that could be judged, or "Could not run: <reason>" when nothing could be',
    )
    result_kind: str = Field(default="", description="waiting, scored or not_run")
    position: int | None = Field(description="place in the queue while queued (the same as queue_position)")
    queue_position: int | None = Field(description="place in the queue while queued, 1 for the next job; else null")
    estimated_wait_s: float | None = Field(
        description="while queued, about how many seconds from now to the verdict: the median grading time of "
        "the last 10 minutes, the jobs ahead and the alive workers that can take it. Null when not queued, "
        "when no such worker is running, or when no job was graded in the last 10 minutes"
    )
    poll_after_s: float | None = Field(
        default=None,
        description="while not done, how many seconds to wait before asking again: 0.5 while it runs or is "
        "next, a tenth of the expected wait (2 to 30 s) while it waits behind others; null once done",
    )
    long_poll_s: float | None = Field(
        default=None,
        description="while not done, the hold to ask for with ?wait= when asking again at once (a long poll): "
        "the answer comes as soon as the status changes, else after this many seconds with the queue's news; "
        "null once done",
    )
    score: int | float | None = Field(description="points to one decimal (7.5), whole at full marks (10)")
    max_score: int | None
    verdict: VerdictOut | None
    checks: list[CheckOut]
    queued_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
