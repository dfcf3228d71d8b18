"""Every seed quiz question names the flashcards that teach it, or says in a comment why none does."""

from __future__ import annotations

import re

from app.content.models import ContentTree
from tests.conftest import CONTENT_DIR


def test_every_question_has_a_cards_line(content_tree: ContentTree) -> None:
    card_ids = {card.id for deck in content_tree.decks for card in deck.cards}
    questions = 0
    for path in sorted((CONTENT_DIR / "quizzes").glob("*.yaml")):
        # The YAML text, not the parsed tree: an empty list must carry its reason as a comment.
        blocks = re.split(r"\n  - id: ", path.read_text())[1:]
        for block in (b for b in blocks if re.match(r"(ch35|m202)-q\d+", b)):
            qid = block.split("\n", 1)[0]
            line = re.search(r"^    cards: \[(.*?)\](.*)$", block, re.M)
            assert line, f"{path.name}: {qid} has no cards: line"
            named = [c.strip() for c in line.group(1).split(",") if c.strip()]
            assert set(named) <= card_ids, f"{qid}: unknown cards {set(named) - card_ids}"
            if not named:
                assert re.fullmatch(r"  # no card covers .+", line.group(2)), f"{qid}: say why no card fits"
            questions += 1
    assert questions == 40


def test_most_questions_lead_to_cards(content_tree: ContentTree) -> None:
    with_cards = [q.id for quiz in content_tree.quizzes for q in quiz.questions if q.cards]
    assert len(with_cards) == 28  # 12 of the 40 (Ray, NCCL set-up, fault tolerance…) have no card


def test_both_seed_quizzes_shuffle_option_order(content_tree: ContentTree) -> None:
    # In Module 202, 15 of the 25 answers are B: a fixed order would teach the letter, not the answer.
    assert {quiz.id: quiz.shuffle_options for quiz in content_tree.quizzes} == {"ch35-quiz": True, "module-202": True}
