"""Broken content is reported as path:line: message, every problem at once."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.content.loader import load_tree
from app.content.source import ContentError
from tests.content.factories import CARD, DECK, EXERCISE, QUIZ, write_tree


def problems(root: Path) -> list[str]:
    with pytest.raises(ContentError) as info:
        load_tree(root)
    return [str(p) for p in info.value.problems]


def test_tiny_tree_is_valid(tmp_path: Path) -> None:
    tree = load_tree(write_tree(tmp_path / "content"))
    assert [q.id for q in tree.quizzes[0].questions] == ["tq-1", "tq-2"]
    assert tree.quizzes[0].questions[0].options[1].text == "All-reduce"
    assert tree.decks[0].cards[0].back.startswith("Sums across ranks.")


def test_answer_not_among_options_names_file_and_line(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "content", **{"quizzes/tiny-quiz.yaml": QUIZ.replace("answer: B", "answer: C")})
    assert problems(root) == ["content/quizzes/tiny-quiz.yaml:24: tq-1: answer 'C' is not among the options A, B"]


def test_missing_answer(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "content", **{"quizzes/tiny-quiz.yaml": QUIZ.replace("    answer: A\n", "")})
    assert problems(root) == ["content/quizzes/tiny-quiz.yaml:27: missing field 'questions.1.answer'"]


def test_unknown_field(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "content", **{"quizzes/tiny-quiz.yaml": QUIZ.replace("passing_score", "pass_mark")})
    assert "content/quizzes/tiny-quiz.yaml:3: unknown field 'pass_mark'" in problems(root)


def test_duplicate_ids_across_files(tmp_path: Path) -> None:
    second = CARD.replace("number: 1", "number: 2")
    root = write_tree(tmp_path / "content", **{"decks/tiny-deck/cards/002.md": second})
    assert problems(root) == [
        "content/decks/tiny-deck/cards/002.md:2: duplicate card id 'tc-001' "
        "(first defined at content/decks/tiny-deck/cards/001.md:2)"
    ]


def test_duplicate_question_id_in_one_quiz(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "content", **{"quizzes/tiny-quiz.yaml": QUIZ.replace("id: tq-2", "id: tq-1")})
    assert problems(root) == [
        "content/quizzes/tiny-quiz.yaml:27: duplicate question id 'tq-1' "
        "(first defined at content/quizzes/tiny-quiz.yaml:17)"
    ]


def test_scoring_tiers_that_overlap_or_leave_a_gap(tmp_path: Path) -> None:
    overlap = QUIZ.replace("  - min: 0\n    max: 1", "  - min: 0\n    max: 2")
    assert problems(write_tree(tmp_path / "a", **{"quizzes/tiny-quiz.yaml": overlap})) == [
        "a/quizzes/tiny-quiz.yaml:8: scoring tiers overlap at score 2-2"
    ]
    gap = QUIZ.replace("  - min: 0\n    max: 1", "  - min: 0\n    max: 0")
    assert problems(write_tree(tmp_path / "b", **{"quizzes/tiny-quiz.yaml": gap})) == [
        "b/quizzes/tiny-quiz.yaml:8: scoring tiers leave a gap: no tier covers score 1-1"
    ]


def test_bad_math_and_stray_dollar(tmp_path: Path) -> None:
    bad = QUIZ.replace("$\\sum_i x_i$", "$\\frac{1}{$").replace("Which is point-to-point?", "Costs $5 a GPU?")
    found = problems(write_tree(tmp_path / "content", **{"quizzes/tiny-quiz.yaml": bad}))
    assert len(found) == 2
    assert found[0].startswith("content/quizzes/tiny-quiz.yaml:25: question tq-1 explanation: bad math")
    assert found[1].startswith("content/quizzes/tiny-quiz.yaml:29: question tq-2 prompt: unbalanced '$'")


def test_yaml_syntax_error_names_the_line(tmp_path: Path) -> None:
    broken = QUIZ.replace("title: Tiny quiz", "title: [Tiny quiz")
    (problem,) = problems(write_tree(tmp_path / "content", **{"quizzes/tiny-quiz.yaml": broken}))
    assert problem.startswith("content/quizzes/tiny-quiz.yaml:3: YAML syntax:")


def test_markdown_item_without_front_matter(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "content", **{"exercises/tiny-set/01.md": "Just a body\n"})
    assert problems(root) == [
        "content/exercises/tiny-set/01.md:1: a Markdown item must start with '---' and YAML front matter"
    ]


def test_unknown_section_and_card_reference(tmp_path: Path) -> None:
    quiz = QUIZ.replace("    section: basics\n    prompt: Which", "    section: advanced\n    prompt: Which")
    quiz = quiz.replace("    answer: B\n", "    answer: B\n    cards: [no-such-card]\n")
    found = problems(write_tree(tmp_path / "content", **{"quizzes/tiny-quiz.yaml": quiz}))
    assert "content/quizzes/tiny-quiz.yaml:29: tq-2: unknown section 'advanced'" in found
    assert "content/quizzes/tiny-quiz.yaml:25: tq-1: unknown card 'no-such-card' in cards" in found


def test_every_problem_is_reported_at_once(tmp_path: Path) -> None:
    quiz = QUIZ.replace("answer: B", "answer: Z").replace("title: Tiny quiz", "title: Tiny quiz\ncolour: blue")
    card = CARD.replace("topic: Collectives", "topic: Collectives\nfrnt: typo")
    exercise = EXERCISE.replace("section: s1", "section: s9")
    files = {"quizzes/tiny-quiz.yaml": quiz, "decks/tiny-deck/cards/001.md": card, "exercises/tiny-set/01.md": exercise}
    assert problems(write_tree(tmp_path / "content", **files)) == [
        "content/decks/tiny-deck/cards/001.md:5: unknown field 'frnt'",
        "content/exercises/tiny-set/01.md:5: unknown section 's9' (set.yaml lists the sections)",
        "content/quizzes/tiny-quiz.yaml:3: unknown field 'colour'",
        "content/quizzes/tiny-quiz.yaml:25: tq-1: answer 'Z' is not among the options A, B",
    ]


def test_a_schema_failure_does_not_hide_the_other_problems_of_its_file(tmp_path: Path) -> None:
    """One pass reports a file's schema problem, its duplicate ids and its questions' own rules."""
    quiz = QUIZ.replace("id: tq-2", "id: tq-1").replace("answer: B", "answer: Z").replace("passing_score", "pass_mark")
    card = CARD.replace("number: 1", "number: 2\nfrnt: typo")
    deck = DECK + "colour: blue\n"  # a second deck, with the first one's id
    files = {"quizzes/tiny-quiz.yaml": quiz, "decks/tiny-deck/cards/002.md": card, "decks/zz-again/deck.yaml": deck}
    assert sorted(problems(write_tree(tmp_path / "content", **files))) == [
        "content/decks/tiny-deck/cards/002.md:2: duplicate card id 'tc-001' "
        "(first defined at content/decks/tiny-deck/cards/001.md:2)",
        "content/decks/tiny-deck/cards/002.md:4: unknown field 'frnt'",
        "content/decks/zz-again/deck.yaml:1: duplicate deck id 'tiny-deck' "
        "(first defined at content/decks/tiny-deck/deck.yaml:1)",
        "content/decks/zz-again/deck.yaml:3: unknown field 'colour'",
        "content/quizzes/tiny-quiz.yaml:24: tq-1: answer 'Z' is not among the options A, B",
        "content/quizzes/tiny-quiz.yaml:27: duplicate question id 'tq-1' "
        "(first defined at content/quizzes/tiny-quiz.yaml:17)",
        "content/quizzes/tiny-quiz.yaml:3: unknown field 'pass_mark'",
    ]


def test_unexpected_top_level_entry(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "content", **{"notes.txt": "hello"})
    assert problems(root) == [
        "content/notes.txt:1: unexpected entry: content holds quizzes/, exercises/, decks/, labs/ and courses/"
    ]


LAB_YAML = """\
id: tiny-lab
title: Tiny lab
exercise: ex-t-1
world_sizes: [2]
backends: [gloo]
time_limit_s: 5
memory_limit_mb: 256
functions: [all_reduce]
checks:
  - id: sums
    title: Sums
    points: 1
"""


# The smallest checks.py that keeps the checks contract (labs.spec.contract): a case for its one check.
CHECKS = """\
from labs.authoring import Case


def cases(world_size, gen):
    return [Case("sums", "all_reduce", "all_reduce", [], [])]
"""


def lab_files(**overrides: str) -> dict[str, str]:
    files = {
        "labs/tiny-lab/lab.yaml": LAB_YAML,
        "labs/tiny-lab/statement.md": "Sum over ranks.\n",
        "labs/tiny-lab/starter.py": "def all_reduce(tensor):\n    raise NotImplementedError\n",
        "labs/tiny-lab/checks.py": CHECKS,
        "labs/tiny-lab/solution.py": "def all_reduce(tensor):\n    pass\n",
    }
    return files | {f"labs/tiny-lab/{name}": text for name, text in overrides.items()}


def test_a_valid_lab_passes(tmp_path: Path) -> None:
    load_tree(write_tree(tmp_path / "content", **lab_files()))


def test_a_lab_with_a_bad_field_names_its_file_and_line(tmp_path: Path) -> None:
    files = lab_files(**{"lab.yaml": LAB_YAML.replace("world_sizes: [2]", "world_sizes: [2, 99]")})
    found = problems(write_tree(tmp_path / "content", **files))
    assert len(found) == 1
    assert found[0].startswith("content/labs/tiny-lab/lab.yaml:4: ")


def test_a_lab_missing_a_file_unparsable_code_and_unknown_exercise(tmp_path: Path) -> None:
    files = lab_files(**{"checks.py": "def broken(:\n", "lab.yaml": LAB_YAML.replace("ex-t-1", "ex-nowhere")})
    del files["labs/tiny-lab/solution.py"]
    assert problems(write_tree(tmp_path / "content", **files)) == [
        "content/labs/tiny-lab/solution.py:1: missing lab file solution.py"
    ]
    del files["labs/tiny-lab/checks.py"]
    files["labs/tiny-lab/solution.py"] = "def ok():\n    return 1\n\ndef broken(:\n"
    files["labs/tiny-lab/checks.py"] = CHECKS
    found = problems(write_tree(tmp_path / "other", **files))
    assert sorted(found) == [
        "other/labs/tiny-lab/lab.yaml:1: exercise 'ex-nowhere' is not in any exercise set",
        "other/labs/tiny-lab/solution.py:4: not valid Python: invalid syntax",
    ]


def test_a_deck_cannot_take_the_name_of_a_flashcards_page(tmp_path: Path) -> None:
    files = {"decks/mine/deck.yaml": DECK.replace("id: tiny-deck", "id: mine")}
    assert problems(write_tree(tmp_path / "content", **files)) == [
        "content/decks/mine/deck.yaml:1: id: 'mine' names a page under /flashcards/;"
        " a deck id cannot be mine, missed, settings"
    ]
