"""Who may do what in which course: every role × every per-course page and API route × own / other course.

One course's staff see nothing of another's students; a student sees only their own work; a teaching
assistant cannot change the course. Each role's whole row is checked at once, and a failure lists
every (route, expected, got) that differs.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from app.accounts.models import Role
from app.content.records import Course
from app.courses.models import CourseRole, Enrollment
from tests.factories import api_token, csrf_token, make_attempt, make_submission, make_user, sign_in

T0 = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)
STAFF, INSTRUCTOR = "staff", "instructor"  # who a route is for


@dataclass(frozen=True)
class Route:
    method: str
    path: str  # {sam}, {attempt}, {submission} are filled in
    for_: str  # STAFF (TAs and instructors) or INSTRUCTOR (the course's settings)
    about_sam: bool  # names one of course A's students' work (other staff: as if it did not exist)
    api: bool = False
    body: dict[str, object] | None = None


ROUTES = [
    Route("GET", "/instructor", STAFF, False),
    Route("GET", "/instructor/gradebook", STAFF, False),
    Route("GET", "/instructor/gradebook.csv", STAFF, False),
    Route("GET", "/instructor/reports", STAFF, False),
    Route("GET", "/quizzes/module-202/statistics", STAFF, False),
    Route("GET", "/labs/ring-allreduce/all", STAFF, False),
    Route("GET", "/labs/ring-allreduce/submissions.csv", STAFF, False),
    Route("GET", "/instructor/students/{sam}", STAFF, True),
    Route("GET", "/instructor/attempts/{attempt}", STAFF, True),
    Route("POST", "/labs/submissions/{submission}/regrade", STAFF, True),
    Route("POST", "/instructor/students/{sam}/accommodation", STAFF, True, body={"time_multiplier": "1.5"}),
    Route(
        "POST",
        "/instructor/students/{sam}/extensions",
        STAFF,
        True,
        body={"assessment": "quiz:module-202", "extra_attempts": "1", "reason": "a note from the doctor"},
    ),
    Route("POST", "/instructor/students/{sam}/password-reset", STAFF, True),
    Route("GET", "/api/v1/instructor/gradebook", STAFF, False, api=True),
    Route("GET", "/api/v1/instructor/students/{sam}/extensions", STAFF, True, api=True),
    Route("PUT", "/api/v1/instructor/students/{sam}/accommodation", STAFF, True, api=True, body={"extra_minutes": 5}),
    Route("GET", "/instructor/course", INSTRUCTOR, False),
    Route("POST", "/instructor/course/join-code", INSTRUCTOR, False),
]

# (role in course A, role in course B, site role)
PEOPLE = {
    "stu-a": (CourseRole.student, None, Role.student),
    "ta-a": (CourseRole.ta, None, Role.student),
    "ins-a": (CourseRole.instructor, None, Role.student),
    "ta-b": (None, CourseRole.ta, Role.student),
    "ins-b": (None, CourseRole.instructor, Role.student),
    "root": (None, None, Role.admin),
}


@pytest.fixture
def world(session: Session) -> dict[str, int]:
    """Courses sec-a and sec-b; sam, a student of sec-a, with an attempt and a submission made there."""
    session.add_all(
        Course(id=c, title=c, time_zone="UTC", assignments=None, position=i)
        for i, c in enumerate(("sec-a", "sec-b"), 1)
    )
    session.flush()
    ids = {}
    for name, (in_a, in_b, site) in {**PEOPLE, "sam": (CourseRole.student, None, Role.student)}.items():
        user = make_user(session, name, role=site, course=None)
        ids[name] = user.id
        session.add_all(
            Enrollment(user_id=user.id, course_id=c, role=r) for c, r in (("sec-a", in_a), ("sec-b", in_b)) if r
        )
    session.commit()
    attempt = make_attempt(
        session,
        ids["sam"],
        "module-202",
        right=3,
        started_at=T0,
        submitted_at=T0 + timedelta(minutes=5),
        course="sec-a",
    )
    submission = make_submission(session, ids["sam"], "ring-allreduce", score=4, submitted_at=T0, course="sec-a")
    return {**ids, "attempt": attempt.id, "submission": submission.id}


def _call(client: TestClient, route: Route, world: dict[str, int], course: str, name: str) -> tuple[int, str]:
    path = route.path.format(sam=world["sam"], attempt=world["attempt"], submission=world["submission"])
    url = f"{path}?course={course}"
    if route.api:
        response = client.request(route.method, url, headers=api_token(client, name), json=route.body)
    elif route.method == "GET":
        response = client.get(url, follow_redirects=False)
    else:
        data = {"csrf_token": csrf_token(client), **(route.body or {})}
        response = client.request(route.method, url, data=data, follow_redirects=False)
    return response.status_code, response.text


def _expected(name: str, route: Route, course: str) -> str:
    """ "ok", 403 or 404, for ``name`` calling ``route`` in ``course``."""
    in_a, in_b, site = PEOPLE[name]
    if site == Role.admin:
        return "ok"
    role = in_a if course == "sec-a" else in_b
    allowed = role == CourseRole.instructor or (route.for_ == STAFF and role == CourseRole.ta)
    if not allowed:
        return "403"
    # Staff of course B, in course B: sam and his work are not theirs to see.
    return "404" if route.about_sam and course != "sec-a" else "ok"


@pytest.mark.parametrize("name", list(PEOPLE))
def test_every_role_on_every_per_course_route(client: TestClient, world: dict[str, int], name: str) -> None:
    sign_in(client, name)
    courses = ["sec-a"] + (["sec-b"] if PEOPLE[name][1] is not None else [])
    wrong = []
    for course in courses:
        for route in ROUTES:
            want = _expected(name, route, course)
            status, text = _call(client, route, world, course, name)
            got = "ok" if status < 400 else str(status)
            if got != want:
                wrong.append((route.method, route.path, course, f"expected {want}", f"got {status}"))
            elif want == "ok" and course != "sec-a" and ">sam<" in text:
                wrong.append((route.method, route.path, course, "shows sam, a student of another course"))
    assert wrong == []


def test_a_student_sees_only_their_own_work(client: TestClient, world: dict[str, int]) -> None:
    sign_in(client, "stu-a")
    assert client.get(f"/labs/submissions/{world['submission']}").status_code == 404
    assert client.get(f"/quizzes/attempts/{world['attempt']}/result", follow_redirects=False).status_code == 404
    token = api_token(client, "stu-a")
    assert client.get(f"/api/v1/submissions/{world['submission']}", headers=token).status_code == 404
    sign_in(client, "sam")
    assert client.get(f"/labs/submissions/{world['submission']}").status_code == 200
    assert client.get(f"/quizzes/attempts/{world['attempt']}/result").status_code == 200
