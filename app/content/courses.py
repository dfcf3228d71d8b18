"""Course instances: ``courses/<id>/course.yaml``, each checked against the content it assigns.

Pure over the files and the tree's other items: every problem names the file and the line to fix.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from pydantic import ValidationError

from app.content.models import ContentTree, CourseContent
from app.content.source import ContentError, Problem, Source, parse_yaml, validation_problems

DEFAULT_COURSE = "default"
"""The course every server has: what a content tree without ``courses/`` runs as (and upgrades into)."""

_KINDS = {"quizzes": "quiz", "exercises": "exercise set", "decks": "deck", "labs": "lab"}


def load_courses(
    root: Path, rel: Callable[[Path], str], tree: ContentTree
) -> tuple[list[CourseContent], list[Problem]]:
    """Every ``courses/<id>/course.yaml`` under ``root``, validated, and the problems found."""
    courses: list[CourseContent] = []
    problems: list[Problem] = []
    folder = root / "courses"
    if not folder.is_dir():
        return courses, problems
    known = {
        "quizzes": {q.id for q in tree.quizzes},
        "exercises": {s.id for s in tree.exercise_sets},
        "decks": {d.id for d in tree.decks},
        "labs": {lab.id for lab in tree.labs},
    }
    for entry in sorted(folder.iterdir()):
        if entry.name.startswith(".") or entry.name == "README.md":
            continue
        path = entry / "course.yaml"
        if not (entry.is_dir() and path.is_file()):
            problems.append(Problem(rel(entry), 1, "expected a folder courses/<id>/ holding a course.yaml"))
            continue
        source = _source(path, rel, problems)
        if source is None:
            continue
        data = {"id": entry.name, **source.data}
        try:
            course = CourseContent.model_validate(data)
        except ValidationError as exc:
            problems.extend(validation_problems(exc, source))
            continue
        if course.id != entry.name:
            problems.append(source.problem(("id",), f"id '{course.id}' differs from its folder's name '{entry.name}'"))
        if course.starts and course.ends and course.ends < course.starts:
            problems.append(source.problem(("ends",), f"ends ({course.ends}) is before starts ({course.starts})"))
        for field, kind in _KINDS.items():
            for item_id in getattr(course, field):
                if item_id not in known[field]:
                    problems.append(source.problem((field, item_id), f"unknown {kind} '{item_id}' in {field}"))
        courses.append(course)
    return courses, problems


def _source(path: Path, rel: Callable[[Path], str], problems: list[Problem]) -> Source | None:
    try:
        source = parse_yaml(path.read_text(encoding="utf-8"), rel(path))
    except ContentError as exc:
        problems.extend(exc.problems)
        return None
    except (OSError, UnicodeDecodeError) as exc:
        problems.append(Problem(rel(path), 1, f"cannot read: {exc}"))
        return None
    if not isinstance(source.data, dict):
        problems.append(source.problem((), "expected a mapping of fields at the top of the file"))
        return None
    return source
