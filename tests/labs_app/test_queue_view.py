"""The queue's estimate, pure: a position, the workers and the recent grading time give the wait."""

from __future__ import annotations

import pytest

from app.labs.queue_view import (
    Estimate,
    Snapshot,
    age,
    describe,
    estimate,
    free_now,
    is_long,
    long_poll_s,
    median,
    per_minute,
    poll_after_s,
    wait_s,
)
from app.labs.watch import changed


def snap(*, running: int = 0, workers: int = 1, grade_s: float | None = 10.0, depth: int = 0) -> Snapshot:
    return Snapshot(depth=depth, running=running, oldest_queued_at=None, workers=workers, grade_s=grade_s)


def test_the_typical_grade_is_the_median_of_what_finished() -> None:
    assert median([3.0, 1.0, 2.0]) == 2.0
    assert median([1.0, 2.0, 3.0, 4.0]) == 2.5
    assert median([8.0, -5.0, 12.0]) == 10.0  # a clock step backwards is no grading time
    assert median([]) is None and median([-1.0]) is None


@pytest.mark.parametrize(
    ("position", "running", "workers", "expected"),
    [
        (1, 0, 1, 10.0),  # an idle worker takes it at once: one grading time
        (2, 0, 2, 10.0),  # two idle workers: the second is free for the second job
        (3, 0, 2, 20.0),  # two ahead shared by two workers, then its own grade
        (1, 1, 1, 15.0),  # behind a running job that is half done on average
        (2, 1, 1, 25.0),
        (1, 2, 2, 15.0),
        (3, 2, 2, 25.0),
        (5, 4, 4, 25.0),  # four ahead and two halves over four workers
    ],
)
def test_the_wait_shares_the_jobs_ahead_among_the_workers(
    position: int, running: int, workers: int, expected: float
) -> None:
    assert wait_s(position, snap(running=running, workers=workers)) == pytest.approx(expected)


def test_there_is_no_estimate_without_a_worker_or_a_recent_grade() -> None:
    assert wait_s(1, snap(workers=0)) is None
    assert wait_s(3, snap(grade_s=None)) is None


def test_a_job_waits_when_no_worker_is_free_for_it() -> None:
    assert free_now(1, snap(workers=1)) and free_now(2, snap(workers=3, running=1))
    assert not free_now(2, snap(workers=1)) and not free_now(1, snap(workers=1, running=1))
    assert not free_now(1, snap(workers=0))
    assert estimate(1, snap(workers=1)).waits is False
    assert estimate(2, snap(workers=1)).waits is True


def test_the_line_says_the_position_and_the_wait_as_a_person_would() -> None:
    e = estimate(2, snap(running=1, workers=1, grade_s=40.0))
    assert (e.position, e.wait_s, e.workers, e.grade_s) == (2, 100.0, 1, 40.0)
    assert e.text == "Queued: position 2 in the queue, about 2 min to your result."
    assert estimate(3, snap(workers=0)).text == (
        "Queued: position 3 in the queue; no grading worker that can take it is running now."
    )
    assert estimate(1, snap(grade_s=None)).text == "Queued: position 1 in the queue."
    assert estimate(1, snap(grade_s=4.0)).text == "Queued: position 1 in the queue, about 5 s to your result."


@pytest.mark.parametrize(
    ("seconds", "said"),
    [
        (0.0, "about 5 s"),
        (4.2, "about 5 s"),
        (5.0, "about 5 s"),
        (41.0, "about 45 s"),
        (55.0, "about 55 s"),
        (55.1, "about 1 min"),
        (100.0, "about 2 min"),
        (3540.0, "about 59 min"),
        (3600.0, "about 1 h"),
        (4800.0, "about 1 h 20 min"),
    ],
)
def test_waits_are_rounded_up(seconds: float, said: str) -> None:
    assert describe(seconds) == said


def test_ages_are_rounded_down() -> None:
    assert [age(s) for s in (-1.0, 42.9, 185.0, 7440.0)] == ["0 s", "42 s", "3 min 5 s", "2 h 4 min"]


def test_a_workers_rate_is_over_the_window_or_its_life_if_shorter() -> None:
    assert per_minute(5, window_s=600, up_s=10_000) == 0.5
    assert per_minute(5, window_s=600, up_s=120) == 2.5
    assert per_minute(5, window_s=600, up_s=10) == 5.0  # a worker a few seconds old: over one minute
    assert per_minute(0, window_s=600, up_s=600) == 0.0


def test_the_queue_is_long_past_the_threshold_or_when_jobs_wait_for_no_worker() -> None:
    def new(wait: float | None, workers: int = 1, position: int = 2) -> Estimate:
        return Estimate(position=position, wait_s=wait, workers=workers, grade_s=10.0, waits=True)

    assert is_long(new(61.0), 60.0) and not is_long(new(60.0), 60.0) and not is_long(new(None), 60.0)
    assert is_long(new(None, workers=0, position=2), 60.0)
    assert not is_long(new(None, workers=0, position=1), 60.0)  # nothing queued: nothing waits yet


@pytest.mark.parametrize(
    ("position", "running", "workers", "grade_s", "expected"),
    [
        (1, 0, 1, 10.0, 0.5),  # a free worker takes it next: its verdict is close
        (2, 1, 1, 10.0, 2.5),  # 25 s away: asked again after a tenth of that
        (3, 0, 2, 1.0, 2.0),  # 2 s away: never more often than every 2 s while it waits
        (200, 2, 2, 1.4, 14.1),  # 141.4 s away
        (900, 2, 2, 1.4, 30.0),  # 630 s away: never less often than every 30 s
        (5, 1, 0, 10.0, 3.0),  # no worker can take it: no estimate, a steady pace
        (5, 1, 1, None, 3.0),  # nothing graded recently: the same
    ],
)
def test_a_client_is_told_when_to_ask_again(
    position: int, running: int, workers: int, grade_s: float | None, expected: float
) -> None:
    est = estimate(position, snap(running=running, workers=workers, grade_s=grade_s))
    assert poll_after_s(est) == expected


def test_a_running_or_finished_job_is_asked_about_often() -> None:
    assert poll_after_s(None) == 0.5


@pytest.mark.parametrize(
    ("position", "running", "workers", "grade_s", "expected"),
    [
        (1, 0, 1, 10.0, 25.0),  # a free worker takes it next: held until it runs, whenever that is
        (9, 1, 1, 10.0, 23.8),  # 95 s away: its line refreshed after a quarter of that
        (2, 1, 1, 10.0, 10.0),  # 25 s away: a hold of 10 s at least (the claim ends it anyway)
        (200, 2, 2, 1.4, 25.0),  # 141.4 s away: 25 s at most
        (5, 1, 0, 10.0, 10.0),  # no worker can take it: no estimate, a steady hold
        (5, 1, 1, None, 10.0),  # nothing graded recently: the same
    ],
)
def test_a_held_poll_is_held_a_quarter_of_the_wait(
    position: int, running: int, workers: int, grade_s: float | None, expected: float
) -> None:
    est = estimate(position, snap(running=running, workers=workers, grade_s=grade_s))
    assert long_poll_s(est) == expected


def test_a_running_job_is_held_until_its_verdict() -> None:
    assert long_poll_s(None) == 25.0


def test_a_held_poll_ends_when_its_status_differs_from_any_it_was_held_on() -> None:
    held = {1: ["queued"], 2: ["running"], 3: ["queued", "running"], 4: ["queued"]}
    now = {1: "queued", 2: "graded", 3: "running", 5: "queued"}
    assert changed(held, now) == {2, 3, 4}  # 3: one of its requests saw queued; 4: the row is gone
