"""Anki export: a deck as an .apkg built with genanki.

Note GUIDs (and the deck and model ids) are derived from our stable ids, so importing
a later export into Anki updates the notes already there instead of adding copies.
"""

from __future__ import annotations

import hashlib
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

import genanki


class DeckLike(Protocol):
    """What an export needs of a deck: a deck of the content, or a student's own cards."""

    @property
    def id(self) -> str: ...
    @property
    def title(self) -> str: ...


class CardLike(Protocol):
    @property
    def id(self) -> str: ...
    @property
    def topic(self) -> str | None: ...
    @property
    def front_html(self) -> str: ...
    @property
    def back_html(self) -> str: ...


CSS = """.card { font-family: system-ui, sans-serif; font-size: 18px; text-align: left; line-height: 1.45; }
.topic { color: #888; font-size: 13px; text-transform: uppercase; letter-spacing: .05em; }
table { border-collapse: collapse; } td, th { border: 1px solid #ccc; padding: 2px 6px; }"""


def stable_id(*parts: str) -> int:
    """A positive 31-bit id from text, the same on every export."""
    return int.from_bytes(hashlib.sha256("\x1f".join(parts).encode()).digest()[:4], "big") >> 1 | 1 << 30


def note_guid(card_id: str) -> str:
    return str(genanki.guid_for("ringlab", card_id))


def model(deck: DeckLike) -> genanki.Model:
    return genanki.Model(
        stable_id("ringlab-model", "basic-v1"),
        "Ringlab card",
        fields=[{"name": "Front"}, {"name": "Back"}, {"name": "Topic"}, {"name": "RinglabId"}],
        templates=[{
            "name": "Card 1",
            "qfmt": '<div class="topic">{{Topic}}</div>{{Front}}',
            "afmt": '{{FrontSide}}<hr id="answer">{{Back}}',
        }],
        css=CSS,
        sort_field_index=0,
    )  # fmt: skip


def build_apkg(deck: DeckLike, cards: Sequence[CardLike]) -> bytes:
    """The deck's live cards as an .apkg file's bytes."""
    anki_deck = genanki.Deck(stable_id("ringlab-deck", deck.id), deck.title)
    note_model = model(deck)
    for card in cards:
        tags = [f"ringlab::{(card.topic or 'general').replace(' ', '_')}"]
        fields = [card.front_html, card.back_html, card.topic or "", card.id]
        anki_deck.add_note(genanki.Note(model=note_model, fields=fields, guid=note_guid(card.id), tags=tags))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "deck.apkg"
        # A fixed timestamp keeps the file identical for identical content.
        genanki.Package(anki_deck).write_to_file(str(path), timestamp=1_700_000_000.0)
        return path.read_bytes()
