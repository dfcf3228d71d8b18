"""Lab review for instructors: filters, best per student, pages, the read-only submission page, live rows, CSV."""

from __future__ import annotations

import csv
import io
import re
from datetime import UTC, datetime, timedelta

from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from app.accounts.models import Role
from app.labs import review
from app.labs.models import SubmissionStatus
from tests.factories import make_submission, make_user, sign_in

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
HX = {"HX-Request": "true"}


def seed(session: Session) -> dict[str, int]:
    ids = {}
    for name in ("ann", "ben"):
        ids[name] = make_user(session, name).id
    make_user(session, "teach", role=Role.admin)
    make_submission(session, ids["ann"], "ring-allreduce", score=4, submitted_at=T0)
    make_submission(session, ids["ann"], "ring-allreduce", score=10, submitted_at=T0 + timedelta(minutes=1))
    make_submission(session, ids["ann"], "ring-allreduce", score=7, submitted_at=T0 + timedelta(minutes=2))
    make_submission(session, ids["ben"], "ring-allreduce", score=None, status=SubmissionStatus.failed, submitted_at=T0)
    make_submission(session, ids["ben"], "collectives-p2p", score=3, submitted_at=T0)
    return ids


def test_pick_best_prefers_the_highest_graded_score_then_the_latest() -> None:
    g, f = SubmissionStatus.graded, SubmissionStatus.failed
    assert review.pick_best([(1, 1, g, 4), (2, 1, g, 10), (3, 1, g, 10), (4, 2, f, None), (5, 2, f, None)]) == [5, 3]
    assert review.pick_best([(1, 1, g, 0), (2, 1, f, None)]) == [1]  # a graded 0 beats a failed run


def test_filters_best_per_student_and_pages(session: Session) -> None:
    seed(session)
    every = review.review("ring-allreduce", review.Filters(), session=session)
    assert every.total == 4 and [s.score for s, _ in every.rows] == [None, 7, 10, 4]  # newest first
    assert every.counts == {"graded": 3, "failed": 1} and every.in_flight == 0
    best = review.review("ring-allreduce", review.Filters(best=True), session=session)
    assert [(name, s.score) for s, name in best.rows] == [("ben", None), ("ann", 10)]
    ann = review.review("ring-allreduce", review.Filters(student="AN"), session=session)
    assert {name for _, name in ann.rows} == {"ann"} and ann.total == 3
    failed = review.review("ring-allreduce", review.Filters(status="failed"), session=session)
    assert [name for _, name in failed.rows] == ["ben"]
    page2 = review.review("ring-allreduce", review.Filters(page=2), session=session, per_page=3)
    assert page2.pages == 2 and [s.score for s, _ in page2.rows] == [4]
    assert review.Filters(student="a b", best=True).query(page=2) == "student=a+b&best=1&page=2"
    assert review.regradable("ring-allreduce", session=session) == 4


def test_the_instructors_submission_page_names_the_student_and_has_no_submit(
    client: TestClient, session: Session
) -> None:
    ids = seed(session)
    sub = make_submission(
        session, ids["ben"], "ring-allreduce", score=9, submitted_at=T0, code="print('ben was here')\n"
    )
    sign_in(client, "teach")
    page = client.get(f"/labs/submissions/{sub.id}").text
    assert f"ben's submission #{sub.id}" in page and "ben's code" in page and "print(&#39;ben was here&#39;)" in page
    assert "Your code" not in page and "data-lab-submit" not in page and '/submissions"' not in page
    assert 'hx-post="/labs/ring-allreduce/submissions"' not in page
    client.cookies.clear()
    sign_in(client, "ben")  # the author still gets the usual page, with the editor and Submit
    own = client.get(f"/labs/submissions/{sub.id}").text
    assert "Your code" in own and "data-lab-submit" in own


def test_rows_refresh_while_jobs_are_in_flight_and_stop_when_done(client: TestClient, session: Session) -> None:
    ids = seed(session)
    queued = make_submission(
        session, ids["ben"], "ring-allreduce", score=None, status=SubmissionStatus.queued, submitted_at=T0
    )
    sign_in(client, "teach")
    page = client.get("/labs/ring-allreduce/all?student=be").text
    assert 'hx-get="/labs/ring-allreduce/all?student=be"' in page and 'data-in-flight="1"' in page
    partial = client.get("/labs/ring-allreduce/all?student=be", headers=HX).text
    assert partial.lstrip().startswith('<section id="review-rows"') and "<html" not in partial
    queued.status, queued.score = SubmissionStatus.graded, 8
    session.commit()
    done = client.get("/labs/ring-allreduce/all?student=be", headers=HX).text
    assert 'data-in-flight="0"' in done and "hx-get" not in done and "8/10" in done


def test_submissions_csv(client: TestClient, session: Session) -> None:
    seed(session)
    sign_in(client, "teach")
    r = client.get("/labs/ring-allreduce/submissions.csv")
    assert r.headers["content-disposition"] == 'attachment; filename="ring-allreduce-submissions.csv"'
    text = r.content.decode("utf-8")
    assert text.splitlines()[0] == (
        "submission_id,student,user_id,lab_id,submitted_at,status,verdict,score,max_score,late,regrades,finished_at"
    )
    rows = list(csv.DictReader(io.StringIO(text)))
    assert [(x["student"], x["status"], x["score"], x["late"]) for x in rows] == [
        ("ann", "graded", "4", "false"), ("ann", "graded", "10", "false"), ("ann", "graded", "7", "false"),
        ("ben", "failed", "", "false"),
    ]  # fmt: skip
    assert re.fullmatch(r"2026-03-02T09:00:00\+00:00", rows[0]["submitted_at"])
