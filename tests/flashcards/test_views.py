"""The pages: study with htmx partials, browse, card info, statistics, settings, export."""

from __future__ import annotations

import io
import sqlite3
import tempfile
import zipfile
from pathlib import Path

import genanki
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from app.content.records import Card
from tests.factories import csrf_token, make_user, sign_in
from tests.flashcards.conftest import DECK

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
    assert "42× speedup" in back and '<aside class="erratum" data-field="back"><strong>Corrected:</strong>' in back
    assert "Corrected:" not in by_id["mdt-004"][1]  # a card that was not corrected has no note
    make_user(session, "reads-card-18")
    sign_in(client, "reads-card-18")
    page = client.get(f"/flashcards/{DECK}/cards/mdt-018")
    assert '<aside class="erratum" data-field="back">' in page.text
