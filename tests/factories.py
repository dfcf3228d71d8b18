"""Test data builders."""

from __future__ import annotations

from functools import lru_cache

from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from app.accounts.models import Role, User
from app.accounts.service import hasher

PASSWORD = "correct-horse-battery"


@lru_cache(maxsize=8)
def _hash(password: str) -> str:
    # Argon2 is slow on purpose; hash each test password once per run.
    return hasher().hash(password)


def make_user(session: Session, username: str, *, role: Role = Role.student, password: str = PASSWORD) -> User:
    user = User(username=username, username_key=username.lower(), password_hash=_hash(password), role=role)
    session.add(user)
    session.commit()
    return user


def csrf_token(client: TestClient) -> str:
    """The CSRF token a page would embed for this client (fetching a page sets it)."""
    if "ringlab_csrf" not in client.cookies:
        client.get("/signin")
    return client.cookies["ringlab_csrf"]


def sign_in(client: TestClient, username: str, password: str = PASSWORD) -> None:
    response = client.post(
        "/signin", data={"username": username, "password": password, "csrf_token": csrf_token(client)},
        follow_redirects=False,
    )  # fmt: skip
    assert response.status_code == 303, response.text


def api_token(client: TestClient, username: str, password: str = PASSWORD) -> dict[str, str]:
    response = client.post("/api/v1/auth/token", json={"username": username, "password": password})
    assert response.status_code == 200, response.text
    return {"Authorization": f"Bearer {response.json()['access_token']}"}
