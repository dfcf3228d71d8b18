"""Sign-up, sign-in and sign-out pages: every bad input gets a message and changes nothing."""

from __future__ import annotations

from datetime import timedelta

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.accounts.models import AuthSession, Role, User
from app.db import utcnow
from tests.factories import PASSWORD, csrf_token, make_user, sign_in


def user_count(session: Session) -> int:
    return session.scalar(select(func.count()).select_from(User)) or 0


def signup(client: TestClient, username: str, password: str, **extra: str):  # type: ignore[no-untyped-def]
    data = {"username": username, "password": password, "csrf_token": csrf_token(client), **extra}
    return client.post("/signup", data=data, follow_redirects=False)


def test_sign_up_signs_in_with_a_safe_cookie(client: TestClient, session: Session) -> None:
    response = signup(client, "Ada", "long-enough-pw")
    assert response.status_code == 303 and response.headers["location"] == "/"
    cookie = response.headers["set-cookie"]
    assert "ringlab_session=" in cookie and "HttpOnly" in cookie and "SameSite=lax" in cookie
    assert "Max-Age=1209600" in cookie
    assert "Welcome, Ada" in client.get("/").text  # "Welcome back" is for a later visit
    user = session.scalars(select(User).where(User.username_key == "ada")).one()
    assert user.role == Role.student and user.password_hash.startswith("$argon2id$")


@pytest.mark.parametrize(
    ("username", "password", "status", "message"),
    [
        ("ab", "long-enough-pw", 422, "Usernames are 3 to 40 characters"),
        ("bad name!", "long-enough-pw", 422, "Usernames are 3 to 40 characters"),
        ("fine-name", "short", 422, "Passwords need at least 10 characters."),
        ("taken", "long-enough-pw", 409, "The username &#39;TAKEN&#39; is taken."),
    ],
)
def test_bad_sign_up_says_why_and_creates_nothing(  # type: ignore[no-untyped-def]
    client: TestClient, session: Session, username, password, status, message
) -> None:
    make_user(session, "taken")
    before = user_count(session)
    response = signup(client, username.upper() if username == "taken" else username, password)
    assert response.status_code == status
    assert message in response.text
    assert user_count(session) == before
    assert "ringlab_session" not in response.headers.get("set-cookie", "")


def test_wrong_password_and_unknown_user_read_the_same(client: TestClient, session: Session) -> None:
    make_user(session, "grace")
    for username, password in (("grace", "not-the-password"), ("nobody", PASSWORD)):
        response = client.post(
            "/signin", data={"username": username, "password": password, "csrf_token": csrf_token(client)}
        )
        assert response.status_code == 401
        assert "Wrong username or password." in response.text
    assert session.scalar(select(func.count()).select_from(AuthSession)) == 0


def test_sign_in_rotates_the_session_and_sign_out_ends_it(client: TestClient, session: Session) -> None:
    make_user(session, "linus")
    sign_in(client, "linus")
    first = client.cookies["ringlab_session"]
    sign_in(client, "linus")
    second = client.cookies["ringlab_session"]
    assert first != second
    assert session.scalar(select(func.count()).select_from(AuthSession)) == 1  # the old one is gone
    response = client.post("/signout", data={"csrf_token": csrf_token(client)}, follow_redirects=False)
    assert response.status_code == 303
    assert session.scalar(select(func.count()).select_from(AuthSession)) == 0
    assert "Welcome back" not in client.get("/").text


@pytest.mark.parametrize(
    ("role", "target", "expected"),
    [
        (Role.admin, "/", "/instructor"),  # staff land on their own home
        (Role.admin, "/quizzes", "/quizzes"),  # sent to sign in from a page: back to it
        (Role.student, "/", "/"),
    ],
)
def test_staff_land_on_the_instructor_home_after_signing_in(
    client: TestClient, session: Session, role: Role, target: str, expected: str
) -> None:
    name = f"landing-{role.value}{target.replace('/', '-')}"
    make_user(session, name, role=role)
    data = {"username": name, "password": PASSWORD, "csrf_token": csrf_token(client), "next": target}
    response = client.post("/signin", data=data, follow_redirects=False)
    assert response.status_code == 303 and response.headers["location"] == expected


def test_next_parameter_cannot_redirect_off_site(client: TestClient, session: Session) -> None:
    make_user(session, "mallory-target")
    for target, expected in (("https://evil.example/", "/"), ("//evil.example", "/"), ("/quizzes", "/quizzes")):
        data = {"username": "mallory-target", "password": PASSWORD, "csrf_token": csrf_token(client), "next": target}
        response = client.post("/signin", data=data, follow_redirects=False)
        assert response.headers["location"] == expected


@pytest.mark.parametrize("token", [None, "wrong-token-wrong-token-wrong-token!!"])
def test_missing_or_wrong_csrf_token_is_403_and_changes_nothing(
    client: TestClient, session: Session, token: str | None
) -> None:
    csrf_token(client)  # the browser has a cookie, but the form does not carry it
    data = {"username": "csrf-victim", "password": "long-enough-pw"}
    if token:
        data["csrf_token"] = token
    response = client.post("/signup", data=data)
    assert response.status_code == 403
    assert "CSRF token" in response.text
    assert session.scalars(select(User).where(User.username_key == "csrf-victim")).first() is None


def test_api_requests_need_no_csrf_token_and_get_no_cookie(client: TestClient, session: Session) -> None:
    """Bearer-token clients are exempt: no token is asked for and no CSRF cookie is set on them."""
    make_user(session, "api-user")
    body = {"username": "api-user", "password": PASSWORD}
    response = client.post("/api/v1/auth/token", json=body)
    assert response.status_code == 200, response.text
    assert "set-cookie" not in response.headers
    assert "set-cookie" in client.get("/signin").headers  # pages do set it


def test_htmx_requests_carry_the_token_in_a_header(client: TestClient, session: Session) -> None:
    make_user(session, "hx-user")
    sign_in(client, "hx-user")
    headers = {"HX-Request": "true", "X-CSRF-Token": csrf_token(client)}
    assert client.post("/signout", headers=headers, follow_redirects=False).status_code == 303
    assert client.post("/signout", headers={"HX-Request": "true"}, follow_redirects=False).status_code == 403


def test_expired_session_redirects_to_sign_in(client: TestClient, session: Session) -> None:
    make_user(session, "sleepy")
    sign_in(client, "sleepy")
    row = session.scalars(select(AuthSession)).one()
    row.expires_at = utcnow() - timedelta(seconds=1)
    session.commit()
    response = client.get("/instructor", follow_redirects=False)
    assert response.status_code == 303
    assert response.headers["location"] == "/signin?next=/instructor&expired=1"
    assert "Your session has expired" in client.get(response.headers["location"]).text


def test_oversized_form_body_is_413_and_changes_nothing(client: TestClient, session: Session) -> None:
    data = {"username": "big", "password": "x" * (2 * 1024 * 1024), "csrf_token": csrf_token(client)}
    response = client.post("/signup", data=data)
    assert response.status_code == 413
    assert "too large" in response.text
    assert session.scalars(select(User).where(User.username_key == "big")).first() is None


def test_student_gets_403_instructor_gets_the_page(client: TestClient, session: Session) -> None:
    make_user(session, "student-1")
    make_user(session, "teacher", role=Role.admin)
    sign_in(client, "student-1")
    forbidden = client.get("/instructor")
    assert forbidden.status_code == 403 and "This page is for the course" in forbidden.text
    assert 'href="/instructor"' not in client.get("/").text
    sign_in(client, "teacher")
    page = client.get("/instructor")
    assert page.status_code == 200 and "students" in page.text
    assert 'href="/instructor"' in client.get("/").text


def test_sign_in_is_rate_limited_per_account_with_retry_after(app: FastAPI, session: Session) -> None:
    make_user(session, "target")
    app.state.limits.signin_account.events = 3
    with TestClient(app) as client:
        for _ in range(3):
            data = {"username": "target", "password": "guess-guess-guess", "csrf_token": csrf_token(client)}
            assert client.post("/signin", data=data).status_code == 401
        data = {"username": "target", "password": PASSWORD, "csrf_token": csrf_token(client)}
        blocked = client.post("/signin", data=data)
    assert blocked.status_code == 429
    assert int(blocked.headers["retry-after"]) > 0
    assert "Too many failed sign-ins for this account" in blocked.text


def test_sign_up_is_rate_limited_per_client(app: FastAPI) -> None:
    app.state.limits.signup_client.events = 2
    with TestClient(app) as client:
        assert signup(client, "first-one", "long-enough-pw").status_code == 303
        assert signup(client, "second-one", "long-enough-pw").status_code == 303
        blocked = signup(client, "third-one", "long-enough-pw")
    assert blocked.status_code == 429 and "retry-after" in blocked.headers


def test_join_code_keeps_strangers_out(app: FastAPI, session: Session) -> None:
    app.state.settings.join_code = "DIST-2026"
    with TestClient(app) as client:
        form = client.get("/signup").text
        assert "Course join code" in form
        refused = signup(client, "stranger", "long-enough-pw", join_code="guess")
        assert refused.status_code == 403 and "join code is not right" in refused.text
        assert signup(client, "member", "long-enough-pw", join_code="DIST-2026").status_code == 303
    assert session.scalars(select(User).where(User.username_key == "stranger")).first() is None
