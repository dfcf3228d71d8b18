"""The JSON API: register, token, me; errors are JSON with a message."""

from __future__ import annotations

from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from tests.factories import api_token, make_user


def test_register_token_me(client: TestClient) -> None:
    created = client.post("/api/v1/auth/register", json={"username": "apiuser", "password": "long-enough-pw"})
    assert created.status_code == 201
    joined = [{"id": "default", "title": "Default course", "term": None, "role": "student"}]
    expected = {"username": "apiuser", "role": "student", "course": "default", "course_role": "student"}
    expected["courses"] = joined
    assert created.json() == expected
    token = client.post("/api/v1/auth/token", json={"username": "apiuser", "password": "long-enough-pw"})
    assert token.status_code == 200
    body = token.json()
    assert body["token_type"] == "bearer" and len(body["access_token"]) >= 40
    me = client.get("/api/v1/me", headers={"Authorization": f"Bearer {body['access_token']}"})
    assert me.json() == expected


def test_bad_or_missing_token_is_401_json(client: TestClient) -> None:
    for headers in ({}, {"Authorization": "Bearer not-a-token"}, {"Authorization": "Basic Zm9vOmJhcg=="}):
        response = client.get("/api/v1/me", headers=headers)
        assert response.status_code == 401
        assert response.headers["www-authenticate"] == "Bearer"
        assert "detail" in response.json()


def test_api_ignores_the_session_cookie(client: TestClient, session: Session) -> None:
    from tests.factories import sign_in

    make_user(session, "cookie-user")
    sign_in(client, "cookie-user")
    assert client.get("/api/v1/me").status_code == 401


def test_api_errors(client: TestClient, session: Session) -> None:
    make_user(session, "existing")
    duplicate = client.post("/api/v1/auth/register", json={"username": "existing", "password": "long-enough-pw"})
    assert duplicate.status_code == 409 and "taken" in duplicate.json()["detail"]
    short = client.post("/api/v1/auth/register", json={"username": "newbie", "password": "short"})
    assert short.status_code == 422 and "at least 10" in short.json()["detail"]
    wrong = client.post("/api/v1/auth/token", json={"username": "existing", "password": "wrong-password"})
    assert wrong.status_code == 401 and wrong.json() == {"detail": "Wrong username or password."}
    malformed = client.post("/api/v1/auth/token", json={"username": "existing"})
    assert malformed.status_code == 422 and "password" in malformed.json()["detail"]


def test_roles_show_in_me(client: TestClient, session: Session) -> None:
    from app.accounts.models import Role
    from app.courses.models import CourseRole

    make_user(session, "admin-api", role=Role.admin)
    assert client.get("/api/v1/me", headers=api_token(client, "admin-api")).json()["role"] == "admin"
    make_user(session, "ta-api", course_role=CourseRole.ta)
    me = client.get("/api/v1/me", headers=api_token(client, "ta-api")).json()
    assert (me["role"], me["course"], me["course_role"]) == ("student", "default", "ta")
    assert [(c["id"], c["role"]) for c in me["courses"]] == [("default", "ta")]


def test_openapi_lists_the_api(client: TestClient) -> None:
    spec = client.get("/openapi.json").json()
    assert {"/api/v1/auth/register", "/api/v1/auth/token", "/api/v1/me"} <= set(spec["paths"])
