"""From a missed quiz question to its flashcards: which cards are pending, the focused session, real reviews."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.content.records import Question
from app.flashcards import missed, study
from app.flashcards.models import LEARNING, CardState, Review
from app.quizzes import attempts
from tests.factories import csrf_token, make_user, sign_in
from tests.flashcards.conftest import DECK

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
HX = {"HX-Request": "true"}
# ch35-q01 teaches with mdt-028 and mdt-040; ch35-q11 (NCCL) has no card.
MISS = ("ch35-q01", "ch35-q11")


@pytest.fixture
def key(session: Session) -> dict[str, str]:
    return dict(session.execute(select(Question.id, Question.answer)).all())


def take_ch35(session: Session, user_id: int, key: dict[str, str], now: datetime = T0) -> int:
    """Submit a Chapter 35 attempt with every answer right except the questions in MISS."""
    attempt, _ = attempts.start_attempt("ch35-quiz", user_id, session=session, now=now)
    for qid in attempt.question_ids:
        choice = key[qid] if qid not in MISS else next(k for k in "ABCD" if k != key[qid])
        attempts.save_answer(attempt.id, user_id, qid, choice, session=session, now=now)
    attempts.submit(attempt.id, user_id, session=session, now=now + timedelta(minutes=5))
    session.commit()
    return attempt.id


def test_pending_keeps_cards_not_reviewed_since_flagged() -> None:
    flags = [("a", T0), ("b", T0), ("a", T0), ("c", T0)]
    last = {"a": T0 + timedelta(seconds=1), "b": T0 - timedelta(days=1)}
    assert missed.pending(flags, last) == ["b", "c"]
    assert missed.pending([], last) == []


def test_missed_question_cards_are_pending_until_reviewed(session: Session, key: dict[str, str]) -> None:
    user = make_user(session, "miss-a")
    attempt_id = take_ch35(session, user.id, key)
    now = T0 + timedelta(minutes=10)
    cards = missed.pending_cards(user.id, session=session, now=now, attempt_id=attempt_id)
    assert [c.id for c in cards] == ["mdt-028", "mdt-040"]
    assert [c.id for c in missed.pending_cards(user.id, session=session, now=now)] == ["mdt-028", "mdt-040"]

    view = missed.focus_view(user.id, session=session, now=now, attempt_id=attempt_id)
    assert view.card is not None and view.card.id == "mdt-028" and view.left == 2 and view.version == 0
    assert view.intervals[1] == timedelta(minutes=1)  # a new card: the first learning step

    # A rating is an ordinary FSRS review: a row in the log and a learning state with a due time.
    study.rate(user.id, "mdt-028", 1, session=session, now=now, expected_version=0, fuzz=False)
    state = session.scalar(select(CardState).where(CardState.user_id == user.id, CardState.card_id == "mdt-028"))
    assert state is not None and state.state == LEARNING and state.due == now + timedelta(minutes=1)
    assert session.scalar(select(Review.rating).where(Review.user_id == user.id)) == 1
    left = missed.focus_view(user.id, session=session, now=now, attempt_id=attempt_id)
    assert left.card is not None and left.card.id == "mdt-040" and left.left == 1

    # Undo puts the card back in the session; suspending one takes it out.
    study.undo(user.id, session=session, now=now)
    assert [c.id for c in missed.pending_cards(user.id, session=session, now=now)] == ["mdt-028", "mdt-040"]
    study.set_suspended(user.id, "mdt-040", True, session=session, now=now)
    assert [c.id for c in missed.pending_cards(user.id, session=session, now=now)] == ["mdt-028"]


def test_a_review_before_the_attempt_does_not_count(session: Session, key: dict[str, str]) -> None:
    user = make_user(session, "miss-b")
    study.rate(user.id, "mdt-028", 4, session=session, now=T0 - timedelta(days=2), fuzz=False)
    attempt_id = take_ch35(session, user.id, key)
    pending = missed.pending_cards(user.id, session=session, now=T0 + timedelta(hours=1), attempt_id=attempt_id)
    assert [c.id for c in pending] == ["mdt-028", "mdt-040"]


def test_result_page_lists_cards_and_the_session_studies_them(
    client: TestClient, session: Session, key: dict[str, str]
) -> None:
    user = make_user(session, "miss-web")
    sign_in(client, "miss-web")
    attempt_id = take_ch35(session, user.id, key)
    page = client.get(f"/quizzes/attempts/{attempt_id}/result")
    assert page.status_code == 200
    assert f'href="/flashcards/missed?attempt={attempt_id}"' in page.text and "Study these 2 cards now" in page.text
    # The cards sit under the question they teach; the question without a card lists none.
    q01 = page.text.split('data-question="ch35-q01"')[1].split("</article>")[0]
    assert 'data-card="mdt-028"' in q01 and 'data-card="mdt-040"' in q01
    q11 = page.text.split('data-question="ch35-q11"')[1].split("</article>")[0]
    assert "data-card=" not in q11
    q02 = page.text.split('data-question="ch35-q02"')[1].split("</article>")[0]
    assert "data-card=" not in q02  # answered right: nothing to study

    session_page = client.get(f"/flashcards/missed?attempt={attempt_id}")
    assert 'data-card-id="mdt-028"' in session_page.text and '<b data-count="missed">2</b>' in session_page.text
    token = csrf_token(client)
    form = {"card_id": "mdt-028", "rating": "1", "version": "0", "attempt": str(attempt_id), "csrf_token": token}
    first = client.post("/flashcards/missed/rate", data=form, headers=HX)
    assert first.status_code == 200 and first.text.lstrip().startswith('<section id="reviewer"')
    assert 'data-card-id="mdt-040"' in first.text and '<b data-count="missed">1</b>' in first.text
    stale = client.post("/flashcards/missed/rate", data=form, headers=HX)
    assert stale.status_code == 409 and "changed in another tab" in stale.text
    done = client.post("/flashcards/missed/rate", data=form | {"card_id": "mdt-040", "rating": "4"}, headers=HX)
    assert "data-missed-done" in done.text and f'href="/flashcards/{DECK}/study"' in done.text

    # The reviews are the normal scheduler's: the card rated Again is in the normal queue's learning count.
    queue = client.get(f"/flashcards/{DECK}/study").text
    assert re.search(r'<b data-count="learning">[12]</b>', queue), queue
    assert "You have reviewed the 2 flashcards" in client.get(f"/quizzes/attempts/{attempt_id}/result").text
    without_js = client.post("/flashcards/missed/rate", data=form | {"card_id": "mdt-040", "version": "1"},
                             follow_redirects=False)  # fmt: skip
    assert without_js.status_code == 303
    assert without_js.headers["location"] == f"/flashcards/missed?attempt={attempt_id}"


def test_missed_session_is_private(client: TestClient, session: Session, key: dict[str, str]) -> None:
    owner = make_user(session, "miss-owner")
    attempt_id = take_ch35(session, owner.id, key)
    make_user(session, "miss-other")
    sign_in(client, "miss-other")
    assert client.get(f"/flashcards/missed?attempt={attempt_id}").status_code == 404
    assert "No cards from missed questions are waiting" in client.get("/flashcards/missed").text


def test_an_open_attempt_has_nothing_to_study_yet(client: TestClient, session: Session) -> None:
    user = make_user(session, "miss-open")
    attempt, _ = attempts.start_attempt("module-202", user.id, session=session, now=T0)  # long past its deadline
    session.commit()
    sign_in(client, "miss-open")
    page = client.get(f"/flashcards/missed?attempt={attempt.id}")  # a reader session: nothing may be written
    assert page.status_code == 200 and "data-missed-done" in page.text
