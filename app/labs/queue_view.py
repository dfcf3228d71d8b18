"""How long a queued submission waits, from what the queue and the workers report: pure arithmetic.

The estimate is a fluid one. Each alive worker grades one job at a time, and a job takes the
median grading time (claim to verdict, on the server, under whatever load it had) of the jobs
finished in the last ten minutes. The jobs ahead, and the half left on average of each job being
graded now, are shared among the workers; then this job takes one grading time more. Labs differ
and the median hides that, which is why the pages say "about".
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

WINDOW_S = 600.0  # "recent": grades finished this long ago or less
LOOKBACK_S = 6 * 3600.0  # read only jobs queued this recently (an index range); none waits this long
SAMPLE = 50  # at most this many recent grades of each verdict go into the median


@dataclass(frozen=True)
class Snapshot:
    """The queue at one moment, as seen by a job that needs ``gpus_needed`` GPUs."""

    depth: int  # jobs queued
    running: int  # jobs being graded now, by any worker
    oldest_queued_at: datetime | None
    workers: int  # alive workers that can take the job
    grade_s: float | None  # median recent grading time; None when nothing finished recently


@dataclass(frozen=True)
class Estimate:
    """A queued job's place and its expected wait for a verdict, in seconds from now."""

    position: int  # 1 for the next job to be claimed
    wait_s: float | None  # None: no worker can take it, or no recent grade to go by
    workers: int
    grade_s: float | None
    waits: bool  # no worker is free for it: it waits behind others, or for a worker to start

    @property
    def wait(self) -> str | None:
        return describe(self.wait_s) if self.wait_s is not None else None

    @property
    def text(self) -> str:
        """The one line the page shows and a screen reader hears."""
        where = f"Queued: position {self.position} in the queue"
        if self.workers == 0:
            return f"{where}; no grading worker that can take it is running now."
        if self.wait is None:
            return f"{where}."
        return f"{where}, {self.wait} to your result."


@dataclass(frozen=True)
class WorkerRate:
    """An alive worker and how fast it has been grading."""

    worker_id: str
    hostname: str
    cpu_count: int
    gpu_count: int
    recent: int  # jobs it finished in the last WINDOW_S
    per_minute: float
    job_id: int | None  # the submission it grades now


@dataclass(frozen=True)
class Board:
    """The queue as staff see it."""

    snapshot: Snapshot
    workers: list[WorkerRate]
    new_job: Estimate  # what a submission made now would wait
    oldest_age_s: float | None

    @property
    def oldest_age(self) -> str | None:
        return age(self.oldest_age_s) if self.oldest_age_s is not None else None


def median(durations: Sequence[float]) -> float | None:
    """The typical grading time; negative spans (clock steps) are left out. None for no data."""
    kept = [d for d in durations if d >= 0]
    return float(statistics.median(kept)) if kept else None


def free_now(position: int, snapshot: Snapshot) -> bool:
    """A worker is idle and this job is next in line for it: it starts at once."""
    return position <= snapshot.workers - snapshot.running


def wait_s(position: int, snapshot: Snapshot) -> float | None:
    """Seconds from now to the verdict of the job at ``position``; None when it cannot be said."""
    if snapshot.workers <= 0 or snapshot.grade_s is None:
        return None
    grade = snapshot.grade_s
    if free_now(position, snapshot):
        return grade
    ahead = (position - 1) + snapshot.running / 2  # a running job is half done, on average
    return ahead * grade / snapshot.workers + grade


def estimate(position: int, snapshot: Snapshot) -> Estimate:
    return Estimate(
        position=position,
        wait_s=wait_s(position, snapshot),
        workers=snapshot.workers,
        grade_s=snapshot.grade_s,
        waits=not free_now(position, snapshot),
    )


POLL_RUNNING_S = 0.5  # graded now, or next for a free worker: its verdict is about a second away
POLL_WAITING_S = (2.0, 30.0)  # a job behind others: a tenth of its expected wait, within these bounds
POLL_UNKNOWN_S = 3.0  # behind others with no estimate (no recent grade, or no worker to take it)


def poll_after_s(estimate: Estimate | None) -> float:
    """How long a client should wait before asking again about a submission.

    In a rush the polls of the students who wait are the web's load, and a job far back in the queue
    learns nothing new each second: it is asked again after a tenth of its expected wait (between
    2 and 30 s), so the estimate shown is never more than about 10 % stale. A job that runs, or that
    a free worker takes next, is asked every 0.5 s: its verdict is close."""
    if estimate is None or not estimate.waits:
        return POLL_RUNNING_S
    if estimate.wait_s is None:
        return POLL_UNKNOWN_S
    low, high = POLL_WAITING_S
    return round(min(high, max(low, estimate.wait_s / 10)), 1)


HOLD_S = (10.0, 25.0)  # a held request (?wait=) about a job behind others: a quarter of its expected wait
HOLD_UNKNOWN_S = 10.0


def long_poll_s(estimate: Estimate | None) -> float:
    """How long a client that asks with ``?wait=`` should let the server hold its next request.

    A held request is answered as soon as the status changes, so a job that runs, or that a free
    worker takes next, is held the longest: its verdict ends the hold. A job behind others is
    answered after a quarter of its expected wait (10 to 25 s) with its new place: the line it shows
    is at most a quarter stale, or 10 s, in about 9 requests over a 4-minute wait instead of some 25
    polls, and 4 over a 30-second one."""
    if estimate is None or not estimate.waits:
        return HOLD_S[1]
    if estimate.wait_s is None:
        return HOLD_UNKNOWN_S
    low, high = HOLD_S
    return round(min(high, max(low, estimate.wait_s / 4)), 1)


def is_long(estimate: Estimate, threshold_s: float) -> bool:
    """The lab page warns before a submission: the wait passes the threshold, or jobs wait with no worker."""
    if estimate.workers == 0:
        return estimate.position > 1
    return estimate.wait_s is not None and estimate.wait_s > threshold_s


def describe(seconds: float) -> str:
    """A wait as a person says it: "about 25 s", "about 3 min", "about 1 h 20 min" (rounded up)."""
    fives = max(5, 5 * math.ceil(seconds / 5))
    if fives < 60:
        return f"about {fives} s"
    minutes = math.ceil(seconds / 60)
    if minutes < 60:
        return f"about {minutes} min"
    hours, rest = divmod(minutes, 60)
    return f"about {hours} h" + (f" {rest} min" if rest else "")


def age(seconds: float) -> str:
    """How long something has waited: "42 s", "3 min 5 s", "2 h 4 min" (rounded down)."""
    whole = max(0, int(seconds))
    if whole < 60:
        return f"{whole} s"
    minutes, secs = divmod(whole, 60)
    if minutes < 60:
        return f"{minutes} min {secs} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min"


def per_minute(count: int, *, window_s: float, up_s: float) -> float:
    """Jobs per minute over the window, or over the worker's life if shorter (at least a minute)."""
    span = max(60.0, min(window_s, up_s))
    return count * 60.0 / span
