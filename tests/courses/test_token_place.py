"""An API token's user and course in one statement: the same place ``resolve`` finds in two (both backends)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy.orm import Session

from app.accounts.service import issue_api_token
from app.content.courses import DEFAULT_COURSE
from app.content.records import Course
from app.courses import access
from app.courses.models import CourseRole, Enrollment
from tests.factories import make_user

NOW = datetime(2026, 11, 28, 12, tzinfo=UTC)
TA, STUDENT = CourseRole.ta, CourseRole.student

# Each case: the courses (id, position, retired) besides the default one, the user's enrollments.
CASES = {
    "in the default course and others": ([("zz-a", 1, False)], {DEFAULT_COURSE: STUDENT, "zz-a": TA}),
    "two others: the first by position": ([("zz-b", 2, False), ("zz-c", 1, False)], {"zz-b": TA, "zz-c": STUDENT}),
    "the same position: by id": ([("zz-e", 1, False), ("zz-d", 1, False)], {"zz-e": TA, "zz-d": STUDENT}),
    "a retired course is passed over": ([("zz-f", 0, True), ("zz-g", 5, False)], {"zz-f": TA, "zz-g": STUDENT}),
    "only a retired course": ([("zz-h", 0, True)], {"zz-h": TA}),
    "in no course": ([], {}),
}  # fmt: skip


def _setup(session: Session, courses: list[tuple[str, int, bool]], enrolled: dict[str, CourseRole]) -> tuple[int, str]:
    for course_id, position, retired in courses:
        session.add(Course(id=course_id, title=course_id, position=position, retired_at=NOW if retired else None))
    user = make_user(session, "placed", course=None)
    for course_id, role in enrolled.items():
        session.add(Enrollment(course_id=course_id, user_id=user.id, role=role))
    token = issue_api_token(user, session=session, now=NOW, ttl=timedelta(hours=1)).token
    session.flush()
    return user.id, token


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("named", [None, DEFAULT_COURSE, "zz-a", "zz-h", "no-such-course"])
def test_one_statement_finds_the_place_resolve_finds(session: Session, case: str, named: str | None) -> None:
    user_id, token = _setup(session, *CASES[case])
    found = access.token_place(token, named, session=session, now=NOW)
    assert found is not None
    got_id, username, _, place = found
    assert (got_id, username) == (user_id, "placed")
    assert place == access.resolve(user_id, named, session=session)


def test_an_unknown_or_expired_token_finds_no_one(session: Session) -> None:
    _, token = _setup(session, [], {DEFAULT_COURSE: STUDENT})
    assert access.token_place(token + "x", None, session=session, now=NOW) is None
    assert access.token_place(token, None, session=session, now=NOW + timedelta(hours=2)) is None
    assert access.token_place(token, DEFAULT_COURSE, session=session, now=NOW + timedelta(hours=2)) is None
