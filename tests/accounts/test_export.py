"""A student downloads everything Ringlab holds about them: theirs, all of it, and nobody else's."""

from __future__ import annotations

import json
from datetime import timedelta

from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from app.accounts.export import OMITTED, export_user
from app.accounts.models import Role
from app.db import Base, utcnow
from app.reports.models import ProblemReport
from tests.factories import make_accommodation, make_attempt, make_user, sign_in


def report(session: Session, user_id: int, text: str, *, answered_by: int | None = None) -> None:
    session.add(
        ProblemReport(
            user_id=user_id, item_kind="card", item_id="mdt-001", content_digest="0" * 64, text=text,
            created_at=utcnow(), answered_by=answered_by, answer="Fixed." if answered_by else None,
        )
    )  # fmt: skip


def test_the_export_holds_the_students_rows_and_their_children_and_nobody_elses(session: Session) -> None:
    ada = make_user(session, "ada")
    bob = make_user(session, "bob")
    prof = make_user(session, "prof", role=Role.admin)
    start = utcnow() - timedelta(hours=1)
    mine = make_attempt(session, ada.id, "ch35-quiz", right=3, started_at=start, submitted_at=start, commit=False)
    make_attempt(session, bob.id, "ch35-quiz", right=1, started_at=start, submitted_at=start, commit=False)
    make_accommodation(session, ada.id, multiplier=1.5, note="letter from the disability office")
    report(session, ada.id, "ada's report", answered_by=prof.id)
    report(session, bob.id, "bob's report", answered_by=prof.id)
    session.commit()

    data = export_user(ada.id, session=session)
    tables = data["tables"]
    assert [row["username"] for row in tables["users"]] == ["ada"]
    assert [row["id"] for row in tables["quiz_attempts"]] == [mine.id]
    # The answers of her attempt: rows that refer to her rows, not to her.
    assert {row["attempt_id"] for row in tables["quiz_answers"]} == {mine.id} and len(tables["quiz_answers"]) > 3
    assert [row["text"] for row in tables["problem_reports"]] == ["ada's report"]
    text = json.dumps(data)
    assert "bob" not in text and str(bob.id) not in {str(r.get("user_id")) for t in tables.values() for r in t}
    # Secrets and staff's notes stay out, and the export says so.
    assert "password_hash" not in tables["users"][0] and "argon2" not in text
    assert "note" not in tables["quiz_accommodations"][0] and "disability office" not in text
    assert "users.password_hash: a secret: the password's Argon2 hash" in data["omitted"]

    # Staff's export holds what they own, never the reports of the students they answered.
    staff = export_user(prof.id, session=session)
    assert "problem_reports" not in staff["tables"] and "ada's report" not in json.dumps(staff)


def test_every_table_a_student_owns_rows_in_is_read_by_the_export() -> None:
    """A table added later with a ``user_id`` is exported without anyone listing it (or is skipped on purpose)."""
    from app.accounts.export import SKIPPED_TABLES

    owned = {t.name for t in Base.metadata.sorted_tables if "user_id" in t.c} - SKIPPED_TABLES
    assert {"quiz_attempts", "lab_submissions", "flashcard_reviews", "exercise_part_answers"} <= owned
    for table, column in OMITTED:
        assert column in Base.metadata.tables[table].c, (table, column)  # an omission that names a real column


def test_the_download_is_the_signed_in_students_own(client: TestClient, session: Session) -> None:
    ada = make_user(session, "ada")
    make_user(session, "bob")
    make_attempt(session, ada.id, "ch35-quiz", right=2, started_at=utcnow(), submitted_at=utcnow())
    assert client.get("/account/data", follow_redirects=False).status_code == 303  # signed out: sign in first
    sign_in(client, "bob")
    response = client.get("/account/data")
    assert response.status_code == 200 and response.headers["content-type"] == "application/json"
    assert response.headers["content-disposition"] == 'attachment; filename="ringlab-bob.json"'
    assert response.headers["cache-control"] == "no-store"
    body = response.json()
    assert [u["username"] for u in body["tables"]["users"]] == ["bob"] and "quiz_attempts" not in body["tables"]
    assert "Download your data (JSON)" in client.get("/account/password").text
