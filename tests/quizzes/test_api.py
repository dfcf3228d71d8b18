"""The quiz JSON API, in-process on both backends: shapes, bad input, deadline, ownership."""

from __future__ import annotations

from datetime import timedelta

from fastapi.testclient import TestClient
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.db import utcnow
from app.quizzes.models import QuizAnswer, QuizAttempt
from tests.factories import api_token, make_user


def start(client: TestClient, headers: dict[str, str], quiz: str = "module-202") -> dict:  # type: ignore[type-arg]
    response = client.post(f"/api/v1/quizzes/{quiz}/attempts", headers=headers)
    assert response.status_code in (200, 201), response.text
    return response.json()  # type: ignore[no-any-return]


def test_list_quizzes(client: TestClient, session: Session) -> None:
    make_user(session, "api-a")
    body = client.get("/api/v1/quizzes", headers=api_token(client, "api-a")).json()
    assert {
        "id": "module-202",
        "title": "Module 202 Quiz: Distributed Training at Scale",
        "question_count": 25,
        "passing_score": 0.8,
        "time_limit_minutes": 60,
        "due": None,
        "max_attempts": None,
        "closes_at_due": False,
    } in body
    assert {q["id"] for q in body} == {"module-202", "ch35-quiz"}
    assert client.get("/api/v1/quizzes").status_code == 401


def test_take_a_quiz_over_the_api(client: TestClient, session: Session, key: dict[str, str]) -> None:
    make_user(session, "api-b")
    headers = api_token(client, "api-b")
    created = client.post("/api/v1/quizzes/module-202/attempts", headers=headers)
    assert created.status_code == 201
    attempt = created.json()
    assert set(attempt) >= {"id", "deadline", "questions"}
    first = attempt["questions"][0]
    # The seed quizzes shuffle option order per attempt; the keys stay with their texts, and the shown
    # letters run A, B, C, D down the order listed.
    assert [o["label"] for o in first["options"]] == ["A", "B", "C", "D"]
    authored = sorted(({"key": o["key"], "text": o["text"]} for o in first["options"]), key=lambda o: o["key"])
    assert first | {"options": authored} == {
        "id": "m202-q01",
        "section": "fundamentals",
        "prompt": "What is the main advantage of data parallelism over model parallelism?",
        "options": [
            {"key": "A", "text": "Requires less memory per GPU"},
            {"key": "B", "text": "Scales to larger models"},
            {"key": "C", "text": "Simpler to implement and works with any model architecture"},
            {"key": "D", "text": "Provides better accuracy"},
        ],
    }
    assert client.post("/api/v1/quizzes/module-202/attempts", headers=headers).json()["id"] == attempt["id"]
    for q in attempt["questions"][:19]:
        put = client.put(
            f"/api/v1/attempts/{attempt['id']}/answers/{q['id']}", json={"choice": key[q["id"]]}, headers=headers
        )
        assert put.status_code == 200 and put.json()["choice"] == key[q["id"]]
    state = client.get(f"/api/v1/attempts/{attempt['id']}", headers=headers).json()
    assert state["status"] == "open" and state["result"] is None and len(state["choices"]) == 19
    result = client.post(f"/api/v1/attempts/{attempt['id']}/submit", headers=headers)
    assert result.status_code == 200
    body = result.json()
    assert (body["score"], body["max_score"], body["percent"], body["passed"]) == (19, 25, 76.0, False)
    assert body["guide"] == {"level": "Good foundation", "recommendation": "Review challenging topics"}
    assert next((s["id"], s["score"], s["max_score"]) for s in body["sections"]) == ("fundamentals", 7, 7)
    q25 = body["questions"][-1]
    assert q25["choice"] is None and q25["correct"] is False and q25["answer"] == key[q25["id"]]
    assert q25["explanation"]
    again = client.post(f"/api/v1/attempts/{attempt['id']}/submit", headers=headers).json()
    assert again == body
    after = client.get(f"/api/v1/attempts/{attempt['id']}", headers=headers).json()
    assert after["status"] == "submitted" and after["result"] == body


def test_bad_input_is_422_with_the_reason(client: TestClient, session: Session) -> None:
    make_user(session, "api-c")
    headers = api_token(client, "api-c")
    attempt = start(client, headers)
    url = f"/api/v1/attempts/{attempt['id']}/answers"
    unknown = client.put(f"{url}/nope", json={"choice": "A"}, headers=headers)
    assert unknown.status_code == 422 and "'nope' is not part of this attempt" in unknown.json()["detail"]
    option = client.put(f"{url}/m202-q01", json={"choice": "Z"}, headers=headers)
    assert option.status_code == 422 and "'Z' is not an option of question 'm202-q01'" in option.json()["detail"]
    malformed = client.put(f"{url}/m202-q01", json={"letter": "A"}, headers=headers)
    assert malformed.status_code == 422 and "choice" in malformed.json()["detail"]
    assert client.post("/api/v1/quizzes/nope/attempts", headers=headers).status_code == 404


def test_answer_after_the_deadline_is_409_and_not_saved(
    client: TestClient, session: Session, key: dict[str, str]
) -> None:
    make_user(session, "api-d")
    headers = api_token(client, "api-d")
    attempt = start(client, headers)
    ok = client.put(
        f"/api/v1/attempts/{attempt['id']}/answers/m202-q01", json={"choice": key["m202-q01"]}, headers=headers
    )
    assert ok.status_code == 200
    row = session.get(QuizAttempt, attempt["id"])
    assert row is not None
    row.deadline = utcnow() - timedelta(seconds=1)
    session.commit()
    late = client.put(f"/api/v1/attempts/{attempt['id']}/answers/m202-q02", json={"choice": "A"}, headers=headers)
    assert late.status_code == 409 and "time for this attempt is up" in late.json()["detail"]
    count = session.scalar(select(func.count()).where(QuizAnswer.attempt_id == attempt["id"]))
    assert count == 1
    # The next read submits it with what was saved.
    state = client.get(f"/api/v1/attempts/{attempt['id']}", headers=headers).json()
    assert state["status"] == "submitted" and state["result"]["score"] == 1 and state["result"]["auto_submitted"]


def test_another_students_attempt_is_404(client: TestClient, session: Session) -> None:
    make_user(session, "api-e")
    make_user(session, "api-f")
    owner, other = api_token(client, "api-e"), api_token(client, "api-f")
    attempt = start(client, owner)
    base = f"/api/v1/attempts/{attempt['id']}"
    assert client.get(base, headers=other).status_code == 404
    assert client.put(f"{base}/answers/m202-q01", json={"choice": "A"}, headers=other).status_code == 404
    assert client.post(f"{base}/submit", headers=other).status_code == 404
    assert client.get(base, headers=owner).json()["status"] == "open"


def test_openapi_lists_the_quiz_api(client: TestClient) -> None:
    paths = set(client.get("/openapi.json").json()["paths"])
    assert {
        "/api/v1/quizzes",
        "/api/v1/quizzes/{quiz_id}/attempts",
        "/api/v1/attempts/{attempt_id}",
        "/api/v1/attempts/{attempt_id}/answers/{question_id}",
        "/api/v1/attempts/{attempt_id}/submit",
    } <= paths
