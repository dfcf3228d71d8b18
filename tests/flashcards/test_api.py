"""The JSON API, with a bearer token, exactly as issue 5 specifies it."""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

from fastapi.testclient import TestClient
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.flashcards.models import Review, StudySettings
from tests.factories import api_token, make_user
from tests.flashcards.conftest import DECK


def reviews(session: Session) -> int:
    return session.scalar(select(func.count()).select_from(Review)) or 0


def test_decks_queue_card(client: TestClient, session: Session) -> None:
    make_user(session, "ada")
    auth = api_token(client, "ada")
    assert client.get("/api/v1/decks").status_code == 401
    decks = client.get("/api/v1/decks", headers=auth).json()
    assert {"id": DECK, "title": "Mire_dis_train Flashcards", "card_count": 89} in decks
    queue = client.get(f"/api/v1/decks/{DECK}/queue", headers=auth).json()
    assert queue["counts"] == {"new": 20, "learning": 0, "review": 0}
    assert set(queue["card"]) == {"id", "topic", "front", "version"} and queue["card"]["id"] == "mdt-001"
    card = client.get("/api/v1/cards/mdt-001", headers=auth).json()
    assert set(card) == {
        "id",
        "topic",
        "front",
        "back",
        "state",
        "due",
        "stability",
        "difficulty",
        "suspended",
        "buried",
        "version",
    }
    assert (card["state"], card["due"], card["stability"], card["suspended"], card["buried"]) == (
        "new",
        None,
        None,
        False,
        False,
    )


def away_from_the_day_start() -> str:
    """A time zone where it is now 06:00-20:59: a learning step of minutes cannot cross the study day's
    4 am start there, so what counts as today does not depend on when the test runs."""
    now = datetime.now(UTC)
    return next(z for z in ("UTC", "Asia/Tokyo") if 6 <= now.astimezone(ZoneInfo(z)).hour <= 20)


def test_review_then_queue_then_undo(client: TestClient, session: Session) -> None:
    ada = make_user(session, "ada")
    session.add(StudySettings(user_id=ada.id, time_zone=away_from_the_day_start()))
    session.commit()
    auth = api_token(client, "ada")
    body = {"card_id": "mdt-001", "rating": 4, "version": 0, "duration_ms": 3000, "review_id": "r-1"}
    done = client.post("/api/v1/reviews", json=body, headers=auth)
    assert done.status_code == 200, done.text
    assert done.json()["card_id"] == "mdt-001" and done.json()["state"] == "learning"
    assert done.json()["interval_days"] == 0 and done.json()["due"]
    queue = client.get(f"/api/v1/decks/{DECK}/queue", headers=auth).json()
    assert queue["counts"] == {"new": 19, "learning": 1, "review": 0} and queue["card"]["id"] == "mdt-002"
    easy = client.post("/api/v1/reviews", json={"card_id": "mdt-002", "rating": 5, "version": 0}, headers=auth).json()
    assert (easy["state"], easy["interval_days"]) == ("review", 8)
    restored = client.post("/api/v1/reviews/undo", headers=auth)
    assert restored.status_code == 200
    assert restored.json()["id"] == "mdt-002" and restored.json()["state"] == "new"
    assert reviews(session) == 2  # nothing is lost from the log


def test_same_review_id_twice_is_recorded_once(client: TestClient, session: Session) -> None:
    make_user(session, "ada")
    auth = api_token(client, "ada")
    body = {"card_id": "mdt-001", "rating": 3, "version": 0, "review_id": "same"}
    first = client.post("/api/v1/reviews", json=body, headers=auth).json()
    second = client.post("/api/v1/reviews", json=body, headers=auth).json()
    assert first == second and reviews(session) == 1


def test_bad_input(client: TestClient, session: Session) -> None:
    make_user(session, "ada")
    auth = api_token(client, "ada")
    for rating in (0, 6, "x"):
        body = {"card_id": "mdt-001", "rating": rating, "version": 0}
        answer = client.post("/api/v1/reviews", json=body, headers=auth)
        assert answer.status_code == 422, rating
        assert "rating" in answer.json()["detail"]
    unknown = {"card_id": "nope", "rating": 3, "version": 0}
    assert client.post("/api/v1/reviews", json=unknown, headers=auth).status_code == 404
    assert client.get("/api/v1/cards/nope", headers=auth).status_code == 404
    assert client.get("/api/v1/decks/nope/queue", headers=auth).status_code == 404
    assert client.post("/api/v1/reviews/undo", headers=auth).status_code == 409
    assert reviews(session) == 0


def test_stats(client: TestClient, session: Session) -> None:
    make_user(session, "ada")
    auth = api_token(client, "ada")
    for card_id, rating in (("mdt-001", 5), ("mdt-002", 1), ("mdt-003", 4)):
        client.post("/api/v1/reviews", json={"card_id": card_id, "rating": rating, "version": 0}, headers=auth)
    stats = client.get(f"/api/v1/decks/{DECK}/stats", headers=auth).json()
    assert stats["counts"] == {"new": 86, "learning": 2, "young": 1, "mature": 0, "suspended": 0}
    assert stats["answer_buttons"] == {"1": 1, "2": 0, "3": 0, "4": 1, "5": 1}
    assert len(stats["forecast"]) == 30 and sum(stats["forecast"]) == 3 and stats["reviews_today"] == 3


def test_a_stale_rating_gets_409_and_records_nothing(client: TestClient, session: Session) -> None:
    """A client that retries a rating with a fresh review_id names the version it was shown: no second review."""
    make_user(session, "ada")
    auth = api_token(client, "ada")
    shown = client.get(f"/api/v1/decks/{DECK}/queue", headers=auth).json()["card"]
    assert (shown["id"], shown["version"]) == ("mdt-001", 0)
    body = {"card_id": "mdt-001", "rating": 3, "version": shown["version"]}
    first = client.post("/api/v1/reviews", json=body | {"review_id": "try-1"}, headers=auth)
    assert first.status_code == 200, first.text
    retried = client.post("/api/v1/reviews", json=body | {"review_id": "try-2"}, headers=auth)
    assert retried.status_code == 409 and "detail" in retried.json()
    assert reviews(session) == 1
    assert client.get("/api/v1/cards/mdt-001", headers=auth).json()["version"] == 1
    again = client.post("/api/v1/reviews", json=body | {"version": 1, "review_id": "try-3"}, headers=auth)
    assert again.status_code == 200 and reviews(session) == 2
    missing = client.post("/api/v1/reviews", json={"card_id": "mdt-002", "rating": 3}, headers=auth)
    assert missing.status_code == 422 and "version" in missing.json()["detail"]
    assert reviews(session) == 2
