"""A quiz's attempt policy and due date: limits, when the key is shown, late marks, first-attempt statistics."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from app.accounts.models import Role
from app.content.records import Quiz
from app.db import utcnow
from app.quizzes import policy, service
from app.quizzes.models import QuizAttempt
from tests.factories import api_token, make_attempt, make_user, sign_in

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


def test_key_visibility_and_late_are_pure() -> None:
    due = T0 + timedelta(days=1)
    assert policy.key_visible("at_once", None, T0)
    assert not policy.key_visible("never", due, due + timedelta(days=9))
    assert not policy.key_visible("after_due", due, T0) and policy.key_visible("after_due", due, due)
    assert not policy.key_visible("after_due", None, T0)
    assert policy.is_late(due + timedelta(seconds=1), due) and not policy.is_late(due, due)
    assert not policy.is_late(T0, None) and not policy.is_late(None, due)
    assert policy.attempts_left(None, 5) is None and policy.attempts_left(2, 3) == 0


def set_policy(session: Session, quiz_id: str, **values: object) -> None:
    quiz = session.get(Quiz, quiz_id)
    assert quiz is not None
    for key, value in values.items():
        setattr(quiz, key, value)
    session.commit()


def test_max_attempts_is_enforced_on_the_api_and_the_page(client: TestClient, session: Session) -> None:
    make_user(session, "pol-a")
    set_policy(session, "ch35-quiz", max_attempts=1)
    headers = api_token(client, "pol-a")
    attempt = client.post("/api/v1/quizzes/ch35-quiz/attempts", headers=headers).json()
    assert client.post("/api/v1/quizzes/ch35-quiz/attempts", headers=headers).status_code == 200  # resumes it
    client.post(f"/api/v1/attempts/{attempt['id']}/submit", headers=headers)
    refused = client.post("/api/v1/quizzes/ch35-quiz/attempts", headers=headers)
    assert refused.status_code == 409
    assert refused.json() == {"detail": "This quiz allows 1 attempt(s) and you have used them all."}
    sign_in(client, "pol-a")
    page = client.get("/quizzes/ch35-quiz").text
    assert "You have used all 1 attempts" in page and "Start a new attempt" not in page


@pytest.mark.parametrize("show", ["never", "after_due"])
def test_a_hidden_key_stays_hidden_after_submitting(client: TestClient, session: Session, show: str) -> None:
    user = make_user(session, f"pol-{show}")
    due = utcnow() + timedelta(days=1)
    set_policy(session, "ch35-quiz", show_answers=show, due_at=due)
    headers = api_token(client, user.username)
    attempt = client.post("/api/v1/quizzes/ch35-quiz/attempts", headers=headers).json()
    result = client.post(f"/api/v1/attempts/{attempt['id']}/submit", headers=headers).json()
    assert result["key_shown"] is False and result["score"] == 0
    assert {(q["answer"], q["correct"], q["explanation"]) for q in result["questions"]} == {(None, None, None)}
    again = client.get(f"/api/v1/attempts/{attempt['id']}", headers=headers).json()["result"]
    assert {q["answer"] for q in again["questions"]} == {None}
    sign_in(client, user.username)
    page = client.get(f"/quizzes/attempts/{attempt['id']}/result").text
    assert 'data-testid="key-hidden"' in page and "right answer" not in page and "Explanation" not in page
    if show == "after_due":  # once the due date has passed, the same attempt shows its key
        submitted = session.get(QuizAttempt, attempt["id"], populate_existing=True)
        assert submitted is not None and submitted.submitted_at is not None
        set_policy(session, "ch35-quiz", due_at=submitted.submitted_at)
        shown = client.get(f"/api/v1/attempts/{attempt['id']}", headers=headers).json()["result"]
        assert shown["key_shown"] is True and all(q["answer"] for q in shown["questions"])
        assert shown["late"] is False  # submitted before the due date


def test_due_date_is_shown_and_a_late_attempt_is_marked(client: TestClient, session: Session) -> None:
    user = make_user(session, "pol-late")
    set_policy(session, "ch35-quiz", due_at=T0)
    make_attempt(session, user.id, "ch35-quiz", right=3, started_at=T0, submitted_at=T0 + timedelta(hours=2))
    assert "due 02 Mar 2026, 09:00 UTC" in client.get("/quizzes").text
    sign_in(client, "pol-late")
    page = client.get("/quizzes/ch35-quiz").text
    assert "02 Mar 2026, 09:00 UTC" in page and "an attempt now is marked late" in page
    assert 'badge-late">late' in page


def test_statistics_count_first_attempts_unless_asked_for_all(client: TestClient, session: Session) -> None:
    for n, (first, second) in enumerate(((2, 15), (5, 15))):
        user = make_user(session, f"pol-s{n}")
        make_attempt(session, user.id, "ch35-quiz", right=first, started_at=T0, submitted_at=T0)
        make_attempt(session, user.id, "ch35-quiz", right=second, started_at=T0 + timedelta(hours=1),
                     submitted_at=T0 + timedelta(hours=1))  # fmt: skip
    firsts = service.quiz_statistics("ch35-quiz", session=session, now=utcnow())
    assert firsts.stats.attempts == 2 and firsts.stats.mean == 3.5
    every = service.quiz_statistics("ch35-quiz", session=session, now=utcnow(), all_attempts=True)
    assert every.stats.attempts == 4 and every.stats.mean == 9.25
    make_user(session, "pol-prof", role=Role.admin)
    sign_in(client, "pol-prof")
    page = client.get("/quizzes/ch35-quiz/statistics").text
    assert "each student&#39;s first submitted attempt" in page or "each student's first submitted attempt" in page
    first_q = firsts.questions[firsts.stats.items[0].id]
    assert first_q.prompt_html in page  # the question's text next to its figures
    for option in first_q.options:
        assert option["html"] in page
    assert 'href="/quizzes/ch35-quiz/statistics?attempts=all"' in page
    assert '<dd data-testid="attempts">4</dd>' in client.get("/quizzes/ch35-quiz/statistics?attempts=all").text
