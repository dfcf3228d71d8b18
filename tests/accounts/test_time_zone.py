"""A student's time zone: taken at sign-up from a list (the browser preselects its own), used for every time shown."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.accounts.models import User
from app.flashcards import preferences, study
from app.flashcards.models import StudySettings
from app.web.templating import local_time
from tests.factories import csrf_token, make_user, sign_in


def signup(client: TestClient, username: str, **extra: str):  # type: ignore[no-untyped-def]
    data = {"username": username, "password": "long-enough-pw", "csrf_token": csrf_token(client), **extra}
    return client.post("/signup", data=data, follow_redirects=False)


def test_the_sign_up_form_offers_a_list_the_browser_preselects(client: TestClient) -> None:
    page = client.get("/signup").text
    assert '<select name="time_zone" data-browser-zone' in page and "<option>Europe/Paris</option>" in page
    assert "<option selected>UTC</option>" in page and "/static/js/timezone.js" in page


def test_a_new_account_keeps_the_zone_chosen(client: TestClient, session: Session) -> None:
    assert signup(client, "tz-ada", time_zone="America/Sao_Paulo").status_code == 303
    user = session.scalars(select(User).where(User.username_key == "tz-ada")).one()
    assert preferences.zone_of(user.id, session=session) == "America/Sao_Paulo"
    assert preferences.get_prefs(user.id, session=session).time_zone == "America/Sao_Paulo"
    assert preferences.get_prefs(user.id, session=session).new_per_day == 20  # the other settings stay defaults
    settings_page = client.get("/flashcards/settings").text
    assert "<option selected>America/Sao_Paulo</option>" in settings_page


def test_an_unknown_zone_is_refused_and_nothing_is_created(client: TestClient, session: Session) -> None:
    response = signup(client, "tz-bad", time_zone="Mars/Olympus")
    assert response.status_code == 422 and "Unknown time zone &#39;Mars/Olympus&#39;" in response.text
    assert 'aria-invalid="true"' in response.text and "data-chosen" in response.text
    assert session.scalars(select(User).where(User.username_key == "tz-bad")).first() is None
    assert "Mars/Olympus" not in session.scalars(select(StudySettings.time_zone)).all()


def test_times_are_shown_in_the_students_zone(client: TestClient, session: Session) -> None:
    moment = datetime(2026, 7, 1, 22, 30, tzinfo=UTC)
    assert local_time(moment, "Europe/Paris") == "02 Jul 2026, 00:30 CEST"
    assert local_time(moment, "UTC", "%H:%M %Z") == "22:30 UTC"
    assert local_time(None, "UTC") == "—"
    user = make_user(session, "tz-page")
    preferences.set_time_zone(user.id, "Asia/Kolkata", session=session)
    session.commit()
    sign_in(client, "tz-page")
    started = client.post("/quizzes/ch35-quiz/attempts", data={"csrf_token": csrf_token(client)})
    assert started.status_code == 200 and "IST</time>" in started.text and " UTC" not in started.text


def test_the_zone_chosen_at_sign_up_sets_the_flashcard_day(client: TestClient, session: Session) -> None:
    assert signup(client, "tz-auckland", time_zone="Pacific/Auckland").status_code == 303
    user = session.scalars(select(User).where(User.username_key == "tz-auckland")).one()
    day_starts = datetime(2026, 1, 15, 15, 0, tzinfo=UTC)  # 4 am on 16 January in Auckland (NZDT, UTC+13)
    for n in range(1, 21):
        study.rate(user.id, f"mdt-{n:03d}", 5, session=session, now=day_starts - timedelta(hours=1), fuzz=False)
    before = study.study_view(user.id, "mire-dis-train", session=session, now=day_starts - timedelta(minutes=1))
    assert before.counts.new == 0  # the day's 20 new cards are done
    after = study.study_view(user.id, "mire-dis-train", session=session, now=day_starts)
    assert after.counts.new == 20  # a new study day at 4 am Auckland time, not at 4 am UTC
