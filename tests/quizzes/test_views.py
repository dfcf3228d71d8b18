"""Quiz pages in-process on both backends: taking an attempt with htmx partials, result, history, statistics."""

from __future__ import annotations

import json
import re
from datetime import timedelta

from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.accounts.models import Role
from app.content.records import Question
from app.db import utcnow
from app.quizzes import service
from app.quizzes.models import QuizAttempt
from tests.factories import api_token, csrf_token, make_user, sign_in
from tests.markup import numbers_table

HX = {"HX-Request": "true"}


def start(client: TestClient, quiz: str = "module-202") -> int:
    response = client.post(f"/quizzes/{quiz}/attempts", data={"csrf_token": csrf_token(client)}, follow_redirects=False)
    assert response.status_code == 303, response.text
    match = re.fullmatch(r"/quizzes/attempts/(\d+)", response.headers["location"])
    assert match
    return int(match.group(1))


def save(client: TestClient, attempt_id: int, qid: str, choice: str, q: int = 1) -> object:
    return client.post(
        f"/quizzes/attempts/{attempt_id}/answers/{qid}",
        data={"choice": choice, "q": str(q)},
        headers={**HX, "X-CSRF-Token": csrf_token(client)},
    )


def test_intro_needs_sign_in_to_start(client: TestClient) -> None:
    page = client.get("/quizzes/module-202")
    assert "Sign in to take this quiz" in page.text
    assert client.get("/quizzes/attempts/1", follow_redirects=False).headers["location"].startswith("/signin")


def test_take_an_attempt_with_htmx(client: TestClient, session: Session, key: dict[str, str]) -> None:
    make_user(session, "web-a")
    sign_in(client, "web-a")
    assert "Start the quiz" in client.get("/quizzes/module-202").text
    attempt_id = start(client)
    page = client.get(f"/quizzes/attempts/{attempt_id}")
    assert page.status_code == 200 and page.headers["cache-control"] == "no-store"
    assert "<html" in page.text and 'data-countdown data-seconds-left="' in page.text
    assert "Question 1 of 25 · Fundamentals" in page.text
    assert "/static/js/quizzes.js" in page.text and "/static/css/quizzes.css" in page.text
    assert "<strong>0</strong> of 25 answered" in page.text

    partial = client.get(f"/quizzes/attempts/{attempt_id}?q=8", headers=HX)
    assert "<html" not in partial.text and 'id="workspace"' in partial.text
    assert "Question 8 of 25 · Ray and Frameworks" in partial.text
    assert 'aria-current="step"' in partial.text and "data-countdown" not in partial.text

    saved = save(client, attempt_id, "m202-q08", key["m202-q08"], 8)
    assert saved.status_code == 200  # type: ignore[attr-defined]
    text = saved.text  # type: ignore[attr-defined]
    assert text.strip().startswith('<nav id="overview"') and "<strong>1</strong> of 25 answered" in text
    assert 'aria-label="Question 8, answered"' in text and "Saved." in text

    # A reload (or another device) shows the saved choice.
    again = client.get(f"/quizzes/attempts/{attempt_id}?q=8")
    assert f'value="{key["m202-q08"]}" checked' in again.text
    assert "Resume your attempt" in client.get("/quizzes/module-202").text
    assert start(client) == attempt_id

    confirm = client.get(f"/quizzes/attempts/{attempt_id}/finish", headers=HX)
    assert "You have not answered 24 of 25 questions" in confirm.text
    assert "Question 1</a>" in confirm.text and "Question 8</a>" not in confirm.text

    submitted = client.post(
        f"/quizzes/attempts/{attempt_id}/submit", data={"csrf_token": csrf_token(client)}, follow_redirects=False
    )
    assert submitted.headers["location"] == f"/quizzes/attempts/{attempt_id}/result"
    result = client.get(f"/quizzes/attempts/{attempt_id}/result")
    assert '<p class="big-number" data-testid="score">1/25</p>' in result.text
    assert "4.0% correct" in result.text and "Not passed" in result.text and "pass mark 20/25" in result.text
    assert "Need more study" in result.text and "Revisit lecture notes and labs" in result.text
    assert "Fundamentals</td><td>0/7</td>" in result.text and "Ray and Frameworks</td><td>1/5</td>" in result.text
    assert result.text.count('class="review ') == 25 and result.text.count("Not answered") == 24
    q1 = session.get(Question, "m202-q01")
    assert q1 is not None and q1.explanation_html[:80] in result.text
    # The attempt is closed: its pages lead to the result, and answers are refused.
    assert client.get(f"/quizzes/attempts/{attempt_id}", follow_redirects=False).headers["location"].endswith("/result")
    late = save(client, attempt_id, "m202-q01", "A")
    assert late.status_code == 409 and late.headers["hx-redirect"].endswith("/result")  # type: ignore[attr-defined]

    intro = client.get("/quizzes/module-202").text
    assert "Your attempts" in intro and "1/25 (4.0%)" in intro and "Start a new attempt" in intro


def test_save_without_htmx_redirects_to_the_next_question(client: TestClient, session: Session) -> None:
    make_user(session, "web-b")
    sign_in(client, "web-b")
    attempt_id = start(client)
    response = client.post(
        f"/quizzes/attempts/{attempt_id}/answers/m202-q03",
        data={"choice": "B", "q": "3", "csrf_token": csrf_token(client)},
        follow_redirects=False,
    )
    assert response.status_code == 303 and response.headers["location"] == f"/quizzes/attempts/{attempt_id}?q=4"
    bad = save(client, attempt_id, "m202-q03", "Q")
    assert bad.status_code == 422 and "not an option" in bad.text  # type: ignore[attr-defined]


def test_expired_attempt_opens_as_its_result(client: TestClient, session: Session, key: dict[str, str]) -> None:
    make_user(session, "web-c")
    sign_in(client, "web-c")
    attempt_id = start(client)
    save(client, attempt_id, "m202-q01", key["m202-q01"])
    row = session.get(QuizAttempt, attempt_id)
    assert row is not None
    row.deadline = utcnow() - timedelta(seconds=1)
    session.commit()
    response = client.get(f"/quizzes/attempts/{attempt_id}", follow_redirects=False)
    assert response.headers["location"] == f"/quizzes/attempts/{attempt_id}/result"
    assert client.get(f"/quizzes/attempts/{attempt_id}", headers=HX).headers["hx-redirect"].endswith("/result")
    result = client.get(f"/quizzes/attempts/{attempt_id}/result").text
    assert "1/25" in result and "automatically when the time ran out" in result


def test_another_students_attempt_pages_are_404(client: TestClient, session: Session) -> None:
    make_user(session, "web-d")
    make_user(session, "web-e")
    sign_in(client, "web-d")
    attempt_id = start(client)
    client.cookies.clear()
    sign_in(client, "web-e")
    for path in ("", "/finish", "/result"):
        assert client.get(f"/quizzes/attempts/{attempt_id}{path}").status_code == 404
    assert save(client, attempt_id, "m202-q01", "A").status_code == 404  # type: ignore[attr-defined]


def test_no_answer_key_or_explanation_reaches_the_browser_before_submit(client: TestClient, session: Session) -> None:
    """Every page, partial and API response of an open attempt, searched for the key and the explanations."""
    make_user(session, "web-f")
    sign_in(client, "web-f")
    questions = session.scalars(select(Question).where(Question.quiz_id == "module-202")).all()
    secrets = [q.explanation_html[:60] for q in questions] + [q.source["explanation"][:60] for q in questions]
    bodies: list[str] = []
    attempt_id = start(client)
    base = f"/quizzes/attempts/{attempt_id}"
    for n in range(1, 26):
        bodies += [client.get(f"{base}?q={n}").text, client.get(f"{base}?q={n}", headers=HX).text]
    for q in questions:
        bodies.append(save(client, attempt_id, q.id, "A").text)  # type: ignore[attr-defined]
    bodies += [
        client.get(f"{base}/finish").text,
        client.get(f"{base}/finish", headers=HX).text,
        client.get("/quizzes/module-202").text,
        client.get("/quizzes").text,
    ]
    headers = api_token(client, "web-f")
    api = [
        client.post("/api/v1/quizzes/module-202/attempts", headers=headers),
        client.get(f"/api/v1/attempts/{attempt_id}", headers=headers),
        client.put(f"/api/v1/attempts/{attempt_id}/answers/m202-q01", json={"choice": "B"}, headers=headers),
    ]
    assert all(r.status_code == 200 for r in api)
    for body in [*bodies, *(r.text for r in api)]:
        for secret in secrets:
            assert secret not in body
        assert "right answer" not in body and "is-answer" not in body and "explanation" not in body.lower()

    def keys(value: object) -> set[str]:
        if isinstance(value, dict):
            return set(value) | {k for v in value.values() for k in keys(v)}
        return {k for v in value for k in keys(v)} if isinstance(value, list) else set()

    for r in api:
        assert not keys(json.loads(r.text)) & {"answer", "explanation", "correct", "result_marks", "marks"}
        assert json.loads(r.text).get("result") is None


def test_statistics_are_for_instructors(client: TestClient, session: Session, key: dict[str, str]) -> None:
    students = [make_user(session, f"stat-{n}") for n in range(6)]
    make_user(session, "stat-prof", role=Role.admin)
    for n, student in enumerate(students):
        headers = api_token(client, student.username)
        attempt = client.post("/api/v1/quizzes/ch35-quiz/attempts", headers=headers).json()
        for q in attempt["questions"][: 2 + 2 * n]:
            client.put(
                f"/api/v1/attempts/{attempt['id']}/answers/{q['id']}", json={"choice": key[q["id"]]}, headers=headers
            )
        client.post(f"/api/v1/attempts/{attempt['id']}/submit", headers=headers)
    sign_in(client, "stat-0")
    assert client.get("/quizzes/ch35-quiz/statistics").status_code == 403
    client.cookies.clear()
    sign_in(client, "stat-prof")
    page = client.get("/quizzes/ch35-quiz/statistics")
    assert page.status_code == 200
    text = page.text
    assert '<dd data-testid="attempts">6</dd>' in text and "<svg" in text and 'class="bar"' in text
    assert "7.0 / 15" in text and "<dt>Median score</dt><dd>7.0 / 15</dd>" in text
    items = text[text.index('<table class="item-stats">') :]
    assert items.count('<th scope="row">') == 15
    assert "Question statistics" in client.get("/quizzes/ch35-quiz").text

    # The score distribution's numbers as text: a row per total score, equal to the service's figures.
    figures = service.quiz_statistics("ch35-quiz", session=session, now=utcnow()).stats
    table = numbers_table(text, "distribution")
    assert table.columns == ["Total score", "Attempts"] and table.caption == "Attempts per total score (6 in all)"
    assert [int(n) for _, n in table.rows] == figures.distribution and sum(figures.distribution) == 6
    assert [int(score) for score, _ in table.rows] == list(range(16))
    assert all(kinds == ["th row", "td"] for kinds in table.scopes[1:])
    modes = " and ".join(str(s) for s in figures.mode_scores)
    assert f"Attempts per total score, 0 to 15: 6 attempts, most often {modes}</title>" in text


def test_each_question_is_a_heading_that_takes_focus_and_saves_are_announced(
    client: TestClient, session: Session, key: dict[str, str]
) -> None:
    make_user(session, "web-focus")
    sign_in(client, "web-focus")
    attempt_id = start(client)
    page = client.get(f"/quizzes/attempts/{attempt_id}").text
    assert '<h2 class="question-meta" id="question-heading" tabindex="-1" data-autofocus>Question 1 of 25' in page
    assert '<a class="skip-link" href="#question-heading">Skip to the question</a>' in page
    partial = client.get(f"/quizzes/attempts/{attempt_id}?q=8", headers=HX).text
    assert "data-autofocus>Question 8 of 25 · Ray and Frameworks</h2>" in partial and "data-announce" not in partial
    saved = save(client, attempt_id, "m202-q08", key["m202-q08"], 8).text  # type: ignore[attr-defined]
    assert (
        '<nav id="overview" class="overview" aria-label="Questions" data-announce="Saved. Answered so far: 1 of 25.">'
        in saved
    )
    confirm = client.get(f"/quizzes/attempts/{attempt_id}/finish", headers=HX).text
    assert (
        '<h2 tabindex="-1" data-autofocus>Submit your attempt?</h2>' in confirm
        and "Skip to the question" not in confirm
    )
