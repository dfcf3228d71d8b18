"""A corrected answer key re-marks the attempts scored under the old one, with a record the student sees.

The server first holds Module 202 as its source printed it (question 23 keyed D), students sit the
quiz, then the corrected content is synced: exactly what happens when a course upgrades.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.content.errata import as_in_source
from app.content.models import ContentTree, Erratum, Quiz
from app.content.records import Quiz as QuizRow
from app.content.sync import sync_tree
from app.quizzes import attempts, scoring, service
from app.quizzes.models import QuizAnswer, QuizAttempt, QuizRescore
from app.quizzes.rescore import remark
from tests.factories import api_token, make_user, sign_in

Q23 = "m202-q23"
T_OLD, T_SIT, T_NEW = (datetime(2026, 3, d, 9, 0, tzinfo=UTC) for d in (1, 2, 3))


def _with_quiz(tree: ContentTree, quiz: Quiz) -> ContentTree:
    return tree.model_copy(update={"quizzes": [quiz if q.id == quiz.id else q for q in tree.quizzes]})


def _m202(tree: ContentTree) -> Quiz:
    return next(q for q in tree.quizzes if q.id == "module-202")


@pytest.fixture
def trees(content_tree: ContentTree) -> tuple[ContentTree, ContentTree]:
    """(Module 202 as the source keyed it, the corrected content) for question 23."""
    quiz = _m202(content_tree)
    q23 = next(q for q in quiz.questions if q.id == Q23)
    assert q23.answer == "C" and any(e.field == "answer" and e.source == "D" for e in q23.errata)
    old = quiz.model_copy(update={"questions": [as_in_source(q) if q.id == Q23 else q for q in quiz.questions]})
    return _with_quiz(content_tree, old), content_tree


def _sit(session: Session, user_id: int, choices: dict[str, str]) -> QuizAttempt:
    attempt, _ = attempts.start_attempt("module-202", user_id, session=session, now=T_SIT)
    for qid, choice in choices.items():
        attempts.save_answer(attempt.id, user_id, qid, choice, session=session, now=T_SIT)
    attempts.submit(attempt.id, user_id, session=session, now=T_SIT)
    session.commit()
    return attempt


def test_a_q23_attempt_that_chose_c_gains_the_point(session: Session, trees: tuple[ContentTree, ContentTree]) -> None:
    old, new = trees
    sync_tree(old, session=session, now=T_OLD)
    session.commit()
    keyed = {q.id: q.answer for q in _m202(old).questions}
    assert keyed[Q23] == "D"
    right_but_marked_wrong = make_user(session, "chose-c")
    keyed_choice = make_user(session, "chose-d")
    others = {qid: key for qid, key in list(keyed.items())[:10] if qid != Q23}  # 10 more right answers
    a = _sit(session, right_but_marked_wrong.id, {**others, Q23: "C"})
    b = _sit(session, keyed_choice.id, {**others, Q23: "D"})
    assert (a.score, b.score) == (10, 11)

    report = sync_tree(new, session=session, now=T_NEW)
    session.commit()

    assert report.rescored == {"quiz attempt": 2}
    session.refresh(a)
    session.refresh(b)
    assert (a.score, b.score) == (11, 10)
    marks = {m["id"]: m for m in a.result["marks"]}  # type: ignore[index]
    assert marks[Q23] == {"id": Q23, "choice": "C", "answer": "C", "correct": True}
    answer = session.scalars(select(QuizAnswer).where(QuizAnswer.attempt_id == a.id, QuizAnswer.question_id == Q23))
    assert answer.one().correct is True
    rows = session.scalars(select(QuizRescore).order_by(QuizRescore.attempt_id)).all()
    assert [(r.attempt_id, r.question_id, r.old_answer, r.new_answer, r.choice, r.old_score, r.new_score)
            for r in rows] == [(a.id, Q23, "D", "C", "C", 10, 11), (b.id, Q23, "D", "C", "D", 11, 10)]  # fmt: skip
    assert all("0.84" in r.note_html and r.rescored_at == T_NEW for r in rows)

    # A second sync of the same content changes nothing more.
    assert sync_tree(new, session=session, now=T_NEW).rescored == {}
    assert len(session.scalars(select(QuizRescore)).all()) == 2


def test_the_student_sees_why_on_the_result_page_and_in_the_api(
    client: TestClient, session: Session, trees: tuple[ContentTree, ContentTree]
) -> None:
    old, new = trees
    sync_tree(old, session=session, now=T_OLD)
    user = make_user(session, "sees-why")
    attempt = _sit(session, user.id, {Q23: "C"})
    sync_tree(new, session=session, now=T_NEW)
    session.commit()

    sign_in(client, "sees-why")
    page = client.get(f"/quizzes/attempts/{attempt.id}/result").text
    assert 'data-testid="rescores"' in page
    number = attempt.question_ids.index(Q23) + 1
    # Said in the letters the student saw (A, B, C, D down the shuffled order), not the authored ones.
    shown = dict(
        zip(scoring.option_order("ABCD", seed=attempt.seed, question_id=Q23, shuffle=True), "ABCD", strict=True)
    )
    old_label, new_label = shown["D"], shown["C"]
    assert (
        f'the key of <a href="#review-{number}">question {number}</a> was corrected from {old_label} to {new_label}; '
        f"you chose {new_label}." in page
    )
    assert "Score 0/25 → <strong>1/25</strong>." in page
    assert "Corrected:" in page and "0.84" in page
    assert '<div class="erratum" role="note" data-field="answer">' in page  # beside the explanation too

    body = client.get(f"/api/v1/attempts/{attempt.id}", headers=api_token(client, "sees-why")).json()
    result = body["result"]
    assert result["score"] == 1
    assert result["rescores"] == [
        {"question_id": Q23, "old_answer": "D", "new_answer": "C", "old_score": 0, "new_score": 1, "max_score": 25,
         "rescored_at": "2026-03-03T09:00:00Z"}
    ]  # fmt: skip
    q = next(i for i in result["questions"] if i["id"] == Q23)
    assert q["answer"] == "C" and q["correct"] is True and "**Corrected:**" in q["explanation"]


def test_a_hidden_key_stays_hidden_in_the_record(session: Session, trees: tuple[ContentTree, ContentTree]) -> None:
    old, new = trees
    hidden = {"show_answers": "never"}
    old = _with_quiz(old, _m202(old).model_copy(update=hidden))
    new = _with_quiz(new, _m202(new).model_copy(update=hidden))
    sync_tree(old, session=session, now=T_OLD)
    user = make_user(session, "hidden-key")
    attempt = _sit(session, user.id, {Q23: "C"})
    sync_tree(new, session=session, now=T_NEW)
    page = service.result_page(attempt, session=session, now=T_NEW)
    assert not page.key_shown
    [x] = page.rescores
    assert (x.question, x.old_answer, x.new_answer, x.note_html) == (None, "", "", "")
    assert (x.old_score, x.new_score) == (0, 1)


def test_remark_uses_the_stored_choices_and_the_new_keys(session: Session) -> None:
    quiz = session.get(QuizRow, "module-202")
    assert quiz is not None
    result = {
        "score": 1,
        "marks": [
            {"id": "m202-q01", "choice": "A", "answer": "A", "correct": True},
            {"id": "m202-q02", "choice": "B", "answer": "C", "correct": False},
            {"id": "m202-q03", "choice": None, "answer": "D", "correct": False},
        ],
    }
    sections = {"m202-q01": None, "m202-q02": None, "m202-q03": None}
    again = remark(result, {"m202-q02": "B", "m202-q03": "A"}, quiz=quiz, sections=sections)
    assert [(m.id, m.answer, m.correct) for m in again.marks] == [
        ("m202-q01", "A", True), ("m202-q02", "B", True), ("m202-q03", "A", False)
    ]  # fmt: skip
    assert again.score == 2 and again.max_score == 3


def test_an_erratum_note_is_required_to_say_what_changed() -> None:
    with pytest.raises(ValueError):
        Erratum.model_validate({"field": "answer", "source": "D"})
