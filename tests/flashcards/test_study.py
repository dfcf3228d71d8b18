"""The study service on the database: rating, the log, undo, limits, day boundaries, conflicts."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.errors import Conflict, InvalidInput, NotFound
from app.flashcards import preferences, study
from app.flashcards.models import LEARNING, NEW, REVIEW, CardState, Review
from app.flashcards.scheduling import Prefs
from tests.factories import make_user
from tests.flashcards.conftest import DECK

NOW = datetime(2025, 1, 15, 10, 0, tzinfo=UTC)


def log(session: Session, user_id: int) -> list[Review]:
    return list(session.scalars(select(Review).where(Review.user_id == user_id).order_by(Review.id)))


def test_queue_starts_with_new_cards_in_deck_order(session: Session) -> None:
    user = make_user(session, "ada")
    view = study.study_view(user.id, DECK, session=session, now=NOW)
    assert view.counts.as_dict() == {"new": 20, "learning": 0, "review": 0}
    assert view.card is not None and view.card.number == 1 and view.kind == "new"
    assert view.intervals[4] == timedelta(minutes=10)


def test_rating_records_raw_and_mapped_rating_and_state_before(session: Session) -> None:
    user = make_user(session, "ada")
    card = study.study_view(user.id, DECK, session=session, now=NOW).card
    assert card is not None
    done = study.rate(user.id, card.id, 2, session=session, now=NOW, duration_ms=4200, fuzz=False)
    assert done.snap.state == LEARNING and done.snap.due == NOW + timedelta(minutes=1)
    (entry,) = log(session, user.id)
    assert (entry.raw_rating, entry.rating, entry.duration_ms, entry.state_before) == (2, 1, 4200, NEW)
    assert entry.before["state"] == NEW and entry.after["state"] == LEARNING and entry.reviewed_at == NOW
    view = study.study_view(user.id, DECK, session=session, now=NOW)
    assert view.counts.as_dict() == {"new": 19, "learning": 1, "review": 0}


def test_exact_intervals_through_the_service(session: Session) -> None:
    user = make_user(session, "ada")
    now, intervals = datetime(2022, 11, 29, 12, 30, tzinfo=UTC), []
    for raw in (4, 4, 4, 4, 4, 4, 1, 1, 4, 4, 4, 4, 4):
        snap = study.rate(user.id, "mdt-003", raw, session=session, now=now, fuzz=False).snap
        intervals.append(snap.interval_days)
        now = snap.due or now
    assert intervals == [0, 2, 11, 46, 163, 498, 0, 0, 2, 4, 7, 12, 21]
    assert len(log(session, user.id)) == 13


def test_undo_restores_the_card_and_keeps_the_log(session: Session) -> None:
    user = make_user(session, "ada")
    study.rate(user.id, "mdt-003", 4, session=session, now=NOW, fuzz=False)
    after_first = session.scalar(select(CardState).where(CardState.user_id == user.id))
    assert after_first is not None
    first_due = after_first.due
    study.rate(user.id, "mdt-003", 4, session=session, now=NOW + timedelta(minutes=10), fuzz=False)
    assert study.undo(user.id, session=session, now=NOW + timedelta(minutes=11)) == "mdt-003"
    state = session.scalar(select(CardState).where(CardState.user_id == user.id))
    assert state is not None and state.state == LEARNING and state.due == first_due and state.version == 3
    entries = log(session, user.id)
    assert len(entries) == 2 and entries[1].undone_at is not None and entries[0].undone_at is None
    study.undo(user.id, session=session, now=NOW + timedelta(minutes=12))
    view = study.study_view(user.id, DECK, session=session, now=NOW + timedelta(minutes=12))
    assert view.counts.new == 20 and view.card is not None and view.card.id == "mdt-001"
    with pytest.raises(Conflict, match="no review to undo"):
        study.undo(user.id, session=session, now=NOW)
    # The card can be rated again after undo: versions only grow.
    study.rate(user.id, "mdt-003", 3, session=session, now=NOW + timedelta(minutes=13), fuzz=False)
    assert len(log(session, user.id)) == 3


def test_same_review_key_twice_records_once(session: Session) -> None:
    user = make_user(session, "ada")
    a = study.rate(user.id, "mdt-003", 4, session=session, now=NOW, review_key="k1", fuzz=False)
    b = study.rate(user.id, "mdt-003", 4, session=session, now=NOW + timedelta(seconds=1), review_key="k1", fuzz=False)
    assert a == b and len(log(session, user.id)) == 1
    with pytest.raises(Conflict, match="already used"):
        study.rate(user.id, "mdt-004", 4, session=session, now=NOW, review_key="k1", fuzz=False)


def test_stale_version_is_refused_and_nothing_recorded(session: Session) -> None:
    user = make_user(session, "ada")
    study.rate(user.id, "mdt-003", 4, session=session, now=NOW, expected_version=0, fuzz=False)
    with pytest.raises(Conflict, match="another tab"):
        study.rate(user.id, "mdt-003", 1, session=session, now=NOW, expected_version=0, fuzz=False)
    assert len(log(session, user.id)) == 1


def test_racing_ratings_one_recorded_other_conflict(session: Session) -> None:
    """Two requests plan against the same state; the second to write loses and writes nothing."""
    user = make_user(session, "ada")

    def plan(raw: int, at: datetime) -> study.RatingPlan:
        planned = study.plan_rating(user.id, "mdt-003", raw, session=session, now=at, fuzz=False)
        assert isinstance(planned, study.RatingPlan)
        return planned

    # A new card: both plans would create the state row; the second loses on the review's
    # unique (user, card, version) constraint.
    winner, loser = plan(4, NOW), plan(3, NOW)
    study.apply_rating(winner, session=session)
    with pytest.raises(Conflict, match="another tab"):
        study.apply_rating(loser, session=session)

    # A card with a state row: the same, through the version check.
    later = NOW + timedelta(minutes=10)
    winner, loser = plan(4, later), plan(3, later)
    study.apply_rating(winner, session=session)
    with pytest.raises(Conflict, match="another tab"):
        study.apply_rating(loser, session=session)

    # A change that writes no review (bury) between the plan and the write: the review row
    # goes in, the state's version check fails, and the row is taken back.
    stale = plan(3, later + timedelta(minutes=1))
    study.bury(user.id, "mdt-003", session=session, now=later)
    with pytest.raises(Conflict, match="another tab"):
        study.apply_rating(stale, session=session)
    assert [e.version_before for e in log(session, user.id)] == [0, 1]
    state = study.card_status(user.id, "mdt-003", session=session)[1]
    assert state is not None and state.version == 3 and state.buried_until is not None


def test_bad_input(session: Session) -> None:
    user = make_user(session, "ada")
    for bad in (0, 6):
        with pytest.raises(InvalidInput):
            study.rate(user.id, "mdt-003", bad, session=session, now=NOW)
    with pytest.raises(NotFound):
        study.rate(user.id, "no-such-card", 3, session=session, now=NOW)
    with pytest.raises(NotFound):
        study.study_view(user.id, "no-such-deck", session=session, now=NOW)
    assert log(session, user.id) == []


def test_daily_new_limit_and_review_count(session: Session) -> None:
    user = make_user(session, "ada")
    preferences.save(user.id, Prefs(new_per_day=3), session=session)
    now = NOW
    for _ in range(3):
        view = study.study_view(user.id, DECK, session=session, now=now)
        assert view.card is not None and view.kind == "new"
        study.rate(user.id, view.card.id, 5, session=session, now=now, fuzz=False)  # Easy: straight to review
    view = study.study_view(user.id, DECK, session=session, now=now)
    assert view.counts.as_dict() == {"new": 0, "learning": 0, "review": 0} and view.card is None
    assert study.cards_due(user.id, session=session, now=now) == 0
    later = now + timedelta(days=9)
    view = study.study_view(user.id, DECK, session=session, now=later)
    assert view.counts.as_dict() == {"new": 3, "learning": 0, "review": 3} and view.kind == "review"
    assert study.cards_due(user.id, session=session, now=later) == 6


@pytest.mark.parametrize(
    ("zone", "day_starts"),
    [("Europe/Paris", datetime(2025, 1, 16, 3, 0, tzinfo=UTC)),
     ("America/New_York", datetime(2025, 1, 16, 9, 0, tzinfo=UTC))],
)  # fmt: skip
def test_new_day_begins_at_4am_local(session: Session, zone: str, day_starts: datetime) -> None:
    user = make_user(session, "ada")
    preferences.save(user.id, Prefs(new_per_day=2, time_zone=zone), session=session)
    before = day_starts - timedelta(minutes=30)
    for card_id in ("mdt-001", "mdt-002"):
        study.rate(user.id, card_id, 5, session=session, now=before, fuzz=False)
    assert study.study_view(user.id, DECK, session=session, now=day_starts - timedelta(minutes=1)).counts.new == 0
    assert study.study_view(user.id, DECK, session=session, now=day_starts).counts.new == 2


def test_bury_until_tomorrow_and_suspend(session: Session) -> None:
    user = make_user(session, "ada")
    study.bury(user.id, "mdt-001", session=session, now=NOW)
    study.set_suspended(user.id, "mdt-002", True, session=session, now=NOW)
    view = study.study_view(user.id, DECK, session=session, now=NOW)
    assert view.card is not None and view.card.id == "mdt-003"
    with pytest.raises(Conflict, match="suspended"):
        study.rate(user.id, "mdt-002", 4, session=session, now=NOW)
    tomorrow = datetime(2025, 1, 16, 4, 0, tzinfo=UTC)  # 4 am UTC, the student's zone
    assert study.study_view(user.id, DECK, session=session, now=tomorrow).card.id == "mdt-001"  # type: ignore[union-attr]
    study.set_suspended(user.id, "mdt-002", False, session=session, now=NOW)
    state = session.scalar(select(CardState).where(CardState.user_id == user.id, CardState.card_id == "mdt-002"))
    assert state is not None and state.state == NEW and not state.suspended
    assert session.scalar(select(func.count()).select_from(Review).where(Review.user_id == user.id)) == 0


def test_students_do_not_share_state(session: Session) -> None:
    ada, bob = make_user(session, "ada"), make_user(session, "bob")
    study.rate(ada.id, "mdt-001", 5, session=session, now=NOW, fuzz=False)
    assert study.study_view(bob.id, DECK, session=session, now=NOW).counts.new == 20
    assert study.study_view(ada.id, DECK, session=session, now=NOW).counts.new == 19
    assert study.snapshot_of(None).state == NEW and REVIEW == 2


@pytest.mark.parametrize("zone", ["UTC", "America/New_York"])
def test_due_items_give_the_queue_the_same_answer_as_the_whole_deck(session: Session, zone: str) -> None:
    """The database's pre-filter (due_items) must never change what queue.build decides."""
    from app.flashcards import queue as q

    user = make_user(session, "ada")
    prefs = Prefs(new_per_day=6, reviews_per_day=3, time_zone=zone)
    preferences.save(user.id, prefs, session=session)
    # A history with every kind of card: reviews due on different days, learning and
    # relearning cards, a suspended card, a buried one, and new cards past the day's limit.
    for i, raw in enumerate((5, 5, 4, 4, 3, 1, 5, 2)):
        study.rate(user.id, f"mdt-{i + 1:03d}", raw, session=session, now=NOW + timedelta(days=i % 3), fuzz=False)
    study.rate(user.id, "mdt-001", 1, session=session, now=NOW + timedelta(days=5), fuzz=False)  # relearning
    study.set_suspended(user.id, "mdt-002", True, session=session, now=NOW)
    study.bury(user.id, "mdt-009", session=session, now=NOW + timedelta(days=5))
    study.set_suspended(user.id, "mdt-010", True, session=session, now=NOW)  # new cards, kept out
    study.bury(user.id, "mdt-011", session=session, now=NOW + timedelta(days=5))
    dues = session.scalars(select(CardState.due).where(CardState.user_id == user.id, CardState.state == REVIEW))
    # An hour before each review falls due: due later today, not yet now.
    moments = [NOW, NOW + timedelta(days=5, minutes=5), *(due - timedelta(hours=1) for due in dues if due)]
    for now in moments:
        offset = now - NOW
        done = study.done_today(user.id, DECK, study.day_start(now, zone), session=session)
        whole = [i for i, _ in study.deck_items(user.id, DECK, session=session)]
        due = [i for i, _ in study.due_items(user.id, DECK, session=session, now=now, prefs=prefs, done=done)]
        assert len(due) < len(whole)
        assert q.build(due, done, prefs, now) == q.build(whole, done, prefs, now), offset
        assert q.waiting_learning(due, prefs, now) == q.waiting_learning(whole, prefs, now), offset
        fresh = sorted(i.position for i in whole if i.snap.state == NEW and i.available(now))
        assert sorted(i.position for i in due if i.snap.state == NEW) == fresh[: max(0, prefs.new_per_day - done.new)]
