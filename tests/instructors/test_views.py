"""Instructor pages, exports and API in-process: who may see them, and what they show."""

from __future__ import annotations

import csv
import io
import shutil
from pathlib import Path

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from app.content.service import sync_directory
from app.quizzes.models import QuizAttempt
from tests.conftest import CONTENT_DIR
from tests.factories import api_token, csrf_token, sign_in
from tests.instructors.conftest import Klass

HX = {"HX-Request": "true"}


def pages(klass: Klass, session: Session) -> list[str]:
    attempt = session.scalars(select(QuizAttempt.id).where(QuizAttempt.user_id == klass.ada.id)).first()
    return [
        "/instructor",
        "/instructor/gradebook",
        "/instructor/gradebook?q=a&sort=quiz:module-202&desc=true",
        "/instructor/gradebook.csv",
        f"/instructor/students/{klass.ada.id}",
        f"/instructor/attempts/{attempt}",
        "/labs/ring-allreduce/all",
        "/labs/ring-allreduce/all?best=true&status=graded&student=ad",
        "/labs/ring-allreduce/submissions.csv",
        "/quizzes/module-202/statistics",
        "/quizzes/module-202/statistics?attempts=all",
    ]


def test_every_instructor_page_and_export_refuses_students_and_sends_strangers_to_sign_in(
    client: TestClient, session: Session, klass: Klass
) -> None:
    urls = pages(klass, session)
    for url in urls:
        r = client.get(url, follow_redirects=False)
        assert r.status_code == 303 and r.headers["location"].startswith("/signin?next="), url
    for url in ("/labs/ring-allreduce/regrade",):
        r = client.post(url, data={"csrf_token": csrf_token(client)}, follow_redirects=False)
        assert r.status_code == 303 and r.headers["location"].startswith("/signin"), url
    sign_in(client, "ada")
    for url in urls:
        assert client.get(url).status_code == 403, url
    token = csrf_token(client)
    assert client.post("/labs/ring-allreduce/regrade", data={"csrf_token": token, "confirm": "yes"}).status_code == 403
    client.cookies.clear()
    sign_in(client, "prof")
    for url in urls:
        assert client.get(url).status_code == 200, url


def test_gradebook_api_is_for_instructors_only(client: TestClient, klass: Klass) -> None:
    assert client.get("/api/v1/instructor/gradebook").status_code == 401
    r = client.get("/api/v1/instructor/gradebook", headers=api_token(client, "ada"))
    assert r.status_code == 403 and r.json() == {"detail": "The gradebook is for the course's staff."}
    r = client.get("/api/v1/instructor/gradebook", headers=api_token(client, "prof"))
    assert r.status_code == 200
    body = r.json()
    ada = next(s for s in body["students"] if s["student"] == "ada")
    assert ada["quiz:module-202:best"] == 24 and ada["quiz:module-202:late"] == 1
    assert body["fields"][:2] == ["student", "user_id"] and set(ada) == set(body["fields"])
    quiz = next(c for c in body["columns"] if c["key"] == "quiz:module-202")
    assert quiz["fields"] == ["quiz:module-202:best", "quiz:module-202:max", "quiz:module-202:attempts",
                              "quiz:module-202:late", "quiz:module-202:due",
                              "quiz:module-202:extra_attempts"]  # fmt: skip
    assert ada["quiz:module-202:due"] == klass.due.isoformat() and ada["quiz:module-202:extra_attempts"] == 0
    assert quiz["due"] == klass.due.isoformat()


def test_home_links_everything_and_counts_the_class(client: TestClient, klass: Klass) -> None:
    sign_in(client, "prof")
    page = client.get("/instructor").text
    for link in ('href="/instructor/gradebook"', 'href="/instructor/gradebook.csv"', 'href="/labs/ring-allreduce/all"',
                 'href="/labs/ring-allreduce/submissions.csv"', 'href="/quizzes/module-202/statistics"'):  # fmt: skip
        assert link in page
    assert '<p class="big-number" data-figure="students">3</p>' in page
    assert '<p class="big-number" data-figure="attempts">3</p>' in page
    assert '<p class="big-number" data-figure="cards">8</p>' in page
    assert "50% <span" in page and "(1 of 2 students at full marks)" in page  # the ring lab's pass rate


def test_gradebook_page_filters_live_sorts_and_links_each_student(client: TestClient, klass: Klass) -> None:
    sign_in(client, "prof")
    page = client.get("/instructor/gradebook").text
    assert f'href="/instructor/students/{klass.ada.id}"' in page
    assert 'data-column="quiz:module-202">24/25' in page
    assert "late</span>" in page
    partial = client.get("/instructor/gradebook?q=bo", headers=HX).text
    assert partial.lstrip().startswith('<section id="gradebook-table">') and "<html" not in partial
    assert 'data-student="bob"' in partial and 'data-student="ada"' not in partial
    sorted_page = client.get("/instructor/gradebook?sort=lab:ring-allreduce&desc=true").text
    assert sorted_page.index('data-student="ada"') < sorted_page.index('data-student="bob"')
    assert 'aria-sort="descending"' in sorted_page


def test_gradebook_csv_download(client: TestClient, klass: Klass) -> None:
    sign_in(client, "prof")
    r = client.get("/instructor/gradebook.csv")
    assert r.headers["content-type"] == "text/csv; charset=utf-8"
    assert r.headers["content-disposition"] == 'attachment; filename="gradebook.csv"'
    rows = list(csv.DictReader(io.StringIO(r.content.decode("utf-8"))))
    assert [row["student"] for row in rows] == ["ada", "bob", "cyd"]
    assert rows[0]["lab:ring-allreduce:best"] == "10"


def test_student_page_shows_attempts_submissions_with_code_and_flashcards(
    client: TestClient, session: Session, klass: Klass
) -> None:
    sign_in(client, "prof")
    page = client.get(f"/instructor/students/{klass.ada.id}").text
    assert "<h1>ada</h1>" in page and "24/25" in page and "20/25" in page
    assert page.count('badge-late">late') == 1
    assert "ada's code" in page and "def ring_allreduce(tensor):" in page
    attempt = session.scalars(select(QuizAttempt.id).where(QuizAttempt.user_id == klass.ada.id)).first()
    assert f'href="/instructor/attempts/{attempt}"' in page
    bob = client.get(f"/instructor/students/{klass.bob.id}").text
    assert "75% (3 of 4)" in bob
    assert client.get("/instructor/students/999999").status_code == 404


def test_an_instructor_opens_a_students_attempt_read_only_with_the_key(
    client: TestClient, session: Session, klass: Klass
) -> None:
    attempt = session.scalars(select(QuizAttempt).where(QuizAttempt.user_id == klass.ada.id)).first()
    assert attempt is not None
    sign_in(client, "prof")
    # The student's own result address takes an instructor to the read-only view.
    r = client.get(f"/quizzes/attempts/{attempt.id}/result", follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == f"/instructor/attempts/{attempt.id}"
    page = client.get(f"/instructor/attempts/{attempt.id}").text
    assert "ada's attempt" in page and "read-only" in page and "right answer" in page
    assert "their answer" in page and "your answer" not in page
    assert "<form" not in page.split("<main", 1)[1].split("</main>", 1)[0]  # nothing to submit or change
    assert client.get("/instructor/attempts/999999").status_code == 404


@pytest.fixture
def lab_due_content(tmp_path: Path, app: FastAPI, session_factory: sessionmaker[Session]) -> Path:
    """A copy of content/ whose ring lab is due at 2026-03-02 09:30 UTC, synced (labs are read from the database)."""
    root = tmp_path / "content"
    shutil.copytree(CONTENT_DIR, root)
    lab_yaml = root / "labs" / "ring-allreduce" / "lab.yaml"
    lab_yaml.write_text(lab_yaml.read_text() + "due: 2026-03-02T09:30:00Z\n")
    sync_directory(root, session_factory)
    app.state.settings = app.state.settings.model_copy(update={"content_dir": root})
    return root


def test_a_lab_due_date_marks_late_submissions_in_the_gradebook_and_the_export(
    client: TestClient, klass: Klass, lab_due_content: Path
) -> None:
    sign_in(client, "prof")
    rows = list(csv.DictReader(io.StringIO(client.get("/instructor/gradebook.csv").text)))
    assert rows[0]["lab:ring-allreduce:late"] == "1"  # ada's second submission, an hour after T0
    assert rows[1]["lab:ring-allreduce:late"] == "0"
    subs = list(csv.DictReader(io.StringIO(client.get("/labs/ring-allreduce/submissions.csv").text)))
    assert [(s["student"], s["late"]) for s in subs] == [("ada", "false"), ("ada", "true"), ("bob", "false")]
    assert "Due 02 Mar 2026, 09:30 UTC" in client.get("/labs/ring-allreduce/all").text
    client.cookies.clear()
    sign_in(client, "ada")  # the student sees the due date, and which of their submissions were late
    lab_page = client.get("/labs/ring-allreduce").text
    assert '<dd data-testid="due">02 Mar 2026, 09:30 UTC' in lab_page
    assert lab_page.count('badge-late">late') == 1
