"""Passwords people can change and recover: the old password to change it, a one-time link to reset it.

Through the real app and database (both backends): every bad input says why and changes nothing,
a reset link works once and only until it expires, and a new password signs the account out
everywhere else.
"""

from __future__ import annotations

import os
import re
import subprocess
from datetime import timedelta
from pathlib import Path

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.accounts import recovery
from app.accounts.models import ApiToken, AuthSession, PasswordReset, Role, User
from app.accounts.service import digest, hasher
from app.db import make_engine, make_sessionmaker, utcnow
from tests.cli import ringlab as run_ringlab
from tests.factories import PASSWORD, api_token, csrf_token, make_user, sign_in

NEW = "a-brand-new-password"


def signs_in(app: FastAPI, username: str, password: str) -> bool:
    with TestClient(app) as other:
        data = {"username": username, "password": password, "csrf_token": csrf_token(other)}
        return other.post("/signin", data=data, follow_redirects=False).status_code == 303


def change(client: TestClient, old: str, new: str, confirm: str | None = None):  # type: ignore[no-untyped-def]
    data = {"old_password": old, "new_password": new, "confirm": new if confirm is None else confirm}
    return client.post("/account/password", data={**data, "csrf_token": csrf_token(client)}, follow_redirects=False)


def count(session: Session, model: type, user: User) -> int:
    session.expire_all()
    return session.scalar(select(func.count()).select_from(model).where(model.user_id == user.id)) or 0  # type: ignore[attr-defined]


def test_changing_ones_password_keeps_this_browser_and_signs_out_the_others(
    app: FastAPI, client: TestClient, session: Session
) -> None:
    ada = make_user(session, "ada")
    session.commit()
    with TestClient(app) as elsewhere:
        sign_in(elsewhere, "ada")
        api_token(elsewhere, "ada")
        sign_in(client, "ada")
        assert count(session, AuthSession, ada) == 2 and count(session, ApiToken, ada) == 1
        response = change(client, PASSWORD, NEW)
        assert response.status_code == 303 and response.headers["location"] == "/account/password?changed=1"
        assert "Your password was changed" in client.get(response.headers["location"]).text  # still signed in here
        assert elsewhere.get("/account/password", follow_redirects=False).status_code == 303  # not there
    assert count(session, AuthSession, ada) == 1 and count(session, ApiToken, ada) == 0
    assert signs_in(app, "ada", NEW) and not signs_in(app, "ada", PASSWORD)


@pytest.mark.parametrize(
    ("old", "new", "confirm", "message", "field"),
    [
        ("not-my-password", NEW, NEW, "That is not your current password.", "old_password"),
        ("", NEW, NEW, "That is not your current password.", "old_password"),
        (PASSWORD, NEW, NEW + "x", "The two new passwords differ", "confirm"),
        (PASSWORD, "short", "short", "Passwords need at least 10 characters.", "password"),
        (PASSWORD, PASSWORD, PASSWORD, "The new password is the one you have", "new_password"),
    ],
)
def test_a_bad_change_says_why_and_changes_nothing(  # type: ignore[no-untyped-def]
    client: TestClient, session: Session, old, new, confirm, message, field
) -> None:
    ada = make_user(session, "ada")
    session.commit()
    before = ada.password_hash
    sign_in(client, "ada")
    response = change(client, old, new, confirm)
    assert response.status_code == 422 and message in response.text
    assert 'role="alert" id="password-error"' in response.text
    if field != "password":  # the length rule names the field by its own name
        assert re.search(rf'name="{field}"[^>]*aria-invalid="true"', response.text), field
    session.refresh(ada)
    assert ada.password_hash == before and count(session, AuthSession, ada) == 1


def test_signed_out_people_are_sent_to_sign_in(client: TestClient) -> None:
    response = client.get("/account/password", follow_redirects=False)
    assert response.status_code == 303 and response.headers["location"].startswith("/signin")


def make_link(client: TestClient, session: Session, student: User) -> str:
    make_user(session, "teacher", role=Role.admin)
    session.commit()
    sign_in(client, "teacher")
    page = client.get(f"/instructor/students/{student.id}").text
    assert "Make a password reset link" in page
    response = client.post(f"/instructor/students/{student.id}/password-reset", data={"csrf_token": csrf_token(client)})
    assert response.status_code == 200 and response.headers["Cache-Control"] == "no-store"
    assert response.headers["Referrer-Policy"] == "no-referrer"
    match = re.search(r'value="(http://testserver/reset/[A-Za-z0-9_-]{43})"', response.text)
    assert match, response.text
    return match[1].removeprefix("http://testserver")


def test_staff_make_a_link_that_works_once_and_signs_the_student_out(
    app: FastAPI, client: TestClient, session: Session
) -> None:
    student = make_user(session, "forgetful")
    session.commit()
    with TestClient(app) as browser:
        sign_in(browser, "forgetful")  # still signed in somewhere, say a lab machine
        link = make_link(client, session, student)
        stored = session.scalars(select(PasswordReset)).one()
        assert stored.id == digest(link.rsplit("/", 1)[1]) and link.rsplit("/", 1)[1] not in stored.id  # a digest
        with TestClient(app) as student_browser:
            form = student_browser.get(link)
            assert form.status_code == 200 and "forgetful" in form.text
            data = {"new_password": NEW, "confirm": NEW, "csrf_token": csrf_token(student_browser)}
            done = student_browser.post(link, data=data, follow_redirects=False)
            assert done.status_code == 303 and done.headers["location"] == "/signin?reset=1"
            assert "Your new password is set" in student_browser.get("/signin?reset=1").text
            again = student_browser.post(link, data=data)
            assert again.status_code == 410 and "already used" in again.text
            assert student_browser.get(link).status_code == 410
        assert browser.get("/account/password", follow_redirects=False).status_code == 303  # signed out
    assert signs_in(app, "forgetful", NEW) and not signs_in(app, "forgetful", PASSWORD)


def test_a_link_ends_when_it_expires_or_a_newer_one_is_made(session: Session) -> None:
    student = make_user(session, "student")
    now = utcnow()
    first = recovery.issue_reset(student, by=None, session=session, now=now)
    second = recovery.issue_reset(student, by=None, session=session, now=now + timedelta(minutes=1))
    session.flush()
    with pytest.raises(recovery.LinkEnded, match="expired \\(or a newer one was made\\)"):
        recovery.reset_for(first.token, session=session, now=now + timedelta(minutes=2))
    assert recovery.reset_for(second.token, session=session, now=now + timedelta(hours=24)).user_id == student.id
    with pytest.raises(recovery.LinkEnded, match="expired"):
        recovery.reset_for(second.token, session=session, now=now + timedelta(hours=24, minutes=2))
    with pytest.raises(recovery.LinkEnded):
        recovery.use_reset(second.token, NEW, NEW, session=session, now=now + timedelta(days=2))
    assert hasher().verify(PASSWORD, student.password_hash)  # nothing changed


def test_a_bad_new_password_on_the_link_keeps_the_link(client: TestClient, session: Session) -> None:
    student = make_user(session, "student")
    issued = recovery.issue_reset(student, by=None, session=session, now=utcnow())
    session.commit()
    link = f"/reset/{issued.token}"
    data = {"new_password": "short", "confirm": "short", "csrf_token": csrf_token(client)}
    response = client.post(link, data=data)
    assert response.status_code == 422 and "Passwords need at least 10 characters." in response.text
    response = client.post(link, data={**data, "new_password": NEW, "confirm": NEW + "!"})
    assert response.status_code == 422 and "The two passwords differ" in response.text
    assert client.get(link).status_code == 200  # still usable
    assert client.get("/reset/not-a-real-token").status_code == 404


def test_students_cannot_make_links(client: TestClient, session: Session) -> None:
    make_user(session, "mallory")
    victim = make_user(session, "victim")
    session.commit()
    sign_in(client, "mallory")
    response = client.post(f"/instructor/students/{victim.id}/password-reset", data={"csrf_token": csrf_token(client)})
    assert response.status_code == 403
    assert session.scalar(select(func.count()).select_from(PasswordReset)) == 0


def test_the_terminal_prints_a_link_that_works(tmp_path: Path) -> None:
    """``ringlab users reset-password`` on a fresh database: the link it prints is the account's live one."""
    url = f"sqlite:///{tmp_path / 'cli.sqlite3'}"
    env = {**os.environ, "DATABASE_URL": url, "RINGLAB_PASSWORD": PASSWORD}

    def ringlab(*args: str) -> subprocess.CompletedProcess[str]:
        return run_ringlab(*args, env=env)

    assert ringlab("db", "upgrade").returncode == 0
    assert ringlab("users", "create", "cli-user").returncode == 0
    done = ringlab("users", "reset-password", "CLI-user", "--base-url", "https://ringlab.example/", "--hours", "2")
    assert done.returncode == 0, done.stderr
    link = done.stdout.strip()
    assert re.fullmatch(r"https://ringlab\.example/reset/[A-Za-z0-9_-]{43}", link), link
    assert "give it to cli-user" in done.stderr
    engine = make_engine(url)
    try:
        with make_sessionmaker(engine)() as session:
            reset = recovery.reset_for(link.rsplit("/", 1)[1], session=session, now=utcnow())
            assert reset.expires_at - reset.created_at == timedelta(hours=2) and reset.created_by_id is None
    finally:
        engine.dispose()
    missing = ringlab("users", "reset-password", "nobody")
    assert missing.returncode == 1 and "no account 'nobody'" in missing.stderr


def test_a_teaching_assistant_resets_a_students_password_and_the_link_ends(
    app: FastAPI, client: TestClient, session: Session
) -> None:
    from app.courses.models import CourseRole

    student = make_user(session, "locked-out")
    make_user(session, "tia", course_role=CourseRole.ta)
    colleague = make_user(session, "other-ta", course_role=CourseRole.ta)
    sign_in(client, "tia")
    token = csrf_token(client)
    response = client.post(f"/instructor/students/{student.id}/password-reset", data={"csrf_token": token})
    match = re.search(r'value="http://testserver(/reset/[A-Za-z0-9_-]{43})"', response.text)
    assert response.status_code == 200 and match, response.text
    link = match[1]
    # A TA resets students only: never another member of staff.
    refused = client.post(f"/instructor/students/{colleague.id}/password-reset", data={"csrf_token": token})
    assert refused.status_code == 404
    with TestClient(app) as student_browser:
        data = {"new_password": NEW, "confirm": NEW, "csrf_token": csrf_token(student_browser)}
        assert student_browser.post(link, data=data, follow_redirects=False).status_code == 303
        assert student_browser.post(link, data=data).status_code == 410  # used: it fails a second time
    assert signs_in(app, "locked-out", NEW) and not signs_in(app, "locked-out", PASSWORD)
    # A fresh link that has expired fails too, and changes nothing.
    again = client.post(f"/instructor/students/{student.id}/password-reset", data={"csrf_token": token})
    fresh = re.search(r'value="http://testserver(/reset/[A-Za-z0-9_-]{43})"', again.text)
    assert fresh
    row = session.get(PasswordReset, digest(fresh[1].rsplit("/", 1)[1]))
    assert row is not None
    row.expires_at = utcnow() - timedelta(seconds=1)
    session.commit()
    with TestClient(app) as student_browser:
        data = {"new_password": NEW + "-2", "confirm": NEW + "-2", "csrf_token": csrf_token(student_browser)}
        assert student_browser.post(fresh[1], data=data).status_code == 410
    assert signs_in(app, "locked-out", NEW)
