"""A lab check's ``cards:``: each id must be a card of a deck, and the content check says where it is not."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from app.content.labs import load_lab_content
from app.content.loader import load_tree
from app.content.source import ContentError
from labs.spec import CheckSpec, LabError, parse_spec

CONTENT = Path(__file__).resolve().parents[2] / "content"
RING = CONTENT / "labs" / "ring-allreduce"


def _ring_with(tmp_path: Path, cards_line: str) -> Path:
    """A copy of the ring lab whose first check's cards are ``cards_line``."""
    folder = tmp_path / "ring-allreduce"
    shutil.copytree(RING, folder, ignore=shutil.ignore_patterns("mutants", "__pycache__"))
    text = (folder / "lab.yaml").read_text()
    first = next(line for line in text.splitlines() if line.startswith("    cards:"))
    (folder / "lab.yaml").write_text(text.replace(first, cards_line, 1))
    return folder


def test_the_ring_labs_checks_name_the_cards_that_teach_them() -> None:
    spec = parse_spec((RING / "lab.yaml").read_text(), "lab.yaml")
    assert spec.check("ring-all-reduce").cards == ["mdt-003", "mdt-033", "mdt-024"]
    assert spec.check("communication-volume").cards == ["mdt-024", "mdt-046"]
    # Left out of the dump when empty, so a check without cards keeps its lab's stored version.
    assert "cards" not in CheckSpec(id="x", title="X", points=1).model_dump()
    assert CheckSpec(id="x", title="X", points=1, cards=["mdt-003"]).model_dump()["cards"] == ["mdt-003"]


def test_a_card_named_twice_in_one_check_is_refused_at_its_line(tmp_path: Path) -> None:
    folder = _ring_with(tmp_path, "    cards: [mdt-003, mdt-003]")
    text = (folder / "lab.yaml").read_text()
    with pytest.raises(LabError) as caught:
        parse_spec(text, "lab.yaml")
    line = text.splitlines().index("    cards: [mdt-003, mdt-003]") + 1
    assert (
        str(caught.value)
        == f"lab.yaml:{line}: checks.0.cards: Value error, names card mdt-003 more than once: list each card once"
    )


def test_an_unknown_card_is_a_problem_naming_file_and_line(tmp_path: Path) -> None:
    folder = _ring_with(tmp_path, "    cards: [mdt-003, mdt-999]")
    line = (folder / "lab.yaml").read_text().splitlines().index("    cards: [mdt-003, mdt-999]") + 1
    rel = lambda p: str(p.relative_to(tmp_path))  # noqa: E731
    lab, problems = load_lab_content(folder, rel, {"ex-35-2"}, {"mdt-003", "mdt-024", "mdt-046"})
    assert lab is None
    assert [str(p) for p in problems] == [
        f"ring-allreduce/lab.yaml:{line}: check 'ring-all-reduce' names card 'mdt-999', which is in no deck"
    ]
    # Without the decks' cards (the grading worker's own loading) nothing is said of them.
    assert load_lab_content(folder, rel, {"ex-35-2"})[1] == []


def test_the_content_check_sees_the_decks_when_it_validates_labs(tmp_path: Path) -> None:
    root = tmp_path / "content"
    shutil.copytree(CONTENT, root, ignore=shutil.ignore_patterns("mutants", "__pycache__"))
    load_tree(root, check_markdown=False)  # every card the labs name is in the deck
    lab_yaml = root / "labs" / "ring-allreduce" / "lab.yaml"
    text = lab_yaml.read_text()
    lab_yaml.write_text(text.replace("cards: [mdt-024, mdt-046]", "cards: [mdt-024, no-such-card]"))
    line = lab_yaml.read_text().splitlines().index("    cards: [mdt-024, no-such-card]") + 1
    with pytest.raises(ContentError) as caught:
        load_tree(root, check_markdown=False)
    assert [str(p) for p in caught.value.problems] == [
        f"content/labs/ring-allreduce/lab.yaml:{line}: check 'communication-volume' names card 'no-such-card', "
        "which is in no deck"
    ]
