"""Two course instances of one content tree, side by side: their own due dates, rosters and gradebooks.

The courses come from real ``courses/<id>/course.yaml`` files through the content loader and sync, as a
server reads them; everything else goes through the JSON API and the pages, as people use them.
"""

from __future__ import annotations

import csv
import io
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from app.accounts.models import Role
from app.content.courses import load_courses
from app.content.models import ContentTree
from app.content.sync import sync_tree
from app.courses.models import CourseRole, Enrollment
from tests.factories import api_token, csrf_token, make_attempt, make_user, sign_in

SECTION_A = """\
title: Distributed training, section A
term: Fall 2026
starts: 2026-09-01
ends: 2026-12-20
time_zone: Europe/Berlin
quizzes:
  module-202:
    due: 2026-12-01
    max_attempts: 3
labs:
  ring-allreduce:
    due: 2026-12-03T17:00:00
"""

SECTION_B = """\
title: Distributed training, section B
term: Fall 2026
quizzes:
  module-202:
    due: 2027-01-15T09:00:00+00:00
    max_attempts: 1
    late: refuse
  ch35-quiz:
"""

A_DUE = datetime(2026, 12, 1, 22, 59, 59, tzinfo=UTC)  # the end of 1 December in Berlin (UTC+1)
B_DUE = datetime(2027, 1, 15, 9, 0, tzinfo=UTC)


def add_courses(tmp_path: Path, tree: ContentTree, session: Session, **files: str) -> None:
    """Write ``courses/<id>/course.yaml`` files, load them as the loader does, and sync them with the tree."""
    for course_id, text in files.items():
        folder = tmp_path / "courses" / course_id
        folder.mkdir(parents=True)
        (folder / "course.yaml").write_text(text)
    courses, problems = load_courses(tmp_path, lambda p: str(p.relative_to(tmp_path)), tree)
    assert problems == []
    sync_tree(tree.model_copy(update={"courses": courses}), session=session, now=datetime.now(UTC))
    session.commit()


@pytest.fixture
def sections(tmp_path: Path, content_tree: ContentTree, session: Session) -> dict[str, int]:
    """ana in A, ben in B, cam in both; tia a TA of A, ivy the instructor of B."""
    add_courses(tmp_path, content_tree, session, **{"section-a": SECTION_A, "section-b": SECTION_B})
    people = {
        "ana": [("section-a", CourseRole.student)],
        "ben": [("section-b", CourseRole.student)],
        "cam": [("section-a", CourseRole.student), ("section-b", CourseRole.student)],
        "tia": [("section-a", CourseRole.ta)],
        "ivy": [("section-b", CourseRole.instructor)],
    }
    ids = {}
    for name, places in people.items():
        user = make_user(session, name, course=None)
        ids[name] = user.id
        session.add_all(Enrollment(user_id=user.id, course_id=c, role=r) for c, r in places)
    session.commit()
    return ids


def test_a_student_in_both_courses_sees_each_with_its_own_dates(client: TestClient, sections: dict[str, int]) -> None:
    headers = api_token(client, "cam")
    me = client.get("/api/v1/me", headers=headers).json()
    assert [(c["id"], c["role"]) for c in me["courses"]] == [("section-a", "student"), ("section-b", "student")]
    a = {q["id"]: q for q in client.get("/api/v1/quizzes?course=section-a", headers=headers).json()}
    b = {q["id"]: q for q in client.get("/api/v1/quizzes", headers={**headers, "X-Ringlab-Course": "section-b"}).json()}
    assert set(a) == {"module-202"} and set(b) == {"module-202", "ch35-quiz"}  # what each course assigns
    assert datetime.fromisoformat(a["module-202"]["due"]) == A_DUE and a["module-202"]["max_attempts"] == 3
    assert datetime.fromisoformat(b["module-202"]["due"]) == B_DUE and b["module-202"]["max_attempts"] == 1
    assert b["module-202"]["closes_at_due"] and not a["module-202"]["closes_at_due"]
    assert b["ch35-quiz"]["due"] is None  # assigned as the quiz's own file has it
    # The pages say the same: the course chosen by ?course=, then remembered by the browser.
    sign_in(client, "cam")
    page = client.get("/quizzes/module-202?course=section-b").text
    assert "15 Jan 2027, 09:00 UTC" in page and "01 Dec 2026" not in page


def test_attempts_count_in_their_course_and_a_student_outside_it_is_refused(
    client: TestClient, sections: dict[str, int]
) -> None:
    cam = api_token(client, "cam")
    started = client.post("/api/v1/quizzes/module-202/attempts?course=section-b", headers=cam)
    assert started.status_code == 201
    client.post(f"/api/v1/attempts/{started.json()['id']}/submit?course=section-b", headers=cam)
    again = client.post("/api/v1/quizzes/module-202/attempts?course=section-b", headers=cam)
    assert again.status_code == 409 and "allows 1 attempt" in again.json()["detail"]
    # Section A allows 3: the attempt made in B does not count there.
    assert client.post("/api/v1/quizzes/module-202/attempts?course=section-a", headers=cam).status_code == 201
    ana = api_token(client, "ana")
    refused = client.post("/api/v1/quizzes/module-202/attempts?course=section-b", headers=ana)
    assert refused.status_code == 403 and "not in the course 'section-b'" in refused.json()["detail"]
    not_assigned = client.post("/api/v1/quizzes/ch35-quiz/attempts?course=section-a", headers=cam)
    assert not_assigned.status_code == 403 and "not part of this course" in not_assigned.json()["detail"]


def test_each_gradebook_shows_only_its_own_students(client: TestClient, sections: dict[str, int]) -> None:
    cam = api_token(client, "cam")
    started = client.post("/api/v1/quizzes/module-202/attempts?course=section-a", headers=cam).json()
    client.post(f"/api/v1/attempts/{started['id']}/submit?course=section-a", headers=cam)
    tia = api_token(client, "tia")
    book_a = client.get("/api/v1/instructor/gradebook?course=section-a", headers=tia).json()
    assert [s["student"] for s in book_a["students"]] == ["ana", "cam"]
    assert {c["key"] for c in book_a["columns"]} >= {"quiz:module-202", "lab:ring-allreduce"}
    assert "quiz:ch35-quiz" not in {c["key"] for c in book_a["columns"]}
    cam_a = next(s for s in book_a["students"] if s["student"] == "cam")
    assert cam_a["quiz:module-202:attempts"] == 1
    ivy = api_token(client, "ivy")
    book_b = client.get("/api/v1/instructor/gradebook?course=section-b", headers=ivy).json()
    assert [s["student"] for s in book_b["students"]] == ["ben", "cam"]
    cam_b = next(s for s in book_b["students"] if s["student"] == "cam")
    assert cam_b["quiz:module-202:attempts"] == 0  # the attempt was made in section A
    # Staff of one course see nothing of the other's.
    assert client.get("/api/v1/instructor/gradebook?course=section-b", headers=tia).status_code == 403
    assert client.get("/api/v1/instructor/gradebook?course=section-a", headers=ivy).status_code == 403
    # The page too, for a TA signed in to the browser.
    sign_in(client, "tia")
    page = client.get("/instructor/gradebook?course=section-a").text
    assert ">ana<" in page and ">cam<" in page and ">ben<" not in page


def test_an_extension_changes_one_students_due_date_and_attempts_only(
    client: TestClient, sections: dict[str, int], session: Session
) -> None:
    tia = api_token(client, "tia")
    later = A_DUE + timedelta(days=4)
    granted = client.post(
        f"/api/v1/instructor/students/{sections['cam']}/extensions?course=section-a", headers=tia,
        json={"assessment": "quiz:module-202", "due": later.isoformat(), "extra_attempts": 2, "reason": "illness"},
    )  # fmt: skip
    assert granted.status_code == 201, granted.text
    assert granted.json()["granted_by"] == "tia" and granted.json()["in_force"]
    quizzes = {
        name: {
            q["id"]: q for q in client.get("/api/v1/quizzes?course=section-a", headers=api_token(client, name)).json()
        }
        for name in ("cam", "ana")
    }
    assert datetime.fromisoformat(quizzes["cam"]["module-202"]["due"]) == later
    assert quizzes["cam"]["module-202"]["max_attempts"] == 5
    assert datetime.fromisoformat(quizzes["ana"]["module-202"]["due"]) == A_DUE
    assert quizzes["ana"]["module-202"]["max_attempts"] == 3
    # Section B's terms for cam are untouched: the extension is for section A.
    in_b = {q["id"]: q for q in client.get("/api/v1/quizzes?course=section-b", headers=api_token(client, "cam")).json()}
    assert datetime.fromisoformat(in_b["module-202"]["due"]) == B_DUE and in_b["module-202"]["max_attempts"] == 1
    # Both submit a day after the course's due date: late for ana, not for cam, whose date is later.
    for name in ("cam", "ana"):
        at = A_DUE + timedelta(days=1)
        make_attempt(session, sections[name], "module-202", right=5, started_at=at, submitted_at=at, course="section-a")
    # The gradebook export carries it: cam's own due date and extra attempts, ana's the course's.
    sign_in(client, "tia")
    text = client.get("/instructor/gradebook.csv?course=section-a").text
    rows = {r["student"]: r for r in csv.DictReader(io.StringIO(text))}
    assert datetime.fromisoformat(rows["cam"]["quiz:module-202:due"]) == later
    assert rows["cam"]["quiz:module-202:extra_attempts"] == "2"
    assert datetime.fromisoformat(rows["ana"]["quiz:module-202:due"]) == A_DUE
    assert rows["ana"]["quiz:module-202:extra_attempts"] == "0"
    assert (rows["cam"]["quiz:module-202:late"], rows["ana"]["quiz:module-202:late"]) == ("0", "1")
    # The student's page shows the grant with who made it and why.
    page = client.get(f"/instructor/students/{sections['cam']}?course=section-a").text
    assert "illness" in page and "by tia" in page


def test_extensions_are_refused_with_a_reason_and_change_nothing(client: TestClient, sections: dict[str, int]) -> None:
    sign_in(client, "tia")
    url = f"/instructor/students/{sections['cam']}/extensions?course=section-a"
    form = {"csrf_token": csrf_token(client), "assessment": "quiz:ch35-quiz", "extra_attempts": "1", "reason": "x"}
    not_assigned = client.post(url, data=form)
    assert not_assigned.status_code == 422 and "This course has no quiz" in not_assigned.text
    nothing = client.post(url, data={**form, "assessment": "quiz:module-202", "extra_attempts": "0"})
    assert nothing.status_code == 422 and "Grant a new due date, extra attempts, or both" in nothing.text
    no_reason = client.post(url, data={**form, "assessment": "quiz:module-202", "reason": " "})
    assert no_reason.status_code == 422 and "Give a reason" in no_reason.text
    outsider = client.post(f"/instructor/students/{sections['ben']}/extensions?course=section-a", data=form)
    assert outsider.status_code == 404  # ben is not in section A: to its TA, he does not exist
    assert "No extensions" in client.get(f"/instructor/students/{sections['cam']}?course=section-a").text


def test_a_broken_course_file_names_its_file_and_line(tmp_path: Path, content_tree: ContentTree) -> None:
    folder = tmp_path / "courses" / "section-c"
    folder.mkdir(parents=True)
    (folder / "course.yaml").write_text(
        "title: C\ntime_zone: Mars/Olympus\nquizzes:\n  module-202:\n    due: 2026-12-01\n  no-such-quiz:\n"
    )
    _, problems = load_courses(tmp_path, lambda p: str(p.relative_to(tmp_path)), content_tree)
    said = sorted(str(p) for p in problems)
    assert said == ["courses/section-c/course.yaml:2: time_zone: unknown time zone 'Mars/Olympus' "
                    "(use an IANA name such as Europe/Berlin)"]  # fmt: skip
    (folder / "course.yaml").write_text("title: C\nquizzes:\n  module-202:\n  no-such-quiz:\n")
    _, problems = load_courses(tmp_path, lambda p: str(p.relative_to(tmp_path)), content_tree)
    assert [str(p) for p in problems] == ["courses/section-c/course.yaml:4: unknown quiz 'no-such-quiz' in quizzes"]


def test_a_site_administrator_sees_every_course(client: TestClient, sections: dict[str, int], session: Session) -> None:
    make_user(session, "root", role=Role.admin)
    root = api_token(client, "root")
    for course, students in (("section-a", ["ana", "cam"]), ("section-b", ["ben", "cam"])):
        book = client.get(f"/api/v1/instructor/gradebook?course={course}", headers=root).json()
        assert [s["student"] for s in book["students"]] == students


def test_the_labs_page_lists_what_the_course_assigns(client: TestClient, sections: dict[str, int]) -> None:
    sign_in(client, "cam")
    in_a = client.get("/labs?course=section-a").text
    assert 'href="/labs/ring-allreduce"' in in_a and 'href="/labs/collectives-p2p"' not in in_a
    in_b = client.get("/labs?course=section-b").text  # section B assigns no lab
    assert 'href="/labs/ring-allreduce"' not in in_b
    refused = client.post("/api/v1/labs/ring-allreduce/submissions?course=section-b", json={"code": "x = 1\n"},
                          headers=api_token(client, "cam"))  # fmt: skip
    assert refused.status_code == 403 and "not part of this course" in refused.json()["detail"]


def test_the_exercises_page_lists_what_the_course_assigns(
    client: TestClient, sections: dict[str, int], tmp_path: Path, content_tree: ContentTree, session: Session
) -> None:
    sign_in(client, "cam")
    in_b = client.get("/exercises?course=section-b").text  # section B assigns no exercise set and no lab
    assert all(f'href="/exercises/{s.id}"' not in in_b for s in content_tree.exercise_sets)
    assert 'href="/labs/ring-allreduce"' not in in_b
    everything = client.get("/exercises?course=default").text  # cam is not in the default course: every set
    assert all(f'href="/exercises/{s.id}"' in everything for s in content_tree.exercise_sets)


def test_a_remembered_course_applies_only_to_its_members(client: TestClient, sections: dict[str, int]) -> None:
    # The browser last entered section B (a cookie that outlives a sign-out); the next person is in A only.
    client.cookies.set("ringlab_course", "section-b")
    sign_in(client, "ana")
    assert client.get("/instructor/gradebook").status_code == 403  # a student, in her own course A
    assert "section A" in client.get("/").text
    sign_in(client, "cam")  # in both: the remembered course holds
    assert "section B" in client.get("/").text


def test_a_lab_takes_its_course_s_limit_of_submissions_and_closes_at_its_due_date(
    client: TestClient, sections: dict[str, int], session: Session
) -> None:
    from sqlalchemy import update

    from app.content.records import Course
    from app.labs.models import Submission, SubmissionStatus

    past = (datetime.now(UTC) - timedelta(days=1)).isoformat()
    terms = {"max_attempts": 1, "due": None, "late": "accept", "show_answers": None}
    session.add_all([
        Course(id="lab-c", title="C", time_zone="UTC", position=3, assignments={"lab": {"ring-allreduce": terms}}),
        Course(id="lab-d", title="D", time_zone="UTC", position=4,
               assignments={"lab": {"ring-allreduce": {**terms, "max_attempts": None, "due": past, "late": "refuse"}}}),
    ])  # fmt: skip
    session.add_all(
        Enrollment(user_id=sections["cam"], course_id=c, role=CourseRole.student) for c in ("lab-c", "lab-d")
    )
    session.commit()
    cam = api_token(client, "cam")
    url = "/api/v1/labs/ring-allreduce/submissions"
    assert client.post(f"{url}?course=lab-c", json={"code": "x = 1\n"}, headers=cam).status_code == 202  # queued
    session.execute(update(Submission).values(status=SubmissionStatus.graded))  # graded: no longer in flight
    session.commit()
    again = client.post(f"{url}?course=lab-c", json={"code": "x = 2\n"}, headers=cam)
    assert again.status_code == 409 and again.json()["detail"] == (
        "This lab allows 1 submission(s) and you have used them all."
    )
    closed = client.post(f"{url}?course=lab-d", json={"code": "x = 3\n"}, headers=cam)
    assert closed.status_code == 409 and "This lab closed at" in closed.json()["detail"]
    assert "takes no more submissions" in closed.json()["detail"]
