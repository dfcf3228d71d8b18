"""Errata in content files: validated with path:line, rebuilt as the source printed them, shown after sync."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy.orm import Session

from app.content.errata import as_in_source, notes_html, notes_markdown
from app.content.loader import load_tree
from app.content.models import AnswerPart, Erratum
from app.content.records import Card, Question
from app.content.source import ContentError
from app.content.sync import sync_tree
from tests.content.factories import CARD, QUIZ, write_tree

ANSWER_ERRATUM = """\
    errata:
      - field: answer
        source: A
        note: the source gave A; broadcast copies, it does not sum.
"""
Q = "content/quizzes/tiny-quiz.yaml:"


def _quiz_with(errata: str) -> str:
    return QUIZ.replace("    answer: B\n", "    answer: B\n" + errata, 1)


def _problems(root: Path) -> list[str]:
    with pytest.raises(ContentError) as info:
        load_tree(root / "content")
    return [str(p) for p in info.value.problems]


def test_an_erratum_is_loaded_and_rebuilds_the_source(tmp_path: Path) -> None:
    tree = load_tree(write_tree(tmp_path / "content", **{"quizzes/tiny-quiz.yaml": _quiz_with(ANSWER_ERRATUM)}))
    question = tree.quizzes[0].questions[0]
    assert question.answer == "B"
    assert question.errata == [
        Erratum(field="answer", source="A", note="the source gave A; broadcast copies, it does not sum.")
    ]
    original = as_in_source(question)
    assert (original.answer, original.errata, original.prompt) == ("A", [], question.prompt)


def test_unknown_repeated_and_unchanged_errata_are_refused_with_their_lines(tmp_path: Path) -> None:
    errata = """\
    errata:
      - field: answr
        source: A
        note: a typo in the field name.
      - field: options.B
        source: All-reduce
        note: nothing changed.
      - field: explanation
        source: old text
        note: first.
      - field: explanation
        source: older text
        note: second.
"""
    root = write_tree(tmp_path / "content", **{"quizzes/tiny-quiz.yaml": _quiz_with(errata)})
    lines = (root / "quizzes/tiny-quiz.yaml").read_text().splitlines()
    at = [n for n, line in enumerate(lines, 1) if line.strip() in ("- field: answr", "source: All-reduce")]
    at.append(max(n for n, line in enumerate(lines, 1) if line.strip() == "- field: explanation"))
    assert _problems(tmp_path) == [
        f"{Q}{at[0]}: erratum field 'answr' is not one of prompt, options.A, options.B, answer, explanation",
        f"{Q}{at[1]}: the erratum for 'options.B' gives the text the item has now as its source: "
        "'source' is what the source document said before the correction",
        f"{Q}{at[2]}: a second erratum for 'explanation': write one per field",
    ]


def test_card_and_part_errata_are_checked_too(tmp_path: Path) -> None:
    card = CARD.replace("  What does all-reduce do?\n", "  What does all-reduce do?\nerrata:\n  - field: face\n"
                        "    source: x\n    note: y\n")  # fmt: skip
    write_tree(tmp_path / "content", **{"decks/tiny-deck/cards/001.md": card})
    assert _problems(tmp_path) == [
        "content/decks/tiny-deck/cards/001.md:8: erratum field 'face' is not one of front, back"
    ]
    part = AnswerPart(id="p", prompt="x", value=3, tolerance=0, unit="", explanation="e",
                      errata=[Erratum(field="value", source="2.0007", note="n")])  # fmt: skip
    assert as_in_source(part).value == 2.0007


def test_a_number_written_as_the_source_is_kept_as_its_text() -> None:
    assert Erratum.model_validate({"field": "value", "source": 2.0007, "note": "n"}).source == "2.0007"
    assert Erratum.model_validate({"field": "value", "source": 40, "note": "n"}).source == "40"


def test_the_note_is_shown_where_the_answer_shows(tmp_path: Path, session: Session) -> None:
    card = CARD.replace("  What does all-reduce do?\n", "  What does all-reduce do?\nerrata:\n  - field: back\n"
                        "    source: Adds.\n    note: the source said *adds*.\n")  # fmt: skip
    tree = load_tree(
        write_tree(
            tmp_path / "content",
            **{"quizzes/tiny-quiz.yaml": _quiz_with(ANSWER_ERRATUM), "decks/tiny-deck/cards/001.md": card},
        )
    )
    sync_tree(tree, session=session, now=datetime(2026, 3, 1, tzinfo=UTC))
    question = session.get(Question, "tq-1")
    assert question is not None and question.explanation_html.endswith(
        '<div class="erratum" role="note" data-field="answer"><strong>Corrected:</strong> '
        "the source gave A; broadcast copies, it does not sum.</div>"
    )
    row = session.get(Card, "tc-001")
    assert row is not None and row.back_html.endswith("the source said <em>adds</em>.</div>")
    assert notes_html([]) == "" and notes_markdown([]) == ""
    assert notes_markdown([{"note": "n"}]) == "\n\n**Corrected:** n"
