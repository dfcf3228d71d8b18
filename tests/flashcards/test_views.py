"""The pages: study with htmx partials, browse, card info, statistics, settings, export."""

from __future__ import annotations

import io
import sqlite3
import tempfile
import zipfile
from datetime import timedelta
from pathlib import Path

import genanki
from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.accounts.models import User
from app.content.records import Card
from app.db import utcnow
from app.flashcards import service
from tests.factories import csrf_token, make_user, sign_in
from tests.flashcards.conftest import DECK
from tests.markup import numbers_table

HX = {"HX-Request": "true"}


def student(client: TestClient, session: Session, name: str = "ada") -> dict[str, str]:
    make_user(session, name)
    sign_in(client, name)
    return {**HX, "X-CSRF-Token": csrf_token(client)}


def test_study_needs_sign_in(client: TestClient) -> None:
    answer = client.get(f"/flashcards/{DECK}/study", follow_redirects=False)
    assert answer.status_code == 303 and answer.headers["location"].startswith("/signin")


def test_study_page_and_rating_swaps_the_reviewer(client: TestClient, session: Session) -> None:
    hx = student(client, session)
    page = client.get(f"/flashcards/{DECK}/study")
    assert page.status_code == 200 and "<html" in page.text and 'id="reviewer"' in page.text
    assert '<b data-count="new">20</b>' in page.text and 'data-card-id="mdt-001"' in page.text
    assert "1 and 2 count as Again, 3 Hard, 4 Good, 5 Easy" in page.text
    assert '<span class="interval">10m</span>' in page.text and '<span class="interval">8d</span>' in page.text
    assert "/static/js/flashcards.js" in page.text and "<script>" not in page.text and "style=" not in page.text
    rated = client.post(f"/flashcards/{DECK}/study/rate", data={"card_id": "mdt-001", "rating": "4", "version": "0",
                                                              "duration_ms": "1200"}, headers=hx)  # fmt: skip
    assert rated.status_code == 200
    assert rated.text.lstrip().startswith('<section id="reviewer"') and "<html" not in rated.text
    assert '<b data-count="new">19</b>' in rated.text and '<b data-count="learning">1</b>' in rated.text
    assert 'data-card-id="mdt-002"' in rated.text
    # A second tab still showing mdt-001 at version 0 is told to refresh.
    stale = client.post(f"/flashcards/{DECK}/study/rate", data={"card_id": "mdt-001", "rating": "1", "version": "0"},
                        headers=hx)  # fmt: skip
    assert stale.status_code == 409 and "Refresh" in stale.text and 'id="reviewer"' in stale.text
    undone = client.post(f"/flashcards/{DECK}/study/undo", headers=hx)
    assert (
        "Undone" in undone.text
        and 'data-card-id="mdt-001"' in undone.text
        and '<b data-count="new">20</b>' in undone.text
    )
    bad = client.post(f"/flashcards/{DECK}/study/rate", data={"card_id": "mdt-001", "rating": "9", "version": "3"},
                      headers=hx)  # fmt: skip
    assert bad.status_code == 422


def test_without_htmx_rating_redirects_back(client: TestClient, session: Session) -> None:
    student(client, session)
    data = {"card_id": "mdt-001", "rating": "5", "version": "0", "csrf_token": csrf_token(client)}
    answer = client.post(f"/flashcards/{DECK}/study/rate", data=data, follow_redirects=False)
    assert answer.status_code == 303 and answer.headers["location"] == f"/flashcards/{DECK}/study"


def test_bury_and_suspend_from_the_reviewer(client: TestClient, session: Session) -> None:
    hx = student(client, session)
    buried = client.post(f"/flashcards/{DECK}/study/bury", data={"card_id": "mdt-001"}, headers=hx)
    assert "Buried until tomorrow" in buried.text and 'data-card-id="mdt-002"' in buried.text
    suspended = client.post(f"/flashcards/{DECK}/study/suspend", data={"card_id": "mdt-002"}, headers=hx)
    assert 'data-card-id="mdt-003"' in suspended.text
    browse = client.get(f"/flashcards/{DECK}?state=suspended")
    assert browse.text.count('class="card"') == 1 and "mdt-002" in browse.text
    info = client.get(f"/flashcards/{DECK}/cards/mdt-002")
    assert "(suspended)" in info.text and "Unsuspend" in info.text
    client.post(
        f"/flashcards/{DECK}/cards/mdt-002/suspend", data={"suspended": "false", "csrf_token": csrf_token(client)}
    )
    assert "(suspended)" not in client.get(f"/flashcards/{DECK}/cards/mdt-002").text


def test_browse_search_topic_state_and_partial(client: TestClient, session: Session) -> None:
    assert client.get(f"/flashcards/{DECK}").text.count('class="card"') == 89
    ring = client.get(f"/flashcards/{DECK}?q=ring+all-reduce")
    assert 0 < ring.text.count('class="card"') < 89 and "mdt-003" in ring.text
    topic = session.get(Card, "mdt-003").topic  # type: ignore[union-attr]
    by_topic = client.get(f"/flashcards/{DECK}", params={"topic": topic}, headers=HX)
    assert by_topic.text.lstrip().startswith('<section id="results"') and "mdt-003" in by_topic.text
    assert client.get(f"/flashcards/{DECK}?state=review").text.count('class="card"') == 0
    assert client.get(f"/flashcards/{DECK}?state=bogus").status_code == 422


def test_card_info_shows_fsrs_figures_and_history(client: TestClient, session: Session) -> None:
    hx = student(client, session)
    client.post(
        f"/flashcards/{DECK}/study/rate", data={"card_id": "mdt-001", "rating": "5", "version": "0"}, headers=hx
    )
    info = client.get(f"/flashcards/{DECK}/cards/mdt-001")
    assert info.status_code == 200
    for text in ('data-fact="state">review', "8.30 days", "/ 10", "100%", "Easy", "Review history"):
        assert text in info.text, text


def test_stats_page_draws_svg(client: TestClient, session: Session) -> None:
    hx = student(client, session)
    before = client.get(f"/flashcards/{DECK}/stats").text
    assert before.count("<svg") >= 4 and 'data-stat="forecast-total">0 cards' in before
    client.post(
        f"/flashcards/{DECK}/study/rate", data={"card_id": "mdt-001", "rating": "5", "version": "0"}, headers=hx
    )
    after = client.get(f"/flashcards/{DECK}/stats").text
    assert 'data-stat="forecast-total">1 cards' in after and "+8d: 1" in after
    assert 'data-count="young">1<' in after and 'data-stat="reviews-today">1<' in after


def test_settings_page_saves_and_rejects(client: TestClient, session: Session) -> None:
    student(client, session)
    page = client.get("/flashcards/settings")
    assert 'value="0.90"' in page.text and 'value="1m 10m"' in page.text
    form = {"desired_retention": "0.85", "new_per_day": "5", "reviews_per_day": "100", "learning_steps": "2m 15m",
            "relearning_steps": "10m", "time_zone": "Europe/Paris", "csrf_token": csrf_token(client)}  # fmt: skip
    assert "Settings saved" in client.post("/flashcards/settings", data=form).text
    assert '<b data-count="new">5</b>' in client.get(f"/flashcards/{DECK}/study").text
    for field, value, message in (("desired_retention", "0.99", "between 0.70 and 0.97"),
                                  ("time_zone", "Mars/Olympus", "Unknown time zone"),
                                  ("learning_steps", "1x", "Write steps")):  # fmt: skip
        answer = client.post("/flashcards/settings", data={**form, field: value})
        assert answer.status_code == 422 and message in answer.text


def apkg_notes(content: bytes) -> tuple[list[tuple[str, str]], int]:
    """The (guid, fields) of every note in an .apkg, and its number of cards."""
    with zipfile.ZipFile(io.BytesIO(content)) as package, tempfile.TemporaryDirectory() as tmp:
        collection = Path(tmp) / "collection.anki2"
        collection.write_bytes(package.read("collection.anki2"))
        db = sqlite3.connect(collection)
        notes = db.execute("SELECT guid, flds FROM notes ORDER BY guid").fetchall()
        cards = db.execute("SELECT count(*) FROM cards").fetchone()[0]
        db.close()
    return notes, cards


def test_apkg_export_has_all_89_notes_with_stable_guids(client: TestClient) -> None:
    first = client.get(f"/flashcards/{DECK}/export.apkg")
    assert first.status_code == 200 and first.headers["content-disposition"].endswith('.apkg"')
    notes, cards = apkg_notes(first.content)
    assert len(notes) == 89 and cards == 89
    ids = {flds.split("\x1f")[3] for _, flds in notes}
    assert len(ids) == 89 and "mdt-003" in ids
    assert {guid for guid, _ in notes} == {genanki.guid_for("ringlab", i) for i in ids}
    # Re-export: the same notes under the same GUIDs, so Anki updates instead of duplicating.
    # (Not the same bytes: the zip records each file's time with 2-second resolution.)
    assert apkg_notes(client.get(f"/flashcards/{DECK}/export.apkg").content) == (notes, cards)


def test_a_corrected_card_keeps_its_guid_and_carries_its_erratum_into_anki(
    client: TestClient, session: Session
) -> None:
    notes, _ = apkg_notes(client.get(f"/flashcards/{DECK}/export.apkg").content)
    by_id = {flds.split("\x1f")[3]: (guid, flds.split("\x1f")[1]) for guid, flds in notes}
    guid, back = by_id["mdt-018"]
    assert guid == genanki.guid_for("ringlab", "mdt-018")  # the note Anki has updates in place
    assert "42× speedup" in back
    assert '<div class="erratum" role="note" data-field="back"><strong>Corrected:</strong>' in back
    assert "Corrected:" not in by_id["mdt-004"][1]  # a card that was not corrected has no note
    make_user(session, "reads-card-18")
    sign_in(client, "reads-card-18")
    page = client.get(f"/flashcards/{DECK}/cards/mdt-018")
    assert '<div class="erratum" role="note" data-field="back">' in page.text


def test_stats_page_gives_each_chart_its_numbers(client: TestClient, session: Session) -> None:
    hx = student(client, session, "grace")
    for card, rating in (("mdt-001", "5"), ("mdt-002", "1"), ("mdt-003", "4")):
        client.post(
            f"/flashcards/{DECK}/study/rate", data={"card_id": card, "rating": rating, "version": "0"}, headers=hx
        )
    page = client.get(f"/flashcards/{DECK}/stats").text
    user = session.scalars(select(User).where(User.username == "grace")).one()
    _, figures = service.deck_stats(user.id, DECK, session=session, now=utcnow())

    forecast = numbers_table(page, "forecast")
    assert forecast.columns == ["Day", "Date", "Cards due"] and len(forecast.rows) == 30
    assert [int(row[2]) for row in forecast.rows] == figures.forecast and sum(figures.forecast) >= 1
    assert forecast.rows[0][:2] == ["today", figures.today.strftime("%a %d %b")]

    calendar = numbers_table(page, "calendar")
    assert calendar.columns == ["Week", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"]
    start = figures.first_day - timedelta(days=figures.first_day.weekday())
    by_day = {
        start + timedelta(days=7 * w + d): cell for w, row in enumerate(calendar.rows) for d, cell in enumerate(row[1:])
    }
    assert {day: int(n) for day, n in by_day.items() if n and n != "0"} == figures.heatmap == {figures.today: 3}
    assert all(n == "" for day, n in by_day.items() if day > figures.today)

    buttons = numbers_table(page, "buttons")
    assert buttons.columns == ["Button", "Scheduled as", "Reviews"]
    assert {int(b): int(n) for b, _, n in buttons.rows} == figures.buttons == {1: 1, 2: 0, 3: 0, 4: 1, 5: 1}
    assert [row[1] for row in buttons.rows] == ["Again", "Again", "Hard", "Good", "Easy"]

    for table in (forecast, calendar, buttons):  # headers a screen reader can tie each number to
        assert table.caption and all(kinds[0] in ("th col", "th row") for kinds in table.scopes)
        assert all(kinds[1:] == ["td"] * (len(kinds) - 1) for kinds in table.scopes[1:])
    assert page.count('role="img" aria-label="') == 4
    assert 'aria-label="Answer buttons pressed: 1 Again, 1, 2 Again, 0, 3 Hard, 0, 4 Good, 1, 5 Easy, 1"' in page


def test_one_key_shortcuts_are_a_setting_the_reviewer_follows(client: TestClient, session: Session) -> None:
    hx = student(client, session, "kit")
    page = client.get(f"/flashcards/{DECK}/study").text
    assert (
        'data-shortcuts="on"' in page and 'aria-keyshortcuts="4"' in page and 'aria-keyshortcuts="U Control+Z"' in page
    )
    assert 'name="keyboard_shortcuts" value="on" checked' in client.get("/flashcards/settings").text
    form = {"desired_retention": "0.90", "new_per_day": "20", "reviews_per_day": "200", "learning_steps": "1m 10m",
            "relearning_steps": "10m", "time_zone": "UTC", "keyboard_shortcuts": "off",
            "csrf_token": csrf_token(client)}  # fmt: skip
    assert "Settings saved" in client.post("/flashcards/settings", data=form).text
    assert 'name="keyboard_shortcuts" value="off" checked' in client.get("/flashcards/settings").text
    page = client.get(f"/flashcards/{DECK}/study").text
    assert 'data-shortcuts="off"' in page and "One-key shortcuts are off" in page
    assert 'aria-keyshortcuts="4"' not in page and 'aria-keyshortcuts="Control+Z"' in page
    rated = client.post(f"/flashcards/{DECK}/study/rate", data={"card_id": "mdt-001", "rating": "4", "version": "0"},
                        headers=hx)  # fmt: skip
    assert 'data-shortcuts="off"' in rated.text  # the partial follows the setting too
    assert client.post("/flashcards/settings", data={**form, "keyboard_shortcuts": "sometimes"}).status_code == 422


def test_a_rating_or_undo_is_announced_and_the_next_card_takes_focus(client: TestClient, session: Session) -> None:
    hx = student(client, session, "lin")
    page = client.get(f"/flashcards/{DECK}/study").text
    assert "data-announce" not in page and 'aria-live="polite"' not in page.split('<main id="main"', 1)[1]
    rated = client.post(f"/flashcards/{DECK}/study/rate", data={"card_id": "mdt-001", "rating": "4", "version": "0"},
                        headers=hx)  # fmt: skip
    assert 'data-announce="Rated Good. The card comes back in 10m."' in rated.text
    assert 'data-card-id="mdt-002" tabindex="-1" data-autofocus' in rated.text
    assert '<div class="answer" role="region" aria-label="Answer" tabindex="-1" hidden>' in rated.text
    undone = client.post(f"/flashcards/{DECK}/study/undo", headers=hx)
    assert 'data-announce="Undone: the card is back as it was."' in undone.text
