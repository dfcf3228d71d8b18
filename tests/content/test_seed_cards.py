"""The mire-dis-train deck is a faithful conversion of its seed document.

The seed (``004_8c6267489fed25a8.txt``, "Mire_dis_train Flashcards") is parsed
here on its own, independently of the content files, and every card's question
and answer is compared with the converted card as a string, after a
normalisation that removes layout only: whitespace, list markers and Markdown
backslash escapes. A lost, added or changed word fails.

The seed has two layouts:

* cards 1-24 ("plain"): number, ``Q``, ``Topic: question``, ``A``, answer lines
  (lead line, ``  • `` bullets, ``  1. `` steps, ``- `` lines), then the rating
  block ``How well did you know this?`` / 1 / Not at all / 2 / 3 / 4 / 5 / Perfectly;
* cards 25-89 ("Markdown"): number, ``*Topic:* question``, and one line of
  Markdown whose list items were flattened onto it (`` - item - item``).

Some cards correct their source on purpose and say so in an ``errata`` list. The
fidelity tests compare the card as its source printed it (``as_in_source``: each
corrected field put back to the erratum's ``source``) with the seed; further
tests check that each erratum's ``source`` is the seed's text and that the card
really differs from it, and pin the list of corrected cards.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from app.content.errata import as_in_source
from app.content.models import Card, ContentTree, Deck

SEED_NAME = "004_8c6267489fed25a8.txt"
DECK_ID = "mire-dis-train"
CARD_COUNT = 89
DECK_DIR = Path(__file__).resolve().parents[2] / "content" / "decks" / DECK_ID

# In the flattened Markdown layout " - " separates list items, except these
# few places where it is a minus sign inside an item's text (card -> snippets).
IN_TEXT_MINUS = {86: ["80 GB - 48"]}

# The cards that correct their source, and the fields each one corrects.
CORRECTED = {
    "mdt-001": ["back"],
    "mdt-002": ["back"],
    "mdt-003": ["back"],
    "mdt-005": ["back"],
    "mdt-011": ["back"],
    "mdt-014": ["back"],
    "mdt-018": ["back"],
    "mdt-032": ["back"],
    "mdt-051": ["back"],
    "mdt-055": ["back"],
    "mdt-059": ["back"],
    "mdt-061": ["back"],
    "mdt-062": ["back"],
    "mdt-066": ["back"],
    "mdt-067": ["front", "back"],
    "mdt-071": ["back"],
    "mdt-075": ["back"],
    "mdt-080": ["back"],
}


@dataclass(frozen=True)
class SeedCard:
    number: int
    layout: str  # "plain" or "markdown"
    topic: str | None
    question: str  # without the topic prefix
    answer: str  # as written in the seed (lines joined with "\n")


@dataclass(frozen=True)
class Seed:
    title: str
    declared_count: int
    cards: dict[int, SeedCard]
    rating_blocks: list[list[str]]


PLAIN_TOPIC = re.compile(r"^([^:]+): (.+)$")
MARKDOWN_TOPIC = re.compile(r"^\*([^*]+):\* (.+)$")


def parse_seed(path: Path) -> Seed:
    lines = path.read_text(encoding="utf-8").splitlines()
    title = lines[0].strip()
    declared = re.fullmatch(r"\((\d+) cards\)", lines[2].strip())
    assert declared, f"unexpected header line {lines[2]!r}"
    cards: dict[int, SeedCard] = {}
    rating_blocks: list[list[str]] = []
    i, expected = 3, 1
    while i < len(lines):
        if not lines[i].strip():
            i += 1
            continue
        assert lines[i].strip() == str(expected), f"line {i + 1}: expected card {expected}, got {lines[i]!r}"
        if lines[i + 1].strip() == "Q":
            # plain layout: Q, question, A, answer lines, rating block
            j = i + 2
            while not lines[j].strip():
                j += 1
            question = lines[j].strip()
            j += 1
            while not lines[j].strip():
                j += 1
            assert lines[j].strip() == "A", f"line {j + 1}: expected 'A'"
            j += 1
            start = j
            while lines[j].strip() != "How well did you know this?":
                j += 1
            answer = "\n".join(lines[start:j]).strip("\n")
            block = [line.strip() for line in lines[j : j + 8]]
            rating_blocks.append(block)
            i = j + 8
            m = PLAIN_TOPIC.match(question)
            layout = "plain"
        else:
            # Markdown layout: one question line, one answer line
            question, answer = lines[i + 1].strip(), lines[i + 2].strip()
            i += 3
            m = MARKDOWN_TOPIC.match(question)
            layout = "markdown"
        topic, rest = (m.group(1), m.group(2)) if m else (None, question)
        cards[expected] = SeedCard(expected, layout, topic, rest, answer)
        expected += 1
    return Seed(title, int(declared.group(1)), cards, rating_blocks)


_ESCAPE = re.compile(r"\\([!-/:-@\[-`{-~])")


def _squash(text: str) -> str:
    return " ".join(text.split())


def normalise_seed_answer(card: SeedCard) -> str:
    text = card.answer
    if card.layout == "plain":
        text = re.sub(r"^\s*•\s*", "", text, flags=re.M)
        text = re.sub(r"^\s*- ", "", text, flags=re.M)
    else:
        keep = IN_TEXT_MINUS.get(card.number, [])
        for k, snippet in enumerate(keep):
            assert snippet in text, f"card {card.number}: {snippet!r} not in seed"
            text = text.replace(snippet, f"\x00{k}\x00")
        text = text.replace(" - ", " ")
        for k, snippet in enumerate(keep):
            text = text.replace(f"\x00{k}\x00", snippet)
    return _squash(text)


def normalise_back(markdown: str) -> str:
    text = re.sub(r"^\s*[-*+•] ", "", markdown, flags=re.M)
    text = _ESCAPE.sub(r"\1", text)
    return _squash(text)


def normalise_inline(text: str) -> str:
    return _squash(_ESCAPE.sub(r"\1", text))


@pytest.fixture(scope="module")
def seed(seeds_dir: Path) -> Seed:
    return parse_seed(seeds_dir / SEED_NAME)


@pytest.fixture(scope="module")
def deck(content_tree: ContentTree) -> Deck:
    found = [d for d in content_tree.decks if d.id == DECK_ID]
    assert len(found) == 1, f"deck {DECK_ID!r} not found in content/"
    return found[0]


@pytest.fixture(scope="module")
def cards_by_number(deck: Deck) -> dict:
    return {card.number: card for card in deck.cards}


@pytest.fixture(scope="module")
def source_cards_by_number(deck: Deck) -> dict[int, Card]:
    """Each card as the seed printed it: corrected fields put back to their errata's ``source``."""
    return {card.number: as_in_source(card) for card in deck.cards}


def test_seed_parses_into_89_cards(seed: Seed) -> None:
    assert seed.declared_count == CARD_COUNT
    assert sorted(seed.cards) == list(range(1, CARD_COUNT + 1))
    assert [c.layout for c in seed.cards.values()].count("plain") == 24


def test_deck_title_matches_seed(seed: Seed, deck: Deck) -> None:
    assert deck.title == seed.title


def test_deck_has_every_card_once(deck: Deck) -> None:
    numbers = [card.number for card in deck.cards]
    assert sorted(numbers) == list(range(1, CARD_COUNT + 1))
    assert [card.id for card in deck.cards] == [f"mdt-{n:03d}" for n in range(1, CARD_COUNT + 1)]
    for card in deck.cards:
        assert card.id == f"mdt-{card.number:03d}"


def test_one_file_per_card() -> None:
    names = sorted(p.name for p in (DECK_DIR / "cards").glob("*.md"))
    assert names == [f"{n:03d}.md" for n in range(1, CARD_COUNT + 1)]


def test_rating_scale_matches_seed(seed: Seed, deck: Deck) -> None:
    # Every plain card carries the same rating block; the deck keeps it once.
    assert len(seed.rating_blocks) == 24
    first = seed.rating_blocks[0]
    assert all(block == first for block in seed.rating_blocks)
    prompt, *scale = first
    labels: dict[int, str] = {}
    for here, after in zip(scale, [*scale[1:], ""], strict=True):
        if here.isdigit() and after and not after.isdigit():
            labels[int(here)] = after
    assert [s for s in scale if s.isdigit()] == ["1", "2", "3", "4", "5"]
    assert deck.rating_prompt == prompt
    assert deck.rating_labels == labels == {1: "Not at all", 5: "Perfectly"}


@pytest.mark.parametrize("number", range(1, CARD_COUNT + 1))
def test_card_question_matches_seed(number: int, seed: Seed, source_cards_by_number: dict) -> None:
    want = seed.cards[number]
    card = source_cards_by_number[number]
    assert card.topic == want.topic
    assert normalise_inline(card.front) == _squash(want.question)
    joined = f"{card.topic}: {card.front}" if card.topic else card.front
    want_joined = f"{want.topic}: {want.question}" if want.topic else want.question
    assert normalise_inline(joined) == _squash(want_joined)


@pytest.mark.parametrize("number", range(1, CARD_COUNT + 1))
def test_card_answer_matches_seed(number: int, seed: Seed, cards_by_number: dict, source_cards_by_number: dict) -> None:
    want = seed.cards[number]
    card = source_cards_by_number[number]
    assert normalise_back(card.back) == normalise_seed_answer(want)
    assert "How well did you know this?" not in card.back
    assert "How well did you know this?" not in cards_by_number[number].back


@pytest.mark.parametrize("number", range(1, CARD_COUNT + 1))
def test_card_keeps_seed_list_structure(number: int, seed: Seed, source_cards_by_number: dict) -> None:
    """Each seed list item is its own Markdown list line; numbered steps stay numbered."""
    want = seed.cards[number]
    back_lines = source_cards_by_number[number].back.splitlines()
    bullets = sum(1 for line in back_lines if line.startswith("- "))
    numbered = [int(m.group(1)) for line in back_lines if (m := re.match(r"^(\d+)\. ", line))]
    if want.layout == "plain":
        want_bullets = len(re.findall(r"^\s*(?:•|- )", want.answer, flags=re.M))
        want_numbered = [int(n) for n in re.findall(r"^\s+(\d+)\. ", want.answer, flags=re.M)]
    else:
        minus = sum(s.count(" - ") for s in IN_TEXT_MINUS.get(number, []))
        want_bullets = want.answer.count(" - ") - minus
        want_numbered = []
        k = 1
        while re.search(rf"(?:^| ){k}\. ", want.answer):
            want_numbered.append(k)
            k += 1
    assert bullets == want_bullets
    assert numbered == want_numbered


def test_corrected_cards_are_exactly_these(deck: Deck) -> None:
    corrected = {card.id: [e.field for e in card.errata] for card in deck.cards if card.errata}
    assert corrected == CORRECTED


@pytest.mark.parametrize("card_id", sorted(CORRECTED))
def test_erratum_source_is_the_seed_text(card_id: str, seed: Seed, deck: Deck) -> None:
    """Each erratum records what the seed says in that field, and the card now says something else."""
    card = next(c for c in deck.cards if c.id == card_id)
    want = seed.cards[card.number]
    assert card.errata
    for erratum in card.errata:
        assert erratum.note.strip()
        if erratum.field == "back":
            assert normalise_back(erratum.source) == normalise_seed_answer(want)
            assert normalise_back(card.back) != normalise_seed_answer(want)
        else:
            assert erratum.field == "front"
            assert normalise_inline(erratum.source) == _squash(want.question)
            assert normalise_inline(card.front) != _squash(want.question)
