"""The attempt service on both backends, with a controllable clock: start, save, deadline, submit."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.accounts.models import Role
from app.content.records import Question, Quiz
from app.errors import InvalidInput, NotFound
from app.quizzes import attempts, service
from app.quizzes.attempts import AttemptClosed, DeadlinePassed
from app.quizzes.models import QuizAnswer
from tests.factories import make_user
from tests.quizzes.conftest import T0, wrong


def answer_rows(session: Session, attempt_id: int) -> int:
    return int(session.scalar(select(func.count()).where(QuizAnswer.attempt_id == attempt_id)) or 0)


def test_start_records_start_and_deadline_and_orders_by_section(session: Session) -> None:
    user = make_user(session, "ada")
    attempt, created = attempts.start_attempt("module-202", user.id, session=session, now=T0)
    assert created
    assert attempt.started_at == T0 and attempt.deadline == T0 + timedelta(minutes=60)
    assert len(attempt.question_ids) == 25 and attempt.question_ids[0] == "m202-q01"
    again, created_again = attempts.start_attempt("module-202", user.id, session=session, now=T0 + timedelta(minutes=5))
    assert (again.id, created_again) == (attempt.id, False)
    untimed, _ = attempts.start_attempt("ch35-quiz", user.id, session=session, now=T0)
    assert untimed.deadline is None and len(untimed.question_ids) == 15
    assert service.quizzes_open(user.id, session=session, now=T0) == 2
    assert service.quizzes_open(user.id, session=session, now=T0 + timedelta(hours=2)) == 1
    with pytest.raises(NotFound):
        attempts.start_attempt("no-such-quiz", user.id, session=session, now=T0)


def test_saving_again_replaces_the_answer(session: Session, key: dict[str, str]) -> None:
    user = make_user(session, "ben")
    attempt, _ = attempts.start_attempt("module-202", user.id, session=session, now=T0)
    attempts.save_answer(attempt.id, user.id, "m202-q01", "A", session=session, now=T0)
    attempts.save_answer(attempt.id, user.id, "m202-q01", "C", session=session, now=T0 + timedelta(seconds=3))
    assert answer_rows(session, attempt.id) == 1
    assert attempts.choices_of(attempt, session=session) == {"m202-q01": "C"}


def test_unknown_question_or_option_is_refused_with_the_reason(session: Session) -> None:
    user = make_user(session, "cy")
    attempt, _ = attempts.start_attempt("module-202", user.id, session=session, now=T0)
    with pytest.raises(InvalidInput, match="'ch35-q01' is not part of this attempt"):
        attempts.save_answer(attempt.id, user.id, "ch35-q01", "A", session=session, now=T0)
    with pytest.raises(InvalidInput, match="'E' is not an option of question 'm202-q01'; choose one of A, B, C, D"):
        attempts.save_answer(attempt.id, user.id, "m202-q01", "E", session=session, now=T0)


def test_answer_after_the_deadline_is_refused_and_the_attempt_closes(session: Session, key: dict[str, str]) -> None:
    user = make_user(session, "dee")
    attempt, _ = attempts.start_attempt("module-202", user.id, session=session, now=T0)
    attempts.save_answer(
        attempt.id, user.id, "m202-q01", key["m202-q01"], session=session, now=T0 + timedelta(minutes=59)
    )
    late = T0 + timedelta(minutes=60)
    with pytest.raises(DeadlinePassed):
        attempts.save_answer(attempt.id, user.id, "m202-q02", key["m202-q02"], session=session, now=late)
    assert answer_rows(session, attempt.id) == 1
    # The next request submits it with what was saved, as of the deadline.
    closed = attempts.get_attempt(attempt.id, user.id, session=session, now=late + timedelta(hours=3))
    assert not closed.is_open and closed.auto_submitted
    assert closed.submitted_at == attempt.deadline
    assert (closed.score, closed.max_score, closed.passed) == (1, 25, False)
    with pytest.raises(AttemptClosed):
        attempts.save_answer(attempt.id, user.id, "m202-q02", "A", session=session, now=late)


def test_sweep_submits_expired_attempts_only(session: Session) -> None:
    a, b = make_user(session, "eve"), make_user(session, "fay")
    expiring, _ = attempts.start_attempt("module-202", a.id, session=session, now=T0)
    fresh, _ = attempts.start_attempt("module-202", b.id, session=session, now=T0 + timedelta(minutes=30))
    untimed, _ = attempts.start_attempt("ch35-quiz", b.id, session=session, now=T0)
    assert attempts.sweep_expired(session=session, now=T0 + timedelta(minutes=61)) == 1
    assert not expiring.is_open and expiring.auto_submitted and expiring.score == 0
    assert fresh.is_open and untimed.is_open
    assert attempts.sweep_expired(session=session, now=T0 + timedelta(minutes=61)) == 0


def test_submit_twice_returns_the_first_result(session: Session, key: dict[str, str]) -> None:
    user = make_user(session, "gus")
    attempt, _ = attempts.start_attempt("module-202", user.id, session=session, now=T0)
    for qid in attempt.question_ids:
        attempts.save_answer(attempt.id, user.id, qid, key[qid], session=session, now=T0)
    first = attempts.submit(attempt.id, user.id, session=session, now=T0 + timedelta(minutes=10))
    snapshot = dict(first.result or {})
    assert snapshot["score"] == 25 and snapshot["passed"] is True
    assert snapshot["guide"]["level"] == "Expert level"
    assert [s["score"] for s in snapshot["sections"]] == [7, 5, 4, 5, 4]
    # Even if the key changes later, the grade given stays.
    q = session.get(Question, "m202-q01")
    assert q is not None
    q.answer = wrong(q, q.answer)
    second = attempts.submit(attempt.id, user.id, session=session, now=T0 + timedelta(minutes=20))
    assert second.result == snapshot and second.submitted_at == T0 + timedelta(minutes=10)
    assert not second.auto_submitted


def test_another_students_attempt_is_not_found(session: Session) -> None:
    owner, other = make_user(session, "hal"), make_user(session, "ivy")
    attempt, _ = attempts.start_attempt("module-202", owner.id, session=session, now=T0)
    for call in (
        lambda: attempts.get_attempt(attempt.id, other.id, session=session, now=T0),
        lambda: attempts.save_answer(attempt.id, other.id, "m202-q01", "A", session=session, now=T0),
        lambda: attempts.submit(attempt.id, other.id, session=session, now=T0),
        lambda: attempts.get_attempt(999999, owner.id, session=session, now=T0),
    ):
        with pytest.raises(NotFound):
            call()
    assert answer_rows(session, attempt.id) == 0 and attempt.is_open


def test_shuffled_options_are_stable_within_an_attempt(session: Session) -> None:
    user = make_user(session, "jo")
    quiz = session.get(Quiz, "module-202")
    assert quiz is not None
    quiz.shuffle_options = True
    orders = []
    for minute in range(6):
        attempt, _ = attempts.start_attempt("module-202", user.id, session=session, now=T0 + timedelta(hours=minute))
        page = service.attempt_page(attempt, session=session, now=T0)
        again = service.attempt_page(attempt, session=session, now=T0 + timedelta(minutes=1))
        keys = [tuple(o.key for o in q.options) for q in page.questions]
        assert keys == [tuple(o.key for o in q.options) for q in again.questions]
        orders.append(keys)
        attempts.submit(attempt.id, user.id, session=session, now=T0 + timedelta(hours=minute, minutes=1))
    assert len({tuple(o) for o in orders}) > 1
    assert any(k != tuple(sorted(k)) for k in orders[0])


def test_wrong_answers_name_flashcards_to_review(session: Session, key: dict[str, str]) -> None:
    user = make_user(session, "kim")
    for other in session.scalars(select(Question).where(Question.quiz_id == "module-202")):
        other.card_ids = []  # only the three below name cards in this test
    for qid, cards in (("m202-q01", ["mdt-001", "mdt-002"]), ("m202-q02", ["mdt-003"]), ("m202-q03", ["mdt-002"])):
        q = session.get(Question, qid)
        assert q is not None
        q.card_ids = cards
    attempt, _ = attempts.start_attempt("module-202", user.id, session=session, now=T0)
    q1 = session.get(Question, "m202-q01")
    attempts.save_answer(attempt.id, user.id, "m202-q01", wrong(q1, key["m202-q01"]), session=session, now=T0)
    attempts.save_answer(attempt.id, user.id, "m202-q02", key["m202-q02"], session=session, now=T0)
    assert service.cards_to_review(user.id, session=session) == []
    attempts.submit(attempt.id, user.id, session=session, now=T0 + timedelta(minutes=1))
    due = service.cards_to_review(user.id, session=session)
    # q01 wrong, q03 blank: their cards; q02 right: not its card.
    assert sorted(c.card_id for c in due) == ["mdt-001", "mdt-002"]
    assert {c.attempt_id for c in due} == {attempt.id}
    assert service.cards_to_review(user.id, session=session, since=T0 + timedelta(minutes=5)) == []


def test_history_and_best(session: Session, key: dict[str, str]) -> None:
    user = make_user(session, "lee", role=Role.student)
    first, _ = attempts.start_attempt("ch35-quiz", user.id, session=session, now=T0)
    attempts.submit(first.id, user.id, session=session, now=T0 + timedelta(minutes=1))
    second, _ = attempts.start_attempt("ch35-quiz", user.id, session=session, now=T0 + timedelta(minutes=2))
    rows = service.history("ch35-quiz", user.id, session=session, now=T0 + timedelta(minutes=3))
    assert [r.id for r in rows] == [second.id, first.id]
    assert first.result is not None and first.result["passed"] is None and first.result["guide"]["level"] == "Beginning"
