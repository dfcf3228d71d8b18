"""A course's file is versioned as it changes: every version is kept with what it said."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.content.courses import load_courses
from app.content.models import ContentTree
from app.content.records import Course, CourseVersion
from app.content.sync import sync_tree


def _sync(tmp_path: Path, tree: ContentTree, session: Session, text: str) -> None:
    folder = tmp_path / "courses" / "sec"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "course.yaml").write_text(text)
    courses, problems = load_courses(tmp_path, lambda p: str(p.relative_to(tmp_path)), tree)
    assert problems == []
    sync_tree(tree.model_copy(update={"courses": courses}), session=session, now=datetime.now(UTC))
    session.flush()


def test_a_changed_course_file_is_a_new_version_and_an_unchanged_one_is_not(
    tmp_path: Path, content_tree: ContentTree, session: Session
) -> None:
    _sync(tmp_path, content_tree, session, "title: Section\nquizzes:\n  module-202: {due: 2026-12-01}\n")
    _sync(tmp_path, content_tree, session, "title: Section\nquizzes:\n  module-202: {due: 2026-12-01}\n")
    _sync(tmp_path, content_tree, session, "title: Section\nquizzes:\n  module-202: {due: 2026-12-08}\n")
    course = session.get(Course, "sec")
    assert course is not None and course.version == 2
    versions = session.scalars(
        select(CourseVersion).where(CourseVersion.course_id == "sec").order_by(CourseVersion.version)
    )
    dues = [(v.version, v.values["assignments"]["quiz"]["module-202"]["due"]) for v in versions]
    assert dues == [(1, "2026-12-01T23:59:59+00:00"), (2, "2026-12-08T23:59:59+00:00")]
    default = session.scalars(select(CourseVersion.version).where(CourseVersion.course_id == "default")).all()
    assert list(default) == [1]  # the built-in default course, unchanged by these syncs
