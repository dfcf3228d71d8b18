"""Deck queries."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.content.records import Card, Deck
from app.errors import NotFound


def list_decks(*, session: Session) -> list[tuple[Deck, int]]:
    decks = list(session.scalars(select(Deck).where(Deck.retired_at.is_(None)).order_by(Deck.position)))
    return [(d, sum(1 for c in d.cards if c.retired_at is None)) for d in decks]


def get_deck(deck_id: str, *, session: Session) -> tuple[Deck, list[Card]]:
    deck = session.get(Deck, deck_id)
    if deck is None or deck.retired_at is not None:
        raise NotFound(f"No deck '{deck_id}'.")
    return deck, [c for c in deck.cards if c.retired_at is None]
