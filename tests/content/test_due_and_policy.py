"""Due dates and attempt policies in content files: parsed to UTC, and problems reported as path:line."""

from __future__ import annotations

import shutil
from datetime import UTC, datetime
from pathlib import Path

import pytest

from app.content.loader import load_tree
from app.content.source import ContentError
from labs.spec import LabError, load_lab
from tests.conftest import CONTENT_DIR
from tests.content.factories import QUIZ, write_tree


def problems(root: Path) -> list[str]:
    with pytest.raises(ContentError) as info:
        load_tree(root)
    return [str(p) for p in info.value.problems]


def quiz_with(tmp_path: Path, lines: str) -> Path:
    return write_tree(tmp_path / "content", **{"quizzes/tiny-quiz.yaml": QUIZ.replace("passing_score: 0.5\n", lines)})


@pytest.mark.parametrize(
    ("written", "expected"),
    [
        ("2026-12-01", datetime(2026, 12, 1, 23, 59, 59, tzinfo=UTC)),  # a date: the end of that day, UTC
        ("2026-12-01T17:00:00+01:00", datetime(2026, 12, 1, 16, 0, tzinfo=UTC)),
        ("2026-12-01 17:00", datetime(2026, 12, 1, 17, 0, tzinfo=UTC)),  # no zone: UTC
    ],
)
def test_a_quiz_policy_and_due_date_load(tmp_path: Path, written: str, expected: datetime) -> None:
    root = quiz_with(tmp_path, f"max_attempts: 2\nshow_answers: after_due\ndue: {written}\n")
    quiz = load_tree(root).quizzes[0]
    assert (quiz.max_attempts, quiz.show_answers, quiz.due) == (2, "after_due", expected)


def test_defaults_are_unlimited_attempts_and_the_key_at_once(tmp_path: Path) -> None:
    quiz = load_tree(quiz_with(tmp_path, "")).quizzes[0]
    assert (quiz.max_attempts, quiz.show_answers, quiz.due) == (None, "at_once", None)


def test_policy_problems_name_the_line(tmp_path: Path) -> None:
    assert problems(quiz_with(tmp_path / "a", "show_answers: after_due\n")) == [
        "content/quizzes/tiny-quiz.yaml:3: show_answers: after_due needs a due date: add 'due: 2026-12-01'"
    ]
    (bad_mode,) = problems(quiz_with(tmp_path / "b", "show_answers: later\n"))
    assert bad_mode.startswith("content/quizzes/tiny-quiz.yaml:3: show_answers: ")
    assert "'at_once', 'after_due' or 'never'" in bad_mode
    (zero,) = problems(quiz_with(tmp_path / "c", "max_attempts: 0\n"))
    assert zero.startswith("content/quizzes/tiny-quiz.yaml:3: max_attempts: ")
    (bad_due,) = problems(quiz_with(tmp_path / "d", "due: next friday\n"))
    assert bad_due.startswith("content/quizzes/tiny-quiz.yaml:3: due: ")


def test_a_lab_due_date_loads_and_a_bad_one_names_the_line(tmp_path: Path) -> None:
    folder = tmp_path / "ring-allreduce"
    shutil.copytree(CONTENT_DIR / "labs" / "ring-allreduce", folder)
    original = (folder / "lab.yaml").read_text()
    (folder / "lab.yaml").write_text(original + "due: 2026-12-01T12:00:00Z\n")
    assert load_lab(folder).spec.due == datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
    (folder / "lab.yaml").write_text(original + "due: soon\n")
    with pytest.raises(LabError) as exc:
        load_lab(folder)
    line = len(original.splitlines()) + 1
    assert str(exc.value).startswith(f"{folder / 'lab.yaml'}:{line}: due: ")
