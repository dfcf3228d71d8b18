"""Input that once got a 500: ids past the database's integers, code that is not valid Unicode, empty code."""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.accounts.models import Role
from app.labs.models import Submission
from tests.factories import api_token, csrf_token, make_user, sign_in

HUGE = 2**63  # one past the largest BIGINT (SQLite's integers)
API = [
    ("GET", "/api/v1/attempts/{id}"),
    ("PUT", "/api/v1/attempts/{id}/answers/m202-q01"),
    ("POST", "/api/v1/attempts/{id}/submit"),
    ("GET", "/api/v1/submissions/{id}"),
]
PAGES = [
    ("GET", "/quizzes/attempts/{id}"),
    ("POST", "/quizzes/attempts/{id}/answers/m202-q01"),
    ("GET", "/quizzes/attempts/{id}/finish"),
    ("POST", "/quizzes/attempts/{id}/submit"),
    ("GET", "/quizzes/attempts/{id}/result"),
    ("GET", "/labs/submissions/{id}"),
    ("POST", "/labs/submissions/{id}/regrade"),
]


@pytest.mark.parametrize("number", [2**31, HUGE, 10**30, -(2**63) - 1])
def test_ids_past_the_database_integers_are_refused_in_the_api(
    client: TestClient, session: Session, number: int
) -> None:
    make_user(session, "ada")
    auth = api_token(client, "ada")
    for method, path in API:
        response = client.request(method, path.format(id=number), json={"choice": "A"}, headers=auth)
        assert response.status_code == 422, (method, path, response.text)
        body = response.json()
        assert isinstance(body["detail"], str) and body["errors"], body


def test_ids_past_the_database_integers_are_refused_in_the_pages(client: TestClient, session: Session) -> None:
    make_user(session, "prof", role=Role.admin)  # may reach every page, the regrade button too
    sign_in(client, "prof")
    token = csrf_token(client)
    for method, path in PAGES:
        data = {"choice": "A", "csrf_token": token} if method == "POST" else None
        response = client.request(method, path.format(id=HUGE), data=data)
        assert response.status_code == 422, (method, path, response.status_code)
        assert "<html" in response.text.lower()


def test_code_with_a_lone_surrogate_is_422_with_a_reason(client: TestClient, session: Session) -> None:
    make_user(session, "ada")
    auth = api_token(client, "ada") | {"content-type": "application/json"}
    # json.dumps writes the surrogate as the escape \ud800, as a client's JSON would.
    body = json.dumps({"code": "x = 1\ny = 2  # \ud800\n"})
    response = client.post("/api/v1/labs/ring-allreduce/submissions", content=body, headers=auth)
    assert response.status_code == 422, response.text
    detail = response.json()["detail"]
    assert "lone surrogate" in detail and "line 2" in detail
    assert session.scalar(select(func.count()).select_from(Submission)) == 0


def test_empty_code_is_422_like_other_bad_input(client: TestClient, session: Session) -> None:
    make_user(session, "ada")
    auth = api_token(client, "ada")
    response = client.post("/api/v1/labs/ring-allreduce/submissions", json={"code": "  \n"}, headers=auth)
    assert response.status_code == 422 and "empty" in response.json()["detail"]


def test_a_nul_character_in_text_is_never_a_server_error(client: TestClient, session: Session, db_url: str) -> None:
    """PostgreSQL refuses NUL in text: a request carrying one is invalid input (422), on any route."""
    make_user(session, "nul")
    auth = api_token(client, "nul")
    body = {"card_id": "mdt-001", "rating": 3, "version": 0, "review_id": "\u0000"}
    answers = [
        client.post("/api/v1/reviews", json=body, headers=auth),
        client.post("/api/v1/reviews", json={**body, "card_id": "x\u0000", "review_id": None}, headers=auth),
        client.get("/api/v1/cards/x%00", headers=auth),
        client.get("/labs/x%00"),
    ]
    assert all(r.status_code < 500 for r in answers), [(r.status_code, r.text[:200]) for r in answers]
    if db_url.startswith("postgresql"):
        assert answers[0].status_code == 422 and "NUL" in answers[0].json()["detail"]
        assert answers[0].json()["errors"][0]["type"] == "invalid"
