"""The exercise progress service on both databases: attempts, solving, solutions, notes, done marks."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.errors import Conflict, InvalidInput, NotFound
from app.exercises import progress
from app.exercises.models import PartAnswer, PartProgress
from tests.factories import make_user

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


def test_a_wrong_then_right_answer_is_recorded(session: Session) -> None:
    ada = make_user(session, "ada")
    wrong = progress.answer_part("ex-26-1", "a-global-batch", ada.id, "2000", session=session, now=T0)
    assert not wrong.correct and wrong.part.attempts == 1 and not wrong.part.solved
    assert wrong.part.value is None and wrong.part.explanation_html is None
    right = progress.answer_part("ex-26-1", "a-global-batch", ada.id, "2,048", session=session, now=T0 + timedelta(1))
    assert right.correct and right.part.solved and right.part.attempts == 2
    assert right.part.value == 2048 and "8 \\times 256" in (right.part.explanation or "")
    log = session.scalars(select(PartAnswer).where(PartAnswer.user_id == ada.id).order_by(PartAnswer.id)).all()
    assert [(a.answer, a.correct) for a in log] == [("2000", False), ("2,048", True)]
    # Once solved, answers are checked but no longer counted.
    again = progress.answer_part("ex-26-1", "a-global-batch", ada.id, "7", session=session, now=T0 + timedelta(2))
    assert not again.correct and again.part.solved and again.part.attempts == 2


def test_percent_parts_accept_the_fraction(session: Session) -> None:
    ada = make_user(session, "ada")
    assert progress.answer_part("ex-26-1", "b-fraction", ada.id, "0.0146", session=session, now=T0).correct


def test_a_malformed_number_records_nothing(session: Session) -> None:
    ada = make_user(session, "ada")
    with pytest.raises(InvalidInput, match="is not a number"):
        progress.answer_part("ex-26-1", "a-global-batch", ada.id, "two thousand", session=session, now=T0)
    view = progress.part_view(
        progress.get_exercise("ex-26-1", session=session), "a-global-batch", ada.id, session=session
    )
    assert view.attempts == 0


def test_unknown_exercise_or_part(session: Session) -> None:
    ada = make_user(session, "ada")
    with pytest.raises(NotFound):
        progress.answer_part("ex-nope", "a", ada.id, "1", session=session, now=T0)
    with pytest.raises(NotFound, match="no part 'zz'"):
        progress.answer_part("ex-26-1", "zz", ada.id, "1", session=session, now=T0)


def test_giving_up_opens_the_part_without_solving_it(session: Session) -> None:
    ada = make_user(session, "ada")
    shown = progress.give_up_part("ex-35-9", "m4", ada.id, session=session, now=T0)
    assert shown.given_up and not shown.solved and shown.value == 80
    after = progress.answer_part("ex-35-9", "m4", ada.id, "80%", session=session, now=T0)
    assert after.correct and not after.part.solved and after.part.attempts == 0
    assert progress.exercise_progress(ada.id, session=session)["ex-35-9"].solved == 0
    assert progress.exercise_progress(ada.id, session=session)["ex-35-9"].gave_up == 1


def test_the_hint_comes_after_two_wrong_answers(session: Session) -> None:
    ada = make_user(session, "ada")
    exercise = progress.get_exercise("ex-26-1", session=session)
    with pytest.raises(Conflict, match="after 2 wrong answers; try 2 more times first"):
        progress.part_hint(exercise, "a-sync-steps", ada.id, session=session)
    first = progress.answer_part("ex-26-1", "a-sync-steps", ada.id, "600", session=session, now=T0)
    assert first.part.hint is None and first.part.hint_html is None
    with pytest.raises(Conflict, match="try 1 more time first"):
        progress.part_hint(exercise, "a-sync-steps", ada.id, session=session)
    second = progress.answer_part("ex-26-1", "a-sync-steps", ada.id, "650", session=session, now=T0)
    assert second.part.hint and "global batch" in second.part.hint and second.part.hint_html
    assert second.part.value is None and second.part.explanation is None
    assert progress.part_hint(exercise, "a-sync-steps", ada.id, session=session).hint_html
    # Solved: the worked answer replaces the hint.
    progress.answer_part("ex-26-1", "a-sync-steps", ada.id, "625", session=session, now=T0)
    with pytest.raises(Conflict, match="finished"):
        progress.part_hint(exercise, "a-sync-steps", ada.id, session=session)


def test_a_part_given_up_stays_given_up(session: Session) -> None:
    ada = make_user(session, "ada")
    progress.answer_part("ex-26-1", "a-global-batch", ada.id, "2000", session=session, now=T0)
    gave_up = progress.give_up_part("ex-26-1", "a-global-batch", ada.id, session=session, now=T0 + timedelta(1))
    assert gave_up.given_up and gave_up.standing.value == "gave up" and gave_up.value == 2048
    right = progress.answer_part("ex-26-1", "a-global-batch", ada.id, "2048", session=session, now=T0 + timedelta(2))
    assert right.correct and right.part.given_up and not right.part.solved and right.part.attempts == 1
    state = progress.exercise_progress(ada.id, session=session)["ex-26-1"]
    assert (state.solved, state.gave_up) == (0, 1)
    assert progress.solved_count(ada.id, session=session) == 0
    assert progress.recent_solved_parts(ada.id, session=session) == []
    # Giving up on a solved part changes nothing.
    progress.answer_part("ex-26-1", "a-sync-steps", ada.id, "625", session=session, now=T0)
    kept = progress.give_up_part("ex-26-1", "a-sync-steps", ada.id, session=session, now=T0 + timedelta(3))
    assert kept.solved and not kept.given_up


def test_solved_after_giving_up_does_not_count_in_the_totals(session: Session) -> None:
    # As a re-marking could leave it: a solved time later than the give-up.
    ada = make_user(session, "ada")
    progress.give_up_part("ex-26-1", "a-global-batch", ada.id, session=session, now=T0)
    row = session.scalars(select(PartProgress).where(PartProgress.user_id == ada.id)).one()
    row.solved_at = T0 + timedelta(hours=1)
    session.flush()
    assert progress.exercise_progress(ada.id, session=session)["ex-26-1"].solved == 0
    assert progress.solved_count(ada.id, session=session) == 0
    row.solved_at = T0 - timedelta(hours=1)  # right before giving up: solved
    session.flush()
    assert progress.exercise_progress(ada.id, session=session)["ex-26-1"].solved == 1
    assert progress.solved_count(ada.id, session=session) == 1


def test_progress_is_per_student(session: Session) -> None:
    ada, bob = make_user(session, "ada"), make_user(session, "bob")
    progress.answer_part("ex-35-9", "m1", ada.id, "50", session=session, now=T0)
    progress.answer_part("ex-35-9", "m2", ada.id, "2/3", session=session, now=T0 + timedelta(minutes=1))
    states = progress.exercise_progress(ada.id, session=session)
    assert (states["ex-35-9"].solved, states["ex-35-9"].total) == (2, 4)
    assert progress.exercise_progress(bob.id, session=session)["ex-35-9"].solved == 0
    views = progress.part_views(progress.get_exercise("ex-35-9", session=session), bob.id, session=session)
    assert not any(v.open for v in views) and all(v.value is None for v in views)


def test_recent_solved_parts_for_the_dashboard(session: Session) -> None:
    ada = make_user(session, "ada")
    progress.answer_part("ex-35-9", "m1", ada.id, "50", session=session, now=T0)
    progress.answer_part("ex-26-6", "b-n4", ada.id, "27", session=session, now=T0 + timedelta(minutes=1))
    progress.answer_part("ex-26-6", "b-n4", ada.id, "28", session=session, now=T0 + timedelta(minutes=2))
    recent = progress.recent_solved_parts(ada.id, session=session, limit=5)
    assert [(r.exercise_id, r.part_id, r.number) for r in recent] == [
        ("ex-26-6", "b-n4", "26.6"),
        ("ex-35-9", "m1", "35.9"),
    ]
    assert recent[0].solved_at == T0 + timedelta(minutes=2) and recent[0].set_id == "ch26-exercises"
    assert len(progress.recent_solved_parts(ada.id, session=session, limit=1)) == 1
    assert progress.solved_count(ada.id, session=session) == 2


def test_notes_and_done(session: Session) -> None:
    ada, bob = make_user(session, "ada"), make_user(session, "bob")
    progress.save_notes("ex-26-5", ada.id, "BERT: DDP.", session=session, now=T0)
    progress.set_done("ex-26-5", ada.id, True, session=session, now=T0)
    note = progress.get_note("ex-26-5", ada.id, session=session)
    assert note is not None and note.notes == "BERT: DDP." and note.done_at == T0
    assert progress.get_note("ex-26-5", bob.id, session=session) is None
    assert progress.exercise_progress(ada.id, session=session)["ex-26-5"].done
    progress.set_done("ex-26-5", ada.id, False, session=session, now=T0)
    assert not progress.exercise_progress(ada.id, session=session)["ex-26-5"].done
    with pytest.raises(InvalidInput, match="at most"):
        progress.save_notes("ex-26-5", ada.id, "x" * (progress.NOTES_MAX + 1), session=session, now=T0)
    with pytest.raises(NotFound):
        progress.set_done("ex-nope", ada.id, True, session=session, now=T0)
