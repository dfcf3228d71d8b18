"""A site administrator deletes an account: its work goes with it, no page or export shows its name, the log says so."""

from __future__ import annotations

import json
import os
import re
import subprocess
from datetime import timedelta
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.accounts import deletion
from app.accounts.models import PasswordReset, Role, User
from app.accounts.recovery import issue_reset
from app.accounts.service import register
from app.content.records import Card
from app.courses.models import AuditEntry, CourseRole, Extension
from app.db import Base, make_engine, make_sessionmaker, session_scope, utcnow
from app.errors import Conflict, InvalidInput
from app.exercises import progress
from app.migrate import upgrade
from app.quizzes.models import QuizAccommodation, QuizAnswer
from app.reports import service as reports
from app.reports.models import ProblemReport
from tests.cli import ringlab as run_ringlab
from tests.factories import (
    api_token,
    csrf_token,
    make_accommodation,
    make_attempt,
    make_reviews,
    make_submission,
    make_user,
    sign_in,
)

NAME = "zephyrine"  # distinctive: it appears in a page only where her account is shown
QUIZ, LAB, EX, PART = "ch35-quiz", "ring-allreduce", "ex-26-20", "bert-break-even"


def references(session: Session, user_id: int) -> dict[str, int]:
    """Rows of every table that refer to the account ``user_id``, by ``table.column``."""
    found = {}
    for table in Base.metadata.sorted_tables:
        for fk in table.foreign_keys:
            if fk.column.table.name == "users":
                n = session.scalar(select(func.count()).select_from(table).where(fk.parent == user_id)) or 0
                if n:
                    found[f"{table.name}.{fk.parent.name}"] = n
    return found


def student_with_work(session: Session, name: str, admin: User) -> tuple[User, int]:
    """A student with a quiz attempt, a lab submission, card reviews, an exercise answer and a problem report
    (on a question of the attempt, answered by ``admin``), extra time and an extension; and the attempt's id."""
    now = utcnow()
    student = make_user(session, name)
    attempt = make_attempt(session, student.id, QUIZ, right=2, started_at=now - timedelta(hours=1), submitted_at=now)
    make_submission(session, student.id, LAB, score=7, submitted_at=now - timedelta(minutes=30))
    cards = list(session.scalars(select(Card.id).where(Card.deck_id == "mire-dis-train").order_by(Card.id).limit(2)))
    make_reviews(session, student.id, "mire-dis-train", cards, ratings=[3, 4], start=now, due=now + timedelta(days=2))
    progress.answer_part(EX, PART, student.id, "3", session=session, now=now)
    report = reports.file_report(
        student.id, "question", attempt.question_ids[0], f"{name} thinks B is right too", attempt_id=attempt.id,
        session=session, now=now,
    )  # fmt: skip
    reports.answer(report.id, admin.id, "Thanks: fixed.", session=session, now=now)
    make_accommodation(session, student.id, multiplier=1.5, note=f"letter for {name}", granted_by=admin.id)
    session.add(Extension(course_id="default", user_id=student.id, assessment=f"quiz:{QUIZ}", extra_attempts=1,
                          reason=f"{name} was ill", granted_by_id=admin.id, granted_at=now))  # fmt: skip
    issue_reset(student, by=admin, session=session, now=now)
    session.commit()
    return student, attempt.id


def pages(client: TestClient, token: dict[str, str]) -> dict[str, str]:
    """Every page and export where staff see students' names or work, as an administrator gets them."""
    got = {
        "gradebook": client.get("/instructor/gradebook"),
        "gradebook.csv": client.get("/instructor/gradebook.csv"),
        "statistics": client.get(f"/quizzes/{QUIZ}/statistics?attempts=all"),
        "lab submissions": client.get(f"/labs/{LAB}/all"),
        "lab submissions.csv": client.get(f"/labs/{LAB}/submissions.csv"),
        "reports": client.get("/instructor/reports?state=all"),
        "api gradebook": client.get("/api/v1/instructor/gradebook", headers=token),
    }
    for name, response in got.items():
        assert response.status_code == 200, (name, response.status_code)
    return {name: response.text for name, response in got.items()}


def attempts_counted(statistics_page: str) -> int:
    found = re.search(r'data-testid="attempts">(\d+)<', statistics_page)
    assert found, "the statistics page shows how many attempts it counts"
    return int(found.group(1))


def test_after_an_admin_deletes_a_student_no_page_or_export_shows_their_name(
    client: TestClient, session: Session
) -> None:
    prof = make_user(session, "prof", role=Role.admin)
    zed, attempt_id = student_with_work(session, NAME, prof)
    bob, bob_attempt = student_with_work(session, "bobby", prof)
    zed_id, bob_id = zed.id, bob.id  # read now: the objects are gone with the rows
    sign_in(client, "prof")
    token = api_token(client, "prof")
    before = pages(client, token)
    for name, text in before.items():
        if name != "statistics":  # statistics name no one: they count her attempt
            assert NAME in text, name
    report_id = session.scalar(select(ProblemReport.id).where(ProblemReport.user_id == zed_id))
    assert client.get(f"/instructor/reports/{report_id}").status_code == 200
    assert set(references(session, zed_id)) >= {
        "quiz_attempts.user_id", "lab_submissions.user_id", "flashcard_reviews.user_id",
        "exercise_part_answers.user_id", "problem_reports.user_id", "enrollments.user_id",
    }  # fmt: skip

    # The page says what goes, and asks for her username.
    confirm = client.get(f"/admin/users/{zed_id}/delete")
    assert confirm.status_code == 200 and "quiz attempts: 1" in confirm.text and "lab submissions: 1" in confirm.text
    url = f"/admin/users/{zed_id}/delete"
    wrong = client.post(url, data={"confirm": "bobby", "csrf_token": csrf_token(client)})
    assert wrong.status_code == 422 and 'aria-invalid="true"' in wrong.text and "type the account" in wrong.text
    assert session.get(User, zed_id) is not None  # a refused form changes nothing
    done = client.post(url, data={"confirm": NAME.upper(), "csrf_token": csrf_token(client)}, follow_redirects=False)
    assert done.status_code == 303 and done.headers["location"].startswith("/admin/users?deleted=")
    assert "The account was deleted" in client.get(done.headers["location"]).text

    session.expire_all()
    after = pages(client, token)
    for name, text in after.items():
        assert NAME not in text, name
    assert "bobby" in after["gradebook"] and "bobby" in after["lab submissions.csv"]  # the others stay
    assert attempts_counted(after["statistics"]) == attempts_counted(before["statistics"]) - 1
    assert client.get(f"/instructor/reports/{report_id}").status_code == 404
    assert references(session, zed_id) == {}
    assert session.scalar(select(func.count()).select_from(QuizAnswer).where(QuizAnswer.attempt_id == attempt_id)) == 0
    assert session.scalar(select(func.count()).select_from(QuizAnswer).where(QuizAnswer.attempt_id == bob_attempt))
    assert references(session, bob_id)["quiz_attempts.user_id"] == 1

    # Logged by number: who, what, how much; never her name.
    entry = session.scalars(select(AuditEntry).where(AuditEntry.action == deletion.ACTION)).one()
    assert entry.actor == "prof" and entry.detail["user_id"] == zed_id
    counts = entry.detail["counts"]
    assert counts["users"] == 1 and counts["quiz_attempts"] == 1 and counts["lab_submissions"] == 1
    assert counts["quiz_answers"] > 1 and counts["flashcard_reviews"] == 2 and counts["exercise_part_answers"] == 1
    assert counts["problem_reports"] == 1 and counts["enrollments"] == 1 and counts["password_resets"] == 1
    assert NAME not in json.dumps(entry.detail).lower()


def test_staff_named_on_other_students_rows_are_cleared_and_the_rows_stay(session: Session) -> None:
    prof = make_user(session, "prof", role=Role.admin)
    tara = make_user(session, "tara", course_role=CourseRole.ta)
    bob, _ = student_with_work(session, "bobby", tara)
    session.add(AuditEntry(at=utcnow(), actor="Tara", action="course.member.add", detail={"user": "tara", "n": 1}))
    session.add(AuditEntry(at=utcnow(), actor="prof", action="course.roster.import", detail={"created": ["bobby"]}))
    session.commit()

    done = deletion.delete_account(tara.id, actor="prof", by=prof.id, session=session, now=utcnow())
    session.commit()
    assert done.counts == {"enrollments": 1, "users": 1}  # a TA's own rows: her place in the course
    assert done.cleared == {
        "audit_log": 1, "password_resets.created_by_id": 1, "quiz_accommodations.granted_by": 1,
        "extensions.granted_by_id": 1, "problem_reports.answered_by": 1,
    }  # fmt: skip
    session.expire_all()
    report = session.scalars(select(ProblemReport).where(ProblemReport.user_id == bob.id)).one()
    assert report.answer == "Thanks: fixed." and report.answered_by is None
    accommodation = session.get(QuizAccommodation, bob.id)
    assert accommodation is not None and accommodation.granted_by is None
    assert session.scalars(select(Extension.granted_by_id).where(Extension.user_id == bob.id)).one() is None
    assert session.scalars(select(PasswordReset.created_by_id).where(PasswordReset.user_id == bob.id)).one() is None
    log = {e.action: e for e in session.scalars(select(AuditEntry))}
    gone = deletion.placeholder(tara.id)
    assert log["course.member.add"].actor == gone and log["course.member.add"].detail == {"user": gone, "n": 1}
    assert log["course.roster.import"].detail == {"created": ["bobby"]}  # another's name stays
    assert log[deletion.ACTION].detail["cleared"]["problem_reports.answered_by"] == 1


def test_only_site_administrators_reach_the_accounts_pages(client: TestClient, session: Session) -> None:
    make_user(session, "prof", role=Role.admin)
    target = make_user(session, NAME)
    make_user(session, "stu")
    make_user(session, "tara", course_role=CourseRole.ta)
    make_user(session, "ines", course_role=CourseRole.instructor)
    for who in ("stu", "tara", "ines"):
        sign_in(client, who)
        assert client.get("/admin/users").status_code == 403, who
        assert client.get(f"/admin/users/{target.id}/delete").status_code == 403, who
        refused = client.post(
            f"/admin/users/{target.id}/delete", data={"confirm": NAME, "csrf_token": csrf_token(client)}
        )
        assert refused.status_code == 403, who
        assert session.get(User, target.id) is not None
    client.post("/signout", data={"csrf_token": csrf_token(client)})
    assert client.get("/admin/users", follow_redirects=False).status_code == 303  # signed out: sign in first


def test_the_accounts_page_lists_and_searches(client: TestClient, session: Session) -> None:
    make_user(session, "prof", role=Role.admin)
    make_user(session, NAME)
    make_user(session, "tara", course_role=CourseRole.ta)
    sign_in(client, "prof")
    page = client.get("/admin/users").text
    assert '<th scope="row">zephyrine</th>' in page and "default (Teaching assistant)" in page
    assert "Site administrator" in page and '<span class="meta">you</span>' in page
    assert 'Delete<span class="visually-hidden"> tara</span>…' in page and 'role="search"' in page
    found = client.get("/admin/users?q=ZEPH").text
    assert "zephyrine" in found and '<th scope="row">tara</th>' not in found and "1 account matching" in found
    assert "0 accounts" in client.get("/admin/users?q=%25").text  # a wildcard is a character like any other
    assert client.get("/admin/users/2147483647/delete").status_code == 404


def test_the_only_administrator_and_oneself_cannot_be_deleted(client: TestClient, session: Session) -> None:
    prof = make_user(session, "prof", role=Role.admin)
    with pytest.raises(Conflict, match="only site administrator"):
        deletion.delete_account(prof.id, actor="terminal", session=session, now=utcnow())
    second = make_user(session, "dean", role=Role.admin)
    second_id = second.id
    sign_in(client, "prof")
    url = f"/admin/users/{prof.id}/delete"
    own = client.post(url, data={"confirm": "prof", "csrf_token": csrf_token(client)})
    assert own.status_code == 409 and "your own account" in own.text and 'role="alert"' in own.text
    with pytest.raises(InvalidInput):
        deletion.delete_account(second_id, actor="prof", by=prof.id, confirm="deam", session=session, now=utcnow())
    # With two, one may go: then the other is the only one again.
    done = client.post(f"/admin/users/{second_id}/delete", data={"confirm": "dean", "csrf_token": csrf_token(client)})
    assert done.status_code == 200 and "The account was deleted" in done.text
    session.expire_all()
    assert session.get(User, second_id) is None
    with pytest.raises(Conflict):
        deletion.delete_account(prof.id, actor="terminal", session=session, now=utcnow())


def test_ringlab_users_delete(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'delete.sqlite3'}"
    upgrade(url)
    engine = make_engine(url)
    with session_scope(make_sessionmaker(engine)) as session:
        register("prof", "a-long-password", role=Role.admin, session=session)
        register(NAME, "a-long-password", session=session)
    env = {**os.environ, "DATABASE_URL": url}

    def ringlab(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
        return run_ringlab("users", "delete", *args, env=env, input=stdin)

    kept = ringlab(NAME, stdin="n\n")  # asked first, and a no keeps it
    assert kept.returncode == 1 and f"{NAME} (account #2) and everything it made: users 1" in kept.stdout
    gone = ringlab(NAME.upper(), "--yes")
    assert gone.returncode == 0 and f"deleted {NAME} (account #2): users 1 (1 row)" in gone.stdout, gone.stderr
    again = ringlab(NAME, "--yes")
    assert again.returncode == 1 and f"there is no account '{NAME}'" in again.stderr
    last = ringlab("prof", "--yes")
    assert last.returncode == 1 and "only site administrator" in last.stderr and "Traceback" not in last.stderr
    with session_scope(make_sessionmaker(engine)) as session:
        entry = session.scalars(select(AuditEntry).where(AuditEntry.action == deletion.ACTION)).one()
        assert entry.actor == "terminal" and entry.detail["user_id"] == 2 and NAME not in json.dumps(entry.detail)
    engine.dispose()
