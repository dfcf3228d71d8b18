"""A student's own cards: made from a missed question no deck card covers, private, scheduled, exported."""

from __future__ import annotations

import sqlite3
import zipfile
from datetime import timedelta
from io import BytesIO
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.content.records import Question, Quiz
from app.errors import InvalidInput, NotFound
from app.flashcards import personal, personal_study
from app.flashcards.models import LEARNING, NEW, PersonalCard, PersonalReview
from tests.factories import csrf_token, make_user, sign_in
from tests.flashcards.test_missed import T0, take_ch35

HX = {"HX-Request": "true"}
NCCL = "ch35-q11"  # missed in take_ch35, and no deck card covers it


@pytest.fixture
def key(session: Session) -> dict[str, str]:
    return dict(session.execute(select(Question.id, Question.answer)).all())


def test_card_faces_put_the_question_in_front_and_the_answer_behind() -> None:
    question = Question(
        id="q", quiz_id="z", prompt_html="<p>Which?</p>", answer="B", explanation_html="<p>Because.</p>",
        options=[{"key": "A", "html": "one"}, {"key": "B", "html": "<em>two</em>"}], card_ids=[],
    )  # fmt: skip
    assert personal.card_faces(question) == (
        "<p>Which?</p>",
        '<p><strong>Answer:</strong> <em>two</em></p>\n<div class="explanation"><p>Because.</p></div>',
    )
    assert personal.covered(question, {"mdt-001"}) is False
    question.card_ids = ["mdt-001", "mdt-002"]
    assert personal.covered(question, {"mdt-002"}) is True
    assert personal.covered(question, set()) is False  # its cards are all retired


def test_a_card_is_made_once_and_only_from_an_uncovered_missed_question(session: Session, key: dict[str, str]) -> None:
    user = make_user(session, "mine-a")
    attempt_id = take_ch35(session, user.id, key)
    now = T0 + timedelta(minutes=10)
    card, made = personal.make_from_question(user.id, attempt_id, NCCL, session=session, now=now)
    assert made and card.user_id == user.id and card.state == NEW
    assert card.topic == "Chapter 35: Quiz -- Distributed Training and Scaling"
    assert "GPU-to-GPU" in card.front_html and "<strong>Answer:</strong> NCCL" in card.back_html
    again, made_again = personal.make_from_question(user.id, attempt_id, NCCL, session=session, now=now)
    assert (again.id, made_again) == (card.id, False)
    assert session.scalar(select(PersonalCard.id).where(PersonalCard.user_id == user.id).offset(1)) is None
    assert personal.made_for(user.id, [NCCL, "ch35-q01"], session=session) == {NCCL}

    with pytest.raises(InvalidInput, match="A deck card already teaches"):
        personal.make_from_question(user.id, attempt_id, "ch35-q01", session=session, now=now)
    with pytest.raises(InvalidInput, match="answered this question right"):
        personal.make_from_question(user.id, attempt_id, "ch35-q02", session=session, now=now)
    other = make_user(session, "mine-b")
    with pytest.raises(NotFound, match="of yours"):
        personal.make_from_question(other.id, attempt_id, NCCL, session=session, now=now)


def test_no_card_while_the_quiz_hides_its_answers(session: Session, key: dict[str, str]) -> None:
    user = make_user(session, "mine-hidden")
    attempt_id = take_ch35(session, user.id, key)
    quiz = session.get(Quiz, "ch35-quiz")
    assert quiz is not None
    quiz.show_answers = "never"
    session.commit()
    with pytest.raises(InvalidInput, match="does not show its answers"):
        personal.make_from_question(user.id, attempt_id, NCCL, session=session, now=T0 + timedelta(hours=1))
    assert personal.list_cards(user.id, session=session) == []


def test_the_queue_schedules_a_personal_card_with_fsrs(session: Session, key: dict[str, str]) -> None:
    user = make_user(session, "mine-q")
    attempt_id = take_ch35(session, user.id, key)
    now = T0 + timedelta(minutes=10)
    card, _ = personal.make_from_question(user.id, attempt_id, NCCL, session=session, now=now)
    view = personal_study.study_view(user.id, session=session, now=now)
    assert view.card is not None and view.card.id == card.id and view.kind == "new"
    assert view.counts.as_dict() == {"new": 1, "learning": 0, "review": 0}
    assert view.intervals[1] == timedelta(minutes=1) and view.intervals[4] == timedelta(minutes=10)

    after = personal_study.rate(user.id, card.id, 1, session=session, now=now, expected_version=0, fuzz=False)
    assert after.state == LEARNING and after.due == now + timedelta(minutes=1)
    later = personal_study.study_view(user.id, session=session, now=now)
    assert later.card is not None and later.kind == "learning"  # learn-ahead: due in a minute
    assert later.counts.as_dict() == {"new": 0, "learning": 1, "review": 0}
    assert session.scalar(select(PersonalReview.raw_rating).where(PersonalReview.card_id == card.id)) == 1

    assert personal_study.undo(user.id, session=session, now=now) == card.id
    session.refresh(card)
    assert (card.state, card.due, card.version) == (NEW, None, 2)
    personal_study.bury(user.id, card.id, session=session, now=now)
    assert personal_study.study_view(user.id, session=session, now=now).card is None


def test_the_pages_make_list_study_export_and_delete_a_card(
    client: TestClient, session: Session, key: dict[str, str], tmp_path: Path
) -> None:
    user = make_user(session, "mine-web")
    attempt_id = take_ch35(session, user.id, key)
    sign_in(client, "mine-web")
    result = client.get(f"/quizzes/attempts/{attempt_id}/result").text
    nccl = result.split(f'data-question="{NCCL}"')[1].split("</article>")[0]
    assert "Make a card from this question" in nccl
    q01 = result.split('data-question="ch35-q01"')[1].split("</article>")[0]
    assert "Make a card" not in q01  # deck cards teach it

    form = {"attempt": str(attempt_id), "question": NCCL, "csrf_token": csrf_token(client)}
    made = client.post("/flashcards/mine/from-question", data=form, headers=HX)
    assert made.status_code == 200 and "Card made." in made.text and f'id="make-{NCCL}"' in made.text
    again = client.post("/flashcards/mine/from-question", data=form, headers=HX)
    assert "You already made a card from this question" in again.text
    card = session.scalars(select(PersonalCard).where(PersonalCard.user_id == user.id)).one()
    assert "You made a card from this question" in client.get(f"/quizzes/attempts/{attempt_id}/result").text
    refused = client.post("/flashcards/mine/from-question", data=form | {"question": "ch35-q01"}, headers=HX)
    assert refused.status_code == 422 and "A deck card already teaches" in refused.text

    mine = client.get("/flashcards/mine").text
    assert f'id="mine-{card.id}"' in mine and "GPU-to-GPU" in mine and "data-delete-card" in mine
    assert "1 card you made" in client.get("/flashcards").text
    queue = client.get("/flashcards/mine/study").text
    assert f'data-card-id="{card.id}"' in queue and '<b data-count="new">1</b>' in queue
    rating = {"card_id": str(card.id), "rating": "4", "version": "0", "csrf_token": form["csrf_token"]}
    rated = client.post("/flashcards/mine/study/rate", headers=HX, data=rating)
    assert rated.status_code == 200 and "Rated Good" in rated.text

    apkg = client.get("/flashcards/mine/export.apkg")
    assert apkg.status_code == 200 and apkg.headers["content-disposition"] == 'attachment; filename="my-cards.apkg"'
    with zipfile.ZipFile(BytesIO(apkg.content)) as z:
        (tmp_path / "c.anki2").write_bytes(z.read("collection.anki2"))
    with sqlite3.connect(tmp_path / "c.anki2") as db:
        fields = [row[0] for row in db.execute("select flds from notes")]
    assert len(fields) == 1 and "GPU-to-GPU" in fields[0] and f"mine-{user.id}-{card.id}" in fields[0]

    # Another student sees none of it, and cannot touch it.
    make_user(session, "mine-other")
    sign_in(client, "mine-other")
    token = csrf_token(client)
    assert "GPU-to-GPU" not in client.get("/flashcards/mine").text
    assert "GPU-to-GPU" not in client.get("/flashcards/mine/study").text
    with zipfile.ZipFile(BytesIO(client.get("/flashcards/mine/export.apkg").content)) as z:
        (tmp_path / "o.anki2").write_bytes(z.read("collection.anki2"))
    with sqlite3.connect(tmp_path / "o.anki2") as db:
        assert db.execute("select count(*) from notes").fetchone()[0] == 0
    assert client.post(f"/flashcards/mine/cards/{card.id}/delete", data={"csrf_token": token}).status_code == 404
    stolen = client.post("/flashcards/mine/study/rate", headers=HX, data=rating | {"version": "1", "csrf_token": token})
    assert stolen.status_code == 404
    assert client.post("/flashcards/mine/from-question", data=form | {"csrf_token": token}).status_code == 404

    sign_in(client, "mine-web")
    deleted = client.post(f"/flashcards/mine/cards/{card.id}/delete", data={"csrf_token": csrf_token(client)},
                          follow_redirects=False)  # fmt: skip
    assert deleted.status_code == 303 and deleted.headers["location"] == "/flashcards/mine?done=deleted"
    assert "Card deleted." in client.get("/flashcards/mine?done=deleted").text
    assert session.scalars(select(PersonalCard).where(PersonalCard.user_id == user.id)).all() == []
