"""Course pages in-process, on both databases: one's courses, entering and joining one, and a course's
settings for its instructors (join codes, roles, removals, roster imports), each change in the audit log."""

from __future__ import annotations

import re
from dataclasses import dataclass

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.accounts.models import Role, User
from app.content.records import Course
from app.courses import access
from app.courses.models import AuditEntry, CourseRole, Enrollment
from tests.factories import csrf_token, make_user, sign_in


@dataclass
class Place:
    """Course "default" (prof instructs, tara assists, ada studies) and course "b" (bea instructs, ada and
    tara study; bob's own)."""

    prof: User
    tara: User
    ada: User
    bea: User
    bob: User
    cyd: User  # in "default" only, a student


@pytest.fixture
def place(session: Session) -> Place:
    session.add(Course(id="b", title="Section B", term="Spring 2027", time_zone="UTC", assignments=None, position=1))
    session.commit()
    prof = make_user(session, "prof", course_role=CourseRole.instructor)
    tara = make_user(session, "tara", course_role=CourseRole.ta)
    ada = make_user(session, "ada")
    bea = make_user(session, "bea", course="b", course_role=CourseRole.instructor)
    bob = make_user(session, "bob", course="b")
    cyd = make_user(session, "cyd")
    session.add_all([Enrollment(user_id=ada.id, course_id="b", role=CourseRole.student),
                     Enrollment(user_id=tara.id, course_id="b", role=CourseRole.student)])  # fmt: skip
    session.commit()
    return Place(prof, tara, ada, bea, bob, cyd)


def post(client: TestClient, url: str, **data: str):  # type: ignore[no-untyped-def]
    return client.post(url, data={**data, "csrf_token": csrf_token(client)}, follow_redirects=False)


def as_user(client: TestClient, username: str) -> None:
    client.cookies.clear()
    sign_in(client, username)


def role_of(session: Session, user: User, course_id: str) -> CourseRole | None:
    session.expire_all()
    return session.scalar(
        select(Enrollment.role).where(Enrollment.user_id == user.id, Enrollment.course_id == course_id)
    )


def audit(session: Session) -> list[tuple[str, str, dict[str, object]]]:
    session.expire_all()
    return [(a.actor, a.action, a.detail) for a in session.scalars(select(AuditEntry).order_by(AuditEntry.id))]


def course_cookie(response) -> str:  # type: ignore[no-untyped-def]
    """The Set-Cookie header that enters a course."""
    return next(h for h in response.headers.get_list("set-cookie") if h.startswith(f"{access.COOKIE}="))


# --- one's courses: enter, join -----------------------------------------------------------------------------


def test_courses_page_lists_ones_courses_with_role_dates_and_enter_buttons(
    client: TestClient, session: Session, place: Place
) -> None:
    course = session.get(Course, "b")
    assert course is not None
    course.starts_on, course.ends_on = "2027-02-01", "2027-05-31"
    session.commit()
    as_user(client, "tara")
    page = client.get("/courses")
    assert page.status_code == 200
    listing = page.text[page.text.index('data-testid="course-list"') :]
    default = listing[listing.index('data-course="default"') : listing.index('data-course="b"')]
    assert "you are a teaching assistant" in default and "You are working in it now" in default
    b = listing[listing.index('data-course="b"') :]
    assert "Section B</strong> · Spring 2027" in b and "2027-02-01 to 2027-05-31 · you are a student" in b
    assert 'action="/courses/b/enter"' in b and 'Enter<span class="visually-hidden"> Section B' in b
    assert "<label>Join code" in page.text and 'href="/courses" aria-current="page">Courses</a>' in page.text


def test_entering_a_course_sets_its_cookie_and_sends_students_home_and_staff_to_the_instructor_pages(
    client: TestClient, place: Place
) -> None:
    as_user(client, "ada")
    r = post(client, "/courses/b/enter")
    assert r.status_code == 303 and r.headers["location"] == "/"
    cookie = course_cookie(r)
    assert cookie.startswith("ringlab_course=b;")
    for attribute in ("HttpOnly", "Path=/", "SameSite=lax", "Max-Age=31536000"):
        assert attribute.lower() in cookie.lower(), attribute
    home = client.get("/").text  # the cookie is sent back: the dashboard is in course b now
    assert 'data-testid="current-course">You are working in <strong>Section B</strong> · Spring 2027' in home
    assert 'data-testid="your-courses"' in home and 'action="/courses/default/enter"' in home
    as_user(client, "tara")
    r = post(client, "/courses/default/enter")
    assert r.status_code == 303 and r.headers["location"] == "/instructor"
    as_user(client, "bea")
    assert post(client, "/courses/b/enter").headers["location"] == "/instructor"


def test_a_dashboard_with_one_course_names_it_without_a_list(client: TestClient, place: Place) -> None:
    as_user(client, "cyd")
    home = client.get("/").text
    assert 'data-testid="current-course">You are working in <strong>Default course</strong>' in home
    assert 'data-testid="your-courses"' not in home


def test_entering_a_course_one_is_not_in_is_refused_saying_how_to_join(client: TestClient, place: Place) -> None:
    as_user(client, "cyd")
    r = post(client, "/courses/b/enter")
    assert r.status_code == 403
    assert "You are not in the course &#39;Section B&#39;. Join it with its join code" in r.text
    assert not any(h.startswith(f"{access.COOKIE}=") for h in r.headers.get_list("set-cookie"))
    assert post(client, "/courses/nope/enter").status_code == 404


def test_an_administrator_enters_any_course(client: TestClient, session: Session, place: Place) -> None:
    make_user(session, "root", role=Role.admin)
    as_user(client, "root")
    page = client.get("/courses").text
    assert 'data-testid="every-course"' in page and 'action="/courses/b/enter"' in page
    r = post(client, "/courses/b/enter")
    assert r.status_code == 303 and r.headers["location"] == "/instructor"
    assert course_cookie(r).startswith("ringlab_course=b;")
    # A code takes an administrator into the course without enrolling them: they are in every course.
    course = session.get(Course, "b")
    assert course is not None
    course.join_code = "KQ7M2XPA"
    session.commit()
    r = post(client, "/courses/join", join_code="KQ7M2XPA")
    assert r.status_code == 303 and course_cookie(r).startswith("ringlab_course=b;")
    assert session.scalar(select(func.count()).select_from(Enrollment).where(Enrollment.course_id == "b")) == 4


def test_joining_with_a_code_enrols_a_student_and_enters_the_course(
    client: TestClient, session: Session, place: Place
) -> None:
    course = session.get(Course, "b")
    assert course is not None
    course.join_code = "KQ7M2XPA"
    session.commit()
    as_user(client, "cyd")
    r = post(client, "/courses/join", join_code=" kq7m2xpa ")
    assert r.status_code == 303 and r.headers["location"] == "/"
    assert course_cookie(r).startswith("ringlab_course=b;")
    assert role_of(session, place.cyd, "b") == CourseRole.student
    assert audit(session) == [("cyd", "course.join", {"course": "b", "user": "cyd"})]


def test_joining_keeps_a_higher_role(client: TestClient, session: Session, place: Place) -> None:
    course = session.get(Course, "default")
    assert course is not None
    course.join_code = "KQ7M2XPA"
    session.commit()
    as_user(client, "tara")
    assert post(client, "/courses/join", join_code="KQ7M2XPA").status_code == 303
    assert role_of(session, place.tara, "default") == CourseRole.ta
    assert audit(session) == []


def test_a_wrong_code_reshows_the_page_and_changes_nothing(client: TestClient, session: Session, place: Place) -> None:
    course = session.get(Course, "b")
    assert course is not None
    course.join_code = "KQ7M2XPA"
    session.commit()
    as_user(client, "cyd")
    r = post(client, "/courses/join", join_code="WRONG123")
    assert r.status_code == 403
    assert 'role="alert" id="join-error">That course join code is not right. Ask your instructor for it.' in r.text
    assert 'value="WRONG123"' in r.text and 'aria-invalid="true"' in r.text
    assert role_of(session, place.cyd, "b") is None
    assert not any(h.startswith(f"{access.COOKIE}=") for h in r.headers.get_list("set-cookie"))


def test_wrong_codes_are_limited_per_account(client: TestClient, session: Session, place: Place) -> None:
    as_user(client, "cyd")
    for _ in range(10):
        assert post(client, "/courses/join", join_code="WRONG123").status_code == 403
    r = post(client, "/courses/join", join_code="WRONG123")
    assert r.status_code == 429 and "Too many wrong join codes from this account" in r.text
    assert int(r.headers["retry-after"]) > 0


def test_the_courses_pages_need_a_signed_in_user(client: TestClient, place: Place) -> None:
    r = client.get("/courses", follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"].startswith("/signin?next=")
    assert 'href="/courses"' not in client.get("/").text


# --- a course's settings: who may see them ---------------------------------------------------------------


def settings_routes(place: Place) -> list[tuple[str, str, dict[str, str]]]:
    """Every settings route: (method, path, form)."""
    return [
        ("GET", "/instructor/course", {}),
        ("POST", "/instructor/course/join-code", {}),
        ("POST", "/instructor/course/join-code/off", {}),
        ("POST", "/instructor/course/members", {"username": "cyd", "role": "ta"}),
        ("POST", f"/instructor/course/members/{place.ada.id}/role", {"role": "instructor"}),
        ("POST", f"/instructor/course/members/{place.ada.id}/remove", {}),
        ("POST", "/instructor/course/roster", {"text": "username\nnewbie\n"}),
    ]


def call(client: TestClient, method: str, path: str, form: dict[str, str]):  # type: ignore[no-untyped-def]
    if method == "GET":
        return client.get(path, follow_redirects=False)
    return post(client, path, **form)


def test_a_teaching_assistant_and_a_student_get_403_on_every_settings_route_and_change_nothing(
    client: TestClient, session: Session, place: Place
) -> None:
    users_before = session.scalar(select(func.count()).select_from(User))
    for username in ("tara", "ada"):
        as_user(client, username)
        for method, path, form in settings_routes(place):
            r = call(client, method, path, form)
            assert r.status_code == 403, (username, path)
            assert "This page is for the course&#39;s instructors." in r.text, path
    assert 'data-testid="course-settings"' not in client.get("/instructor").text  # ada: a student
    as_user(client, "tara")
    assert 'data-testid="course-settings"' not in client.get("/instructor").text
    assert role_of(session, place.ada, "default") == CourseRole.student
    assert session.scalar(select(func.count()).select_from(User)) == users_before
    assert audit(session) == []


def test_an_instructor_of_one_course_gets_403_on_anothers_settings(
    client: TestClient, session: Session, place: Place
) -> None:
    as_user(client, "prof")
    for method, path, form in settings_routes(place):
        r = call(client, method, f"{path}?course=b", form)
        assert r.status_code == 403, path
    as_user(client, "bea")
    for method, path, form in settings_routes(place):
        assert call(client, method, f"{path}?course=default", form).status_code == 403, path
    assert client.get("/instructor/course?course=b").status_code == 200
    assert role_of(session, place.ada, "default") == CourseRole.student and audit(session) == []


def test_the_settings_page_shows_the_course_its_joining_and_roster(
    client: TestClient, session: Session, place: Place
) -> None:
    session.get(User, place.ada.id).full_name = "Ada Lovelace"  # type: ignore[union-attr]
    session.commit()
    as_user(client, "prof")
    assert 'href="/instructor/course" role="button"' in client.get("/instructor").text
    page = client.get("/instructor/course")
    assert page.status_code == 200 and page.headers["cache-control"] == "no-store"
    text = page.text
    assert "<h1>Default course</h1>" in text and "<dd>UTC</dd>" in text
    assert "1 student" not in text and "2 students, 1 teaching assistant, 1 instructor" in text
    assert "Open: anyone who signs up without a code is in this course." in text
    rows = re.findall(r'data-member="(\w+)" data-role="(\w+)"', text)
    assert rows == [("prof", "instructor"), ("tara", "ta"), ("ada", "student"), ("cyd", "student")]
    ada = text[text.index('data-member="ada"') :]
    assert "<td>Ada Lovelace</td>" in ada
    assert f'<label for="role-{place.ada.id}" class="visually-hidden">Role of ada</label>' in ada
    assert f'action="/instructor/course/members/{place.ada.id}/role?course=default"' in ada
    assert f'href="/instructor/students/{place.ada.id}?course=default"' in ada
    assert 'action="/instructor/course/roster?course=default" enctype="multipart/form-data"' in text
    # A site administrator, in no course, manages it too.
    make_user(session, "root", role=Role.admin)
    as_user(client, "root")
    assert client.get("/instructor/course?course=b").status_code == 200


def test_join_codes_new_and_off(client: TestClient, session: Session, place: Place) -> None:
    as_user(client, "bea")
    r = post(client, "/instructor/course/join-code?course=b")
    assert r.status_code == 303 and r.headers["location"] == "/instructor/course?course=b&done=code#joining"
    session.expire_all()
    code = session.get(Course, "b").join_code  # type: ignore[union-attr]
    assert code and re.fullmatch(r"[A-HJ-NP-Z2-9]{8}", code)
    page = client.get(r.headers["location"]).text
    assert f"<code>{code}</code>" in page and "A new join code is in force" in page
    assert "Turn off joining by code" in page
    r = post(client, "/instructor/course/join-code/off?course=b")
    assert r.headers["location"] == "/instructor/course?course=b&done=off#joining"
    session.expire_all()
    assert session.get(Course, "b").join_code is None  # type: ignore[union-attr]
    page = client.get(r.headers["location"]).text
    assert "Joining by code is off: only the course's instructors add people" in page
    assert "Turn off joining by code" not in page
    assert [a[:2] for a in audit(session)] == [("bea", "course.join_code.new"), ("bea", "course.join_code.off")]
    assert audit(session)[0][2] == {"course": "b"}  # the code itself is not kept in the log


def test_the_operators_join_code_shows_on_the_default_course(client: TestClient, place: Place) -> None:
    client.app.state.settings = client.app.state.settings.model_copy(update={"join_code": "operator-code"})  # type: ignore[attr-defined]
    as_user(client, "prof")
    page = client.get("/instructor/course").text
    assert "<code>operator-code</code> (<code>RINGLAB_JOIN_CODE</code>" in page and "Open:" not in page


# --- a course's settings: people ----------------------------------------------------------------------------


def test_roles_change_people_are_added_and_removed_each_one_logged(
    client: TestClient, session: Session, place: Place
) -> None:
    as_user(client, "prof")
    r = post(client, f"/instructor/course/members/{place.ada.id}/role", role="ta")
    assert r.status_code == 303
    assert r.headers["location"] == f"/instructor/course?course=default&done=role&member={place.ada.id}#people"
    assert "ada is now a teaching assistant in this course." in client.get(r.headers["location"]).text
    assert role_of(session, place.ada, "default") == CourseRole.ta
    r = post(client, "/instructor/course/members", username="BOB", role="student")
    assert r.status_code == 303 and role_of(session, place.bob, "default") == CourseRole.student
    assert "bob is now in the course, as a student." in client.get(r.headers["location"]).text
    r = post(client, f"/instructor/course/members/{place.cyd.id}/remove")
    assert r.status_code == 303 and role_of(session, place.cyd, "default") is None
    assert r.headers["location"] == "/instructor/course?course=default&done=removed#people"
    removed = client.get(r.headers["location"]).text
    assert "Removed: they are no longer in this course. Their work stays in it." in removed
    # A notice names only a member of this course: no other account's username leaks through it.
    page = client.get(f"/instructor/course?done=role&member={place.bea.id}").text
    assert 'data-testid="notice"' not in page and "bea" not in page
    assert audit(session) == [
        ("prof", "course.member.role", {"course": "default", "user": "ada", "role": "ta", "was": "student"}),
        ("prof", "course.member.add", {"course": "default", "user": "bob", "role": "student"}),
        ("prof", "course.member.remove", {"course": "default", "user": "cyd", "was": "student"}),
    ]


def test_mistakes_with_people_reshow_the_page_and_change_nothing(
    client: TestClient, session: Session, place: Place
) -> None:
    as_user(client, "prof")
    r = post(client, "/instructor/course/members", username="nobody", role="ta")
    assert r.status_code == 404
    assert 'id="add-error">There is no account &#39;nobody&#39;. Ask them to sign up, or import them' in r.text
    assert 'value="nobody"' in r.text and '<option value="ta" selected>' in r.text
    r = post(client, "/instructor/course/members", username="cyd", role="dean")
    assert r.status_code == 422 and "Unknown role &#39;dean&#39;: use student, ta or instructor." in r.text
    r = post(client, f"/instructor/course/members/{place.bob.id}/role", role="ta")
    assert r.status_code == 404 and 'id="people-error">There is no such person in this course.' in r.text
    assert "bob" not in r.text  # an account of another course stays nameless
    assert post(client, f"/instructor/course/members/{place.bob.id}/remove").status_code == 404
    assert post(client, "/instructor/course/members/999999/remove").status_code == 404
    # The only instructor cannot leave the course without one.
    r = post(client, f"/instructor/course/members/{place.prof.id}/role", role="student")
    assert r.status_code == 409
    assert "prof is this course&#39;s only instructor: make someone else instructor first." in r.text
    assert post(client, f"/instructor/course/members/{place.prof.id}/remove").status_code == 409
    assert role_of(session, place.prof, "default") == CourseRole.instructor
    assert role_of(session, place.cyd, "default") == CourseRole.student
    assert audit(session) == []
    # With a second instructor, the first may step down.
    assert post(client, f"/instructor/course/members/{place.tara.id}/role", role="instructor").status_code == 303
    assert post(client, f"/instructor/course/members/{place.prof.id}/role", role="ta").status_code == 303
    assert role_of(session, place.prof, "default") == CourseRole.ta


# --- a course's settings: roster import ---------------------------------------------------------------------


def test_a_roster_import_enrols_existing_accounts_makes_new_ones_and_shows_their_links_once(
    client: TestClient, session: Session, place: Place
) -> None:
    as_user(client, "bea")
    roster = "username,name,email\nbob,,\nada,Ada L,\nNewbie,New Student,newbie@example.edu\ntara,,\n"
    r = client.post(
        "/instructor/course/roster?course=b", data={"csrf_token": csrf_token(client)},
        files={"upload": ("roster.csv", roster.encode(), "text/csv")},
    )  # fmt: skip
    assert r.status_code == 200, r.text
    assert r.headers["cache-control"] == "no-store" and r.headers["referrer-policy"] == "no-referrer"
    assert "Section B: 1 new account, 0 existing accounts enrolled, 3 already in the course." in r.text
    newbie = session.scalar(select(User).where(User.username_key == "newbie"))
    assert newbie is not None and (newbie.full_name, newbie.email) == ("New Student", "newbie@example.edu")
    assert role_of(session, newbie, "b") == CourseRole.student
    assert role_of(session, place.tara, "b") == CourseRole.student and place.ada.full_name is None
    link = re.search(r'value="(http://testserver/reset/[\w-]+)"', r.text)
    assert link is not None and "One-time link for Newbie" in r.text
    # The link is the account's way in: it shows the reset form, for this account.
    reset = client.get(link.group(1).removeprefix("http://testserver"))
    assert reset.status_code == 200 and "Newbie" in reset.text
    # Pasted text works the same; cyd, in another course, is enrolled as he is.
    r = post(client, "/instructor/course/roster?course=b", text="username\ncyd\n")
    assert r.status_code == 200 and 'data-testid="enrolled">cyd: they sign in as before.' in r.text
    assert role_of(session, place.cyd, "b") == CourseRole.student
    assert role_of(session, place.cyd, "default") == CourseRole.student
    assert [a[:2] for a in audit(session)] == [("bea", "course.roster.import")] * 2
    assert audit(session)[0][2] == {"course": "b", "created": ["Newbie"], "enrolled": []}
    assert audit(session)[1][2] == {"course": "b", "created": [], "enrolled": ["cyd"]}


def test_a_roster_with_a_bad_line_is_refused_naming_it_and_nothing_changes(
    client: TestClient, session: Session, place: Place
) -> None:
    users_before = session.scalar(select(func.count()).select_from(User))
    as_user(client, "prof")
    roster = "username,name\nnewbie,New\nbob,Bob\nbad name,X\nnewbie,Again\n"
    r = post(client, "/instructor/course/roster", text=roster)
    assert r.status_code == 422
    error = r.text[r.text.index('data-testid="roster-error"') :]
    assert "Nothing was imported: fix these lines and try again." in error
    assert "<li>Line 4: &#39;bad name&#39; is not a valid username" in error
    assert "<li>Line 5: &#39;newbie&#39; is already on line 2.</li>" in error
    assert "newbie,New\nbob,Bob\nbad name,X" in r.text  # the pasted text, to fix in place
    r = client.post(
        "/instructor/course/roster", data={"csrf_token": csrf_token(client)},
        files={"upload": ("roster.csv", b"name,email\nx,y\n", "text/csv")},
    )  # fmt: skip
    assert r.status_code == 422 and "Line 1: the header row has no &#39;username&#39; column." in r.text
    r = client.post(
        "/instructor/course/roster", data={"csrf_token": csrf_token(client)},
        files={"upload": ("roster.csv", "username\nadé\n".encode("latin-1"), "text/csv")},
    )  # fmt: skip
    assert r.status_code == 422 and "roster.csv is not UTF-8 text" in r.text
    r = post(client, "/instructor/course/roster", text="  ")
    assert r.status_code == 422 and "Choose a CSV file, or paste the roster into the box." in r.text
    assert session.scalar(select(func.count()).select_from(User)) == users_before
    assert role_of(session, place.bob, "default") is None and audit(session) == []
