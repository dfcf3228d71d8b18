"""Time accommodations: a student with extra time gets it on a timed quiz, in the service, the pages and the API."""

from __future__ import annotations

import re
from datetime import datetime, timedelta

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from app.errors import InvalidInput, NotFound
from app.quizzes import accommodations, attempts
from app.quizzes.models import QuizAttempt
from tests.factories import api_token, csrf_token, make_accommodation, make_user, sign_in
from tests.quizzes.conftest import T0


@pytest.mark.parametrize(
    ("limit", "multiplier", "extra", "expected"),
    [
        (60, 1.0, 0, 60),
        (60, 1.5, 0, 90),
        (60, 1.0, 10, 70),
        (60, 1.5, 10, 100),
        (60, 2.0, 0, 120),
        (45, 1.25, 0, 57),  # 56.25, rounded up: in the student's favour
        (10, 1.1, 0, 11),  # 11.000000000000002 in floats: not a minute more
        (None, 1.5, 10, None),  # an untimed quiz stays untimed
        (0, 1.5, 0, None),
    ],
)
def test_limit_minutes(limit: int | None, multiplier: float, extra: int, expected: int | None) -> None:
    assert accommodations.limit_minutes(limit, multiplier, extra) == expected


def test_check_names_the_field_and_the_bounds() -> None:
    with pytest.raises(InvalidInput, match=r"between 1 and 4 .*got 0\.5") as low:
        accommodations.check(0.5, 0)
    assert low.value.field == "time_multiplier"
    with pytest.raises(InvalidInput, match="got 15"):
        accommodations.check(15, 0)
    with pytest.raises(InvalidInput, match="got nan"):
        accommodations.check(float("nan"), 0)
    with pytest.raises(InvalidInput, match="Extra minutes must be between 0 and 600; got -5") as minus:
        accommodations.check(1.5, -5)
    assert minus.value.field == "extra_minutes"
    with pytest.raises(InvalidInput, match="gives no extra time"):
        accommodations.check(1, 0)
    with pytest.raises(InvalidInput, match="keep it to 200") as long:
        accommodations.check(1.5, 0, "x" * 201)
    assert long.value.field == "note"
    accommodations.check(1, 10)
    accommodations.check(1.5, 0)


@pytest.mark.parametrize(("multiplier", "extra", "minutes"), [(1.5, 0, 90), (1.0, 10, 70), (None, None, 60)])
def test_the_deadline_of_module_202_is_the_students_own_limit(
    session: Session, multiplier: float | None, extra: int | None, minutes: int
) -> None:
    student = make_user(session, "acc-student")
    if multiplier is not None and extra is not None:
        make_accommodation(session, student.id, multiplier=multiplier, extra_minutes=extra)
    attempt, created = attempts.start_attempt("module-202", student.id, session=session, now=T0)
    assert created and attempt.deadline == T0 + timedelta(minutes=minutes)
    untimed, _ = attempts.start_attempt("ch35-quiz", student.id, session=session, now=T0)
    assert untimed.deadline is None


def test_an_accommodation_is_fixed_when_the_attempt_starts(session: Session) -> None:
    student = make_user(session, "acc-later")
    prof = make_user(session, "acc-prof")
    first, _ = attempts.start_attempt("module-202", student.id, session=session, now=T0)
    accommodations.grant(student.id, multiplier=1.5, extra_minutes=0, granted_by=prof.id, session=session, now=T0)
    resumed, created = attempts.start_attempt("module-202", student.id, session=session, now=T0 + timedelta(minutes=1))
    # The attempt already running keeps its deadline; the next one gets the extra time.
    assert (resumed.id, created, resumed.deadline) == (first.id, False, T0 + timedelta(minutes=60))
    attempts.submit(first.id, student.id, session=session, now=T0 + timedelta(minutes=2))
    later = T0 + timedelta(hours=1)
    second, _ = attempts.start_attempt("module-202", student.id, session=session, now=later)
    assert second.deadline == later + timedelta(minutes=90)


def test_grant_replaces_and_remove_takes_away(session: Session) -> None:
    student = make_user(session, "acc-grant")
    prof = make_user(session, "acc-prof2")
    made = accommodations.grant(
        student.id, multiplier=1.5, extra_minutes=0, note="  letter of 3 March ", granted_by=prof.id,
        session=session, now=T0,
    )  # fmt: skip
    assert (made.time_multiplier, made.extra_minutes, made.note, made.granted_by) == (
        1.5,
        0,
        "letter of 3 March",
        prof.id,
    )
    changed = accommodations.grant(
        student.id, multiplier=1.0, extra_minutes=10, granted_by=None, session=session, now=T0 + timedelta(days=1)
    )
    assert (changed.time_multiplier, changed.extra_minutes, changed.granted_by) == (1.0, 10, None)
    assert changed.granted_at == T0 + timedelta(days=1)
    assert accommodations.describe(changed) == "10 extra minutes"
    assert accommodations.student_limit(60, student.id, session=session) == 70
    assert accommodations.remove(student.id, session=session) is True
    assert accommodations.get(student.id, session=session) is None
    assert accommodations.remove(student.id, session=session) is False
    assert accommodations.student_limit(60, student.id, session=session) == 60
    with pytest.raises(NotFound, match="no student 999999"):
        accommodations.grant(999999, multiplier=1.5, extra_minutes=0, granted_by=None, session=session, now=T0)
    with pytest.raises(InvalidInput):
        accommodations.grant(student.id, multiplier=1, extra_minutes=0, granted_by=None, session=session, now=T0)
    assert accommodations.get(student.id, session=session) is None


def seconds_left(page: str) -> int:
    match = re.search(r'data-seconds-left="(\d+)"', page)
    assert match, "no countdown on the page"
    return int(match.group(1))


def test_the_pages_give_a_student_with_time_and_a_half_90_minutes(client: TestClient, session: Session) -> None:
    student = make_user(session, "acc-web")
    make_accommodation(session, student.id, multiplier=1.5)
    sign_in(client, "acc-web")
    intro = client.get("/quizzes/module-202").text
    assert '<dd data-testid="time-limit">90 minutes' in intro
    assert "with your extra-time accommodation; the quiz's limit is 60 minutes" in intro
    assert "Your 90-minute clock starts when you press it." in intro
    started = client.post(
        "/quizzes/module-202/attempts", data={"csrf_token": csrf_token(client)}, follow_redirects=False
    )
    assert started.status_code == 303
    page = client.get(started.headers["location"]).text
    assert 90 * 60 - 60 < seconds_left(page) <= 90 * 60
    # The announcements are scaled to the student's own 90 minutes: the hour mark is one of them.
    assert 'data-announce-at="3600 1800 600 300 60"' in page and 'data-warn-at="300"' in page
    attempt = session.get(QuizAttempt, int(started.headers["location"].rsplit("/", 1)[1]))
    assert attempt is not None and attempt.deadline is not None
    assert attempt.deadline - attempt.started_at == timedelta(minutes=90)


def test_without_an_accommodation_the_intro_states_the_quizs_limit(client: TestClient, session: Session) -> None:
    make_user(session, "acc-none")
    sign_in(client, "acc-none")
    intro = client.get("/quizzes/module-202").text
    assert '<dd data-testid="time-limit">60 minutes</dd>' in intro and "extra-time" not in intro
    client.cookies.clear()
    assert '<dd data-testid="time-limit">60 minutes</dd>' in client.get("/quizzes/module-202").text


def test_the_api_gives_a_student_with_ten_extra_minutes_70(client: TestClient, session: Session) -> None:
    student = make_user(session, "acc-api")
    make_accommodation(session, student.id, extra_minutes=10)
    started = client.post("/api/v1/quizzes/module-202/attempts", headers=api_token(client, "acc-api"))
    assert started.status_code == 201, started.text
    body = started.json()
    deadline = datetime.fromisoformat(body["deadline"]) - datetime.fromisoformat(body["started_at"])
    assert deadline == timedelta(minutes=70)
