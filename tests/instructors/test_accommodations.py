"""Instructors grant, change and remove a student's time accommodation: on the student's page and over the API."""

from __future__ import annotations

import re
from datetime import timedelta

from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from app.quizzes import accommodations
from app.quizzes.models import QuizAttempt
from tests.factories import api_token, csrf_token, make_accommodation, sign_in
from tests.instructors.conftest import Klass


def grant(client: TestClient, user_id: int, **fields: str) -> object:
    data = {"csrf_token": csrf_token(client), "time_multiplier": "1", "extra_minutes": "0", "note": "", **fields}
    return client.post(f"/instructor/students/{user_id}/accommodation", data=data, follow_redirects=False)


def test_an_instructor_grants_time_and_a_half_and_the_student_gets_90_minutes(
    client: TestClient, session: Session, klass: Klass
) -> None:
    sign_in(client, "prof")
    page = client.get(f"/instructor/students/{klass.cyd.id}").text
    assert "No extra time: cyd gets each quiz's own time limit." in page
    assert f'action="/instructor/students/{klass.cyd.id}/accommodation"' in page and 'name="csrf_token"' in page
    assert ">Grant extra time</button>" in page and "Remove the extra time" not in page
    saved = grant(client, klass.cyd.id, time_multiplier="1.5", note="letter of 3 March")
    assert saved.status_code == 303  # type: ignore[attr-defined]
    assert saved.headers["location"] == f"/instructor/students/{klass.cyd.id}?accommodation=saved#accommodation"  # type: ignore[attr-defined]
    page = client.get(f"/instructor/students/{klass.cyd.id}?accommodation=saved").text
    assert 'data-testid="accommodation-notice">Saved: the extra time applies to the next timed quiz attempt' in page
    assert "cyd gets <strong>1.5× the time limit</strong> on every timed quiz: Module 202" in page
    assert "90 minutes instead of 60" in page and "by prof" in page and "Note: letter of 3 March" in page
    assert "Remove the extra time" in page
    found = accommodations.get(klass.cyd.id, session=session)
    assert found is not None and (found.time_multiplier, found.granted_by) == (1.5, klass.prof.id)

    client.cookies.clear()
    sign_in(client, "cyd")
    assert "90 minutes" in client.get("/quizzes/module-202").text
    started = client.post(
        "/quizzes/module-202/attempts", data={"csrf_token": csrf_token(client)}, follow_redirects=False
    )
    attempt = session.get(QuizAttempt, int(started.headers["location"].rsplit("/", 1)[1]))
    assert attempt is not None and attempt.deadline is not None
    assert attempt.deadline - attempt.started_at == timedelta(minutes=90)


def test_changing_and_removing_the_extra_time(client: TestClient, session: Session, klass: Klass) -> None:
    make_accommodation(session, klass.ada.id, multiplier=1.5, granted_by=None)
    sign_in(client, "prof")
    page = client.get(f"/instructor/students/{klass.ada.id}").text
    assert "from the terminal" in page and 'value="1.5"' in page
    assert grant(client, klass.ada.id, time_multiplier="1", extra_minutes="10").status_code == 303  # type: ignore[attr-defined]
    page = client.get(f"/instructor/students/{klass.ada.id}").text
    assert (
        "ada gets <strong>10 extra minutes</strong>" in page
        and "Distributed Training at Scale, 70 minutes instead of 60." in page
    )
    token = csrf_token(client)
    removed = client.post(
        f"/instructor/students/{klass.ada.id}/accommodation/remove", data={"csrf_token": token}, follow_redirects=False
    )
    assert removed.status_code == 303 and removed.headers["location"].endswith("?accommodation=removed#accommodation")
    assert accommodations.get(klass.ada.id, session=session) is None
    page = client.get(removed.headers["location"]).text
    assert "Removed: this student&#39;s next timed quiz attempts get each quiz&#39;s own time limit." in page
    assert "No extra time" in page


def test_a_mistake_shows_the_form_again_with_the_reason(client: TestClient, session: Session, klass: Klass) -> None:
    sign_in(client, "prof")
    wrong = grant(client, klass.bob.id, time_multiplier="15", extra_minutes="0", note="typo")
    assert wrong.status_code == 422  # type: ignore[attr-defined]
    text = wrong.text  # type: ignore[attr-defined]
    assert (
        '<p class="form-error" role="alert" id="accommodation-error">The time multiplier must be between 1 and 4'
        in text
    )
    field = r'name="time_multiplier"[^>]*value="15"[^>]*'
    assert re.search(field + r'aria-describedby="multiplier-help accommodation-error" aria-invalid="true"', text)
    assert 'value="typo"' in text
    nothing = grant(client, klass.bob.id)
    assert nothing.status_code == 422 and "gives no extra time" in nothing.text  # type: ignore[attr-defined]
    assert accommodations.get(klass.bob.id, session=session) is None
    assert grant(client, 999999).status_code == 404  # type: ignore[attr-defined]


def test_a_student_cannot_grant_extra_time(client: TestClient, session: Session, klass: Klass) -> None:
    sign_in(client, "ada")
    assert grant(client, klass.ada.id, time_multiplier="2").status_code == 403  # type: ignore[attr-defined]
    token = csrf_token(client)
    r = client.post(f"/instructor/students/{klass.ada.id}/accommodation/remove", data={"csrf_token": token})
    assert r.status_code == 403
    assert accommodations.get(klass.ada.id, session=session) is None
    client.cookies.clear()
    # Signed out: to the sign-in page. Without the CSRF token: refused, even for an instructor.
    r = client.post(f"/instructor/students/{klass.ada.id}/accommodation", data={"csrf_token": csrf_token(client)},
                    follow_redirects=False)  # fmt: skip
    assert r.status_code == 303 and r.headers["location"].startswith("/signin")
    sign_in(client, "prof")
    r = client.post(f"/instructor/students/{klass.ada.id}/accommodation", data={"time_multiplier": "2"})
    assert r.status_code == 403
    assert accommodations.get(klass.ada.id, session=session) is None


def test_the_api_grants_reads_and_removes(client: TestClient, session: Session, klass: Klass) -> None:
    url = f"/api/v1/instructor/students/{klass.bob.id}/accommodation"
    prof = api_token(client, "prof")
    assert client.get(url, headers=prof).json() == {"detail": "bob has no time accommodation."}
    put = client.put(url, headers=prof, json={"time_multiplier": 1.5, "extra_minutes": 10, "note": "letter"})
    assert put.status_code == 200, put.text
    body = put.json()
    assert {k: body[k] for k in ("user_id", "student", "time_multiplier", "extra_minutes", "note", "granted_by")} == {
        "user_id": klass.bob.id, "student": "bob", "time_multiplier": 1.5, "extra_minutes": 10, "note": "letter",
        "granted_by": "prof",
    }  # fmt: skip
    assert client.get(url, headers=prof).json() == body
    assert accommodations.student_limit(60, klass.bob.id, session=session) == 100
    bad = client.put(url, headers=prof, json={"time_multiplier": 1, "extra_minutes": 0})
    assert bad.status_code == 422 and bad.json()["errors"][0]["loc"] == ["body", "time_multiplier"]
    assert client.put(url, headers=prof, json={"time_multiplier": 0.5}).status_code == 422
    assert client.delete(url, headers=prof).status_code == 204
    assert client.get(url, headers=prof).status_code == 404
    assert client.delete(url, headers=prof).status_code == 204
    assert client.put("/api/v1/instructor/students/999999/accommodation", headers=prof,
                      json={"time_multiplier": 1.5}).status_code == 404  # fmt: skip


def test_the_api_refuses_students_and_strangers(client: TestClient, klass: Klass) -> None:
    url = f"/api/v1/instructor/students/{klass.ada.id}/accommodation"
    assert client.put(url, json={"time_multiplier": 2}).status_code == 401
    ada = api_token(client, "ada")
    for r in (client.get(url, headers=ada), client.put(url, headers=ada, json={"time_multiplier": 2}),
              client.delete(url, headers=ada)):  # fmt: skip
        assert r.status_code == 403 and r.json() == {"detail": "Time accommodations are granted by the course's staff."}
