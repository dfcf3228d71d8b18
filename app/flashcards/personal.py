"""A student's own cards: made from a missed quiz question that no deck card covers.

Front: the question. Back: the right option and the explanation. Only the student who made a
card ever sees it; every query here is filtered by its owner, and another student's card is
"not found", never "forbidden", so its existence is not told either. A card is made only from
a question the student missed in a submitted attempt whose answers the quiz already shows,
so making one never reveals a key early.
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import delete, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.content.records import Card, Question, Quiz
from app.errors import InvalidInput, NotFound
from app.flashcards.models import PersonalCard, PersonalReview
from app.quizzes.models import QuizAttempt
from app.quizzes.service import hidden_keys

MINE = "mine"  # the personal deck's name in URLs: /flashcards/mine


@dataclass(frozen=True)
class MyDeck:
    """What the study and deck pages need of a deck, for the student's own cards."""

    id: str = MINE
    title: str = "My cards"
    rating_prompt: str = "How well did you know this?"
    rating_labels: dict[str, str] = field(default_factory=dict)


def card_faces(question: Question) -> tuple[str, str]:
    """The front and back HTML of a card made from ``question`` (pure): the prompt; the answer and why."""
    right = next((o for o in question.options if o.get("key") == question.answer), None)
    answer = right["html"] if right else html.escape(question.answer)
    back = f'<p><strong>Answer:</strong> {answer}</p>\n<div class="explanation">{question.explanation_html}</div>'
    return question.prompt_html, back


def covered(question: Question, live_card_ids: set[str]) -> bool:
    """Whether a live deck card teaches the question (its ``cards:`` in the quiz file) (pure)."""
    return any(card_id in live_card_ids for card_id in question.card_ids or [])


def _live_cards(card_ids: list[str], session: Session) -> set[str]:
    if not card_ids:
        return set()
    return set(session.scalars(select(Card.id).where(Card.id.in_(card_ids), Card.retired_at.is_(None))))


def _missed_question(user_id: int, attempt_id: int, question_id: str, session: Session, now: datetime) -> Question:
    attempt = session.get(QuizAttempt, attempt_id)
    if attempt is None or attempt.user_id != user_id:
        raise NotFound(f"No attempt {attempt_id} of yours.")
    if attempt.result is None or attempt.submitted_at is None:
        raise InvalidInput("Submit the attempt first: a card is made from a question you missed in a result.")
    if hidden_keys({(attempt.quiz_id, attempt.course_id)}, session=session, now=now):
        raise InvalidInput("This quiz does not show its answers yet, so a card with the answer cannot be made.")
    marks = {m["id"]: m for m in attempt.result.get("marks", [])}
    if question_id not in marks:
        raise NotFound(f"Question '{question_id}' is not in attempt {attempt_id}.")
    if marks[question_id]["correct"]:
        raise InvalidInput("You answered this question right: cards are made from the questions you missed.")
    question = session.get(Question, question_id)
    if question is None:
        raise NotFound(f"No question '{question_id}'.")
    return question


def make_from_question(
    user_id: int, attempt_id: int, question_id: str, *, session: Session, now: datetime
) -> tuple[PersonalCard, bool]:
    """The student's card for a question they missed in ``attempt_id``, made now unless it exists.

    Returns the card and whether it was made by this call. InvalidInput when a deck card already
    teaches the question (study that one), or the question was not missed, or its key is hidden.
    """
    question = _missed_question(user_id, attempt_id, question_id, session, now)
    mine = session.scalar(
        select(PersonalCard).where(PersonalCard.user_id == user_id, PersonalCard.question_id == question_id)
    )
    if mine is not None:
        return mine, False
    if covered(question, _live_cards(list(question.card_ids or []), session)):
        raise InvalidInput("A deck card already teaches this question: study it from your result instead.")
    front, back = card_faces(question)
    quiz = session.get(Quiz, question.quiz_id)
    card = PersonalCard(
        user_id=user_id, question_id=question_id, topic=quiz.title if quiz else None, front_html=front, back_html=back,
        created_at=now, updated_at=now, state=0, version=0, suspended=False,
    )  # fmt: skip
    try:
        with session.begin_nested():
            session.add(card)
    except IntegrityError:  # the same card made at the same moment in another tab: that one stands
        found = session.scalar(
            select(PersonalCard).where(PersonalCard.user_id == user_id, PersonalCard.question_id == question_id)
        )
        if found is None:
            raise
        return found, False
    return card, True


def made_for(user_id: int, question_ids: list[str], *, session: Session) -> set[str]:
    """Which of the questions the student already made a card from."""
    if not question_ids:
        return set()
    query = select(PersonalCard.question_id).where(
        PersonalCard.user_id == user_id, PersonalCard.question_id.in_(question_ids)
    )
    return {q for q in session.scalars(query) if q is not None}


def list_cards(user_id: int, *, session: Session) -> list[PersonalCard]:
    """The student's own cards, oldest first."""
    query = select(PersonalCard).where(PersonalCard.user_id == user_id).order_by(PersonalCard.id)
    return list(session.scalars(query))


def get_card(user_id: int, card_id: int, *, session: Session) -> PersonalCard:
    """One of the student's own cards; another student's is not found, as a missing one."""
    card = session.get(PersonalCard, card_id)
    if card is None or card.user_id != user_id:
        raise NotFound(f"You have no card {card_id}.")
    return card


def delete_card(user_id: int, card_id: int, *, session: Session) -> None:
    """Delete one of the student's own cards and its reviews."""
    card = get_card(user_id, card_id, session=session)
    session.execute(delete(PersonalReview).where(PersonalReview.card_id == card.id))
    session.delete(card)
    session.flush()


@dataclass(frozen=True)
class ExportedCard:
    """A personal card as the Anki export sees it: an id no deck card can have, stable across exports."""

    id: str
    topic: str | None
    front_html: str
    back_html: str


def export_deck(user_id: int, *, session: Session) -> tuple[MyDeck, list[ExportedCard]]:
    """The student's own cards for ``export.build_apkg``, as a deck of their own in Anki."""
    cards = [
        ExportedCard(f"{MINE}-{user_id}-{c.id}", c.topic, c.front_html, c.back_html)
        for c in list_cards(user_id, session=session)
    ]
    return MyDeck(id=f"{MINE}-{user_id}"), cards
