"""Answer parts in content files: validation with path:line, sync, export."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy.orm import Session

from app.content.export import export_tree
from app.content.loader import load_tree
from app.content.models import ContentTree
from app.content.records import Exercise
from app.content.source import ContentError
from app.content.sync import sync_tree
from tests.content.factories import EXERCISE, write_tree

PARTS = """\
parts:
  - id: a
    prompt: "Bytes each rank sends, as a multiple of $D$, for $N = 4$."
    value: 1.5
    tolerance: 0
    unit: "× D"
    explanation: "$2 \\\\cdot 3/4 = 1.5$."
  - id: b
    prompt: Fraction of the step, in percent.
    value: 1.456
    tolerance: 1%
    unit: "%"
    explanation: "$3.64 / 250$."
"""


F = "content/exercises/tiny-set/01.md:"


def with_parts(parts: str) -> str:
    return EXERCISE.replace("section: s1\n", "section: s1\n" + parts)


def problems(root: Path) -> list[str]:
    with pytest.raises(ContentError) as info:
        load_tree(root)
    return [str(p) for p in info.value.problems]


def test_parts_load_and_export(tmp_path: Path) -> None:
    tree = load_tree(write_tree(tmp_path / "content", **{"exercises/tiny-set/01.md": with_parts(PARTS)}))
    parts = tree.exercise_sets[0].exercises[0].parts
    assert [(p.id, p.value, p.tolerance, p.unit) for p in parts] == [("a", 1.5, 0.0, "× D"), ("b", 1.456, "1%", "%")]
    exported = export_tree(tree)["exercise_sets"][0]["exercises"][0]["parts"]
    assert exported[1] == {
        "id": "b", "prompt": "Fraction of the step, in percent.", "value": 1.456, "tolerance": "1%", "unit": "%",
        "explanation": "$3.64 / 250$.", "hint": None, "errata": [],
    }  # fmt: skip


HINT_LINE = '    hint: "Divide the all-reduce time by the step time."'
HINTED = PARTS.replace(
    '    explanation: "$3.64 / 250$."\n',
    '    explanation: "$3.64 / 250$."\n    hint: "Divide the all-reduce time by the step time."\n',
)


def test_a_hint_is_optional_loaded_and_synced(tmp_path: Path, session: Session) -> None:
    tree = load_tree(write_tree(tmp_path / "content", **{"exercises/tiny-set/01.md": with_parts(HINTED)}))
    parts = tree.exercise_sets[0].exercises[0].parts
    assert parts[0].hint is None and parts[1].hint == "Divide the all-reduce time by the step time."
    sync_tree(tree, session=session, now=datetime(2026, 3, 2, tzinfo=UTC))
    row = session.get(Exercise, "ex-t-1")
    assert row is not None and row.parts[0]["hint_html"] is None
    assert row.parts[1]["hint_html"] == "<p>Divide the all-reduce time by the step time.</p>\n"


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        (HINT_LINE, "    hint: \"\"", F + "19: parts.1.hint: String should have at least 1 character"),
        (HINT_LINE, "    hint: [1, 2]", F + "19: parts.1.hint: Input should be a valid string"),
        ("by the step time.", "by the step time, $\\\\frac{1}{$.", F + "19: exercise ex-t-1 parts.1.hint: bad math"),
        ("by the step time.", "by the step time: about 1.456.", F + "19: part 'b': the hint states the answer 1.456"),
    ],
)  # fmt: skip
def test_a_bad_hint_is_reported_with_path_and_line(tmp_path: Path, old: str, new: str, expected: str) -> None:
    assert old in HINTED
    root = write_tree(tmp_path / "content", **{"exercises/tiny-set/01.md": with_parts(HINTED.replace(old, new))})
    found = problems(root)
    assert len(found) == 1 and found[0].startswith(expected), found


def test_a_number_the_prompt_gives_may_appear_in_a_hint(tmp_path: Path) -> None:
    # 1.5 is the value of part a, but the prompt of part a does not give it: only a hint saying it is refused.
    said = PARTS.replace(
        '    explanation: "$2 \\\\cdot 3/4 = 1.5$."\n', '    explanation: "x"\n    hint: "It is 1.5."\n'
    )
    (found,) = problems(write_tree(tmp_path / "a", **{"exercises/tiny-set/01.md": with_parts(said)}))
    assert "a/exercises/tiny-set/01.md:13: part 'a': the hint states the answer 1.5" in found
    given = said.replace("for $N = 4$.", "for $N = 4$ (not 1.5).")
    assert load_tree(write_tree(tmp_path / "b", **{"exercises/tiny-set/01.md": with_parts(given)}))


def test_every_seed_part_has_a_hint_that_keeps_the_answer(content_tree: ContentTree) -> None:
    for s in content_tree.exercise_sets:
        for e in s.exercises:
            for part in e.parts:
                assert part.hint and len(part.hint) >= 30, (e.id, part.id)
                assert f"{part.value:g}" not in part.hint or f"{part.value:g}" in part.prompt + e.body, (e.id, part.id)


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        ("    value: 1.5\n", "    value: lots\n", F + "9: parts.0.value: must be a number, not 'lots'"),
        ("    value: 1.5\n", "", F + "7: missing field 'parts.0.value'"),
        ("    tolerance: 1%\n", "    tolerance: some\n", F + "16: parts.1.tolerance: must be a number or a percentage"),
        ("    tolerance: 0\n", "    tolerance: 2\n", F + "10: part 'a': tolerance 2.0 would accept 0"),
        ("  - id: b\n", "  - id: a\n", F + "13: duplicate part id 'a' in ex-t-1"),
        ('    unit: "%"\n', "", F + "13: missing field 'parts.1.unit'"),
        ('    explanation: "$3.64 / 250$."\n', '    explanation: "$3.64 / 250"\n', F + "18: exercise ex-t-1 parts.1"),
        ("    unit: \"%\"\n", "    unit: \"%\"\n    answer: 3\n", F + "18: unknown field 'answer'"),
    ],
)  # fmt: skip
def test_a_bad_part_is_reported_with_path_and_line(tmp_path: Path, old: str, new: str, expected: str) -> None:
    assert old in PARTS
    root = write_tree(tmp_path / "content", **{"exercises/tiny-set/01.md": with_parts(PARTS.replace(old, new))})
    found = problems(root)
    assert len(found) == 1 and found[0].startswith(expected), found


SEEDED = {"26.1", "26.4", "26.6", "26.9", "26.13", "26.15", "26.16", "26.18", "26.20", "26.21", "26.22",
          "35.2", "35.9", "35.18", "35.22"}  # fmt: skip


def test_the_seed_exercises_with_numbers_have_parts(content_tree: ContentTree) -> None:
    with_parts = {e.number for s in content_tree.exercise_sets for e in s.exercises if e.parts}
    assert with_parts >= SEEDED
    assert len(with_parts) >= 15
    for s in content_tree.exercise_sets:
        for e in s.exercises:
            for part in e.parts:
                assert part.unit is not None and part.explanation and part.prompt, (e.id, part.id)


def test_sync_stores_parts_with_their_html(tmp_path: Path, session: Session) -> None:
    tree = load_tree(write_tree(tmp_path / "content", **{"exercises/tiny-set/01.md": with_parts(PARTS)}))
    sync_tree(tree, session=session, now=datetime(2026, 3, 2, tzinfo=UTC))
    row = session.get(Exercise, "ex-t-1")
    assert row is not None
    assert [(p["id"], p["value"], p["tolerance"], p["unit"]) for p in row.parts] == [
        ("a", 1.5, 0.0, "× D"),
        ("b", 1.456, "1%", "%"),
    ]
    assert "<math" in row.parts[0]["prompt_html"] and "<math" in row.parts[1]["explanation_html"]
    assert "parts" not in row.source  # the answers live in one place
    changed = PARTS.replace("value: 1.456", "value: 1.5")
    tree = load_tree(write_tree(tmp_path / "content", **{"exercises/tiny-set/01.md": with_parts(changed)}))
    report = sync_tree(tree, session=session, now=datetime(2026, 3, 3, tzinfo=UTC))
    assert report.updated.get("exercise") == 1 and row.parts[1]["value"] == 1.5
