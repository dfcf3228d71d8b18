"""Deck queries: listing, browsing with search and filters, card info and statistics."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.content.records import Card, Deck
from app.errors import InvalidInput, NotFound
from app.flashcards import stats as st
from app.flashcards.models import STATE_NAMES, CardState, Review
from app.flashcards.preferences import get_prefs
from app.flashcards.queue import Item
from app.flashcards.scheduling import Snapshot, retrievability
from app.flashcards.study import card_status, deck_items, snapshot_of

STATE_FILTERS = ("new", "learning", "review", "relearning", "suspended", "buried")
_TAG = re.compile(r"<[^>]+>")


def list_decks(*, session: Session) -> list[tuple[Deck, int]]:
    """Live decks with their live card counts."""
    live = (
        select(Card.deck_id, func.count().label("n")).where(Card.retired_at.is_(None)).group_by(Card.deck_id)
    ).subquery()
    rows = session.execute(
        select(Deck, func.coalesce(live.c.n, 0))
        .outerjoin(live, live.c.deck_id == Deck.id)
        .where(Deck.retired_at.is_(None))
        .order_by(Deck.position)
    ).all()
    return [(deck, int(n)) for deck, n in rows]


def get_deck(deck_id: str, *, session: Session) -> tuple[Deck, list[Card]]:
    deck = session.get(Deck, deck_id)
    if deck is None or deck.retired_at is not None:
        raise NotFound(f"No deck '{deck_id}'.")
    return deck, [c for c in deck.cards if c.retired_at is None]


@dataclass(frozen=True)
class Row:
    card: Card
    item: Item

    @property
    def state(self) -> str:
        return STATE_NAMES[self.item.snap.state]


@dataclass(frozen=True)
class Browse:
    deck: Deck
    rows: list[Row]
    topics: list[str]
    total: int


def _text(card: Card) -> str:
    return _TAG.sub(" ", f"{card.front_html} {card.back_html} {card.topic or ''}").lower()


def browse(
    deck_id: str, *, session: Session, user_id: int | None, now: datetime, text: str = "", topic: str = "",
    state: str = "",
) -> Browse:  # fmt: skip
    """The deck's cards matching a text search, a topic and a state (all optional)."""
    if state and state not in STATE_FILTERS:
        raise InvalidInput(f"Unknown state '{state}'; use one of {', '.join(STATE_FILTERS)}.", field="state")
    deck, cards = get_deck(deck_id, session=session)
    items = {i.card_id: i for i, _ in deck_items(user_id, deck_id, session=session)} if user_id else {}
    words = text.lower().split()
    rows = []
    for card in cards:
        item = items.get(card.id) or Item(card.id, card.position, Snapshot())
        if topic and card.topic != topic:
            continue
        if words and not all(w in _text(card) for w in words):
            continue
        buried = item.buried_until is not None and item.buried_until > now
        if (state == "suspended" and not item.suspended) or (state == "buried" and not buried):
            continue
        if state not in ("", "suspended", "buried") and STATE_NAMES[item.snap.state] != state:
            continue
        rows.append(Row(card, item))
    topics = sorted({c.topic for c in cards if c.topic})
    return Browse(deck, rows, topics, len(cards))


@dataclass(frozen=True)
class CardInfo:
    card: Card
    state: CardState | None
    snap: Snapshot
    retrievability: float | None
    history: list[Review]
    buried: bool


def card_info(user_id: int, card_id: str, *, session: Session, now: datetime) -> CardInfo:
    """State, stability, difficulty, retrievability, due date and review history of one card."""
    card, state = card_status(user_id, card_id, session=session)
    snap = snapshot_of(state)
    prefs = get_prefs(user_id, session=session)
    history = list(
        session.scalars(select(Review).where(Review.user_id == user_id, Review.card_id == card_id).order_by(Review.id))
    )
    buried = bool(state and state.buried_until and state.buried_until > now)
    return CardInfo(card, state, snap, retrievability(snap, now, prefs), history, buried)


def deck_stats(user_id: int, deck_id: str, *, session: Session, now: datetime) -> tuple[Deck, st.Stats]:
    """Counts by state, 30-day forecast, review calendar, true retention and answer buttons."""
    deck, _ = get_deck(deck_id, session=session)
    prefs = get_prefs(user_id, session=session)
    items = [i for i, _ in deck_items(user_id, deck_id, session=session)]
    rows = session.execute(
        select(Review.reviewed_at, Review.raw_rating, Review.rating, Review.state_before).where(
            Review.user_id == user_id, Review.deck_id == deck_id, Review.undone_at.is_(None)
        )
    ).all()
    reviews = [st.LoggedReview(at, raw, rating, before) for at, raw, rating, before in rows]
    return deck, st.compute(items, reviews, now, prefs.time_zone)
