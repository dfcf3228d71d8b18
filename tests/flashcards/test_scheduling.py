"""Scheduling goes through the fsrs package: its published vectors, the rating map, the 4 am day."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from fsrs import Card, Rating, Scheduler

from app.flashcards.models import LEARNING, NEW, RELEARNING, REVIEW
from app.flashcards.scheduling import (
    Prefs,
    Snapshot,
    day_start,
    format_interval,
    map_rating,
    next_day_start,
    previews,
    review,
    scheduler,
    study_date,
)  # fmt: skip

START = datetime(2022, 11, 29, 12, 30, tzinfo=UTC)


def test_published_interval_vector_with_fuzzing_off() -> None:
    # py-fsrs's own test_review_card: Good x6, Again x2, Good x5 from a new card.
    raws = [4, 4, 4, 4, 4, 4, 1, 1, 4, 4, 4, 4, 4]
    snap, now, intervals = Snapshot(), START, []
    for raw in raws:
        snap = review(snap, raw, now, scheduler(Prefs(), fuzz=False))
        assert snap.due is not None and snap.last_review is not None
        intervals.append((snap.due - snap.last_review).days)
        now = snap.due
    assert intervals == [0, 2, 11, 46, 163, 498, 0, 0, 2, 4, 7, 12, 21]


def test_same_as_calling_fsrs_directly() -> None:
    sched, card, snap, now = Scheduler(enable_fuzzing=False), Card(card_id=1, due=START), Snapshot(), START
    for raw in (3, 4, 2, 5, 4):
        card, _ = sched.review_card(card, map_rating(raw), now)
        snap = review(snap, raw, now, scheduler(Prefs(), fuzz=False))
        assert (snap.state, snap.step, snap.due) == (int(card.state), card.step, card.due)
        assert snap.stability == pytest.approx(card.stability) and snap.difficulty == pytest.approx(card.difficulty)
        now = card.due + timedelta(hours=1)


def test_first_review_of_a_new_card_with_default_steps() -> None:
    # fsrs 6 defaults: Again 1 min, Hard 5.5 min (between steps), Good 10 min, Easy 8 days.
    got = {raw: format_interval(delta) for raw, delta in previews(Snapshot(), START, Prefs()).items()}
    assert got == {1: "1m", 2: "1m", 3: "6m", 4: "10m", 5: "8d"}


def test_raw_points_map_onto_fsrs_ratings() -> None:
    assert [map_rating(r) for r in range(1, 6)] == [Rating.Again, Rating.Again, Rating.Hard, Rating.Good, Rating.Easy]
    for bad in (0, 6, -1):
        with pytest.raises(ValueError, match="1 to 5"):
            map_rating(bad)


def test_states_walk_learning_review_relearning() -> None:
    sched = scheduler(Prefs(), fuzz=False)
    snap = review(Snapshot(), 4, START, sched)
    assert snap.state == LEARNING and snap.step == 1
    snap = review(snap, 4, START + timedelta(minutes=10), sched)
    assert snap.state == REVIEW and snap.interval_days == 2
    snap = review(snap, 1, snap.due or START, sched)
    assert snap.state == RELEARNING
    assert Snapshot.from_dict(snap.to_dict()) == snap
    assert Snapshot().state == NEW


def test_desired_retention_and_steps_change_the_schedule() -> None:
    snap = review(Snapshot(), 5, START, scheduler(Prefs(), fuzz=False))
    strict = previews(snap, snap.due or START, Prefs(desired_retention=0.97))
    loose = previews(snap, snap.due or START, Prefs(desired_retention=0.70))
    assert strict[4] < loose[4]
    assert previews(Snapshot(), START, Prefs(learning_steps=(5, 30)))[1] == timedelta(minutes=5)


def test_fuzzing_on_varies_long_intervals() -> None:
    snap = review(Snapshot(), 5, START, scheduler(Prefs(), fuzz=False))
    later = snap.due or START
    dues = {review(snap, 4, later, scheduler(Prefs(), fuzz=True)).due for _ in range(40)}
    assert len(dues) > 1


@pytest.mark.parametrize(
    ("zone", "local_start_utc"),
    [("Europe/Paris", datetime(2025, 1, 15, 3, 0, tzinfo=UTC)),  # 4 am CET = 03:00 UTC
     ("America/Los_Angeles", datetime(2025, 1, 15, 12, 0, tzinfo=UTC))],  # 4 am PST = 12:00 UTC
)  # fmt: skip
def test_study_day_starts_at_4am_local(zone: str, local_start_utc: datetime) -> None:
    just_before = local_start_utc - timedelta(minutes=1)
    assert day_start(just_before, zone) == local_start_utc - timedelta(days=1)
    assert next_day_start(just_before, zone) == local_start_utc
    assert day_start(local_start_utc, zone) == local_start_utc
    assert next_day_start(local_start_utc, zone) == local_start_utc + timedelta(days=1)
    assert study_date(just_before, zone) != study_date(local_start_utc, zone)


def test_the_same_moment_is_a_different_study_day_in_two_zones() -> None:
    moment = datetime(2025, 1, 15, 6, 0, tzinfo=UTC)  # 07:00 in Paris, 22:00 the day before in Los Angeles
    assert str(study_date(moment, "Europe/Paris")) == "2025-01-15"
    assert str(study_date(moment, "America/Los_Angeles")) == "2025-01-14"


def test_day_boundary_across_daylight_saving() -> None:
    # Paris moves to summer time on 2025-03-30 at 02:00; the day still starts at 4 am local.
    assert next_day_start(datetime(2025, 3, 29, 12, 0, tzinfo=UTC), "Europe/Paris") == datetime(
        2025, 3, 30, 2, 0, tzinfo=UTC
    )


def test_interval_labels() -> None:
    assert [format_interval(timedelta(seconds=s)) for s in (30, 600, 7200, 4 * 86400, 60 * 86400, 800 * 86400)] == [
        "30s", "10m", "2h", "4d", "2.0mo", "2.2y",
    ]  # fmt: skip
