"""Partial credit to one decimal, everywhere a score is kept or shown: the database, the result page,
the history, the lab list's best score, the JSON API, the CLI client, the instructor's pages and CSV."""

from __future__ import annotations

import csv
import io

from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from app.accounts.models import Role
from app.client import format as client_format
from app.labs.models import Submission
from app.labs.settings import LabSettings
from tests.factories import api_token
from tests.labs_app.conftest import Clock, signed_in
from tests.labs_app.test_pages import HX, grade, submit

CHECKS = [
    {"id": "ring-all-reduce", "title": "t", "points": 4, "passed": True, "score": 4, "message": "all right"},
    # 2 of 4 rank results right: 2/4 of 3 points, which used to be rounded down to 1.
    {"id": "ring-neighbours", "title": "t", "points": 3, "passed": False, "score": 1.5, "message": "2 of 4 right"},
    {"id": "communication-volume", "title": "t", "points": 3, "passed": True, "score": 3, "message": "ok"},
    {"id": "no-builtin-collectives", "title": "t", "points": 0, "passed": False, "score": 0, "message": "no"},
]
PARTIAL = {"lab": "ring-allreduce", "status": "failed", "score": 8.5, "max_score": 10, "message": "m", "checks": CHECKS}
FULL = {
    **PARTIAL,
    "status": "passed",
    "score": 10.0,
    "checks": [{**c, "passed": True, "score": c["points"]} for c in CHECKS],
}


def test_a_fractional_score_is_kept_and_shown_to_one_decimal(
    client: TestClient, session: Session, clock: Clock, lab_settings: LabSettings
) -> None:
    signed_in(client, session)
    sid, _ = submit(client)
    grade(session, clock, PARTIAL)
    row = session.get(Submission, sid)
    assert row is not None and row.score == 8.5  # an Integer column kept 8
    page = client.get(f"/labs/submissions/{sid}", headers=HX).text
    assert 'data-testid="outcome">8.5/10</strong>' in page
    assert "<td>1.5/3</td>" in page and "<td>4/4</td>" in page  # whole points keep no ".0"
    assert "8.5/10" in client.get("/labs/ring-allreduce/history", headers=HX).text
    assert "best 8.5/10" in client.get("/labs").text


def test_full_marks_read_10_of_10_in_pages_and_json(
    client: TestClient, session: Session, clock: Clock, lab_settings: LabSettings
) -> None:
    signed_in(client, session)
    sid, _ = submit(client)
    grade(session, clock, FULL)
    page = client.get(f"/labs/submissions/{sid}", headers=HX).text
    assert 'data-testid="outcome">10/10 Passed</strong>' in page and "10.0" not in page


def test_the_api_and_the_client_give_the_share(
    client: TestClient, session: Session, clock: Clock, lab_settings: LabSettings
) -> None:
    name = signed_in(client, session)
    sid, _ = submit(client)
    grade(session, clock, PARTIAL)
    body = client.get(f"/api/v1/submissions/{sid}", headers=api_token(client, name)).json()
    assert body["score"] == 8.5 and body["result"] == "8.5/10"
    assert [c["points"] for c in body["checks"]] == [4, 1.5, 3, 0]
    best = {lab["id"]: lab["best_score"] for lab in client.get("/api/v1/labs", headers=api_token(client, name)).json()}
    assert best["ring-allreduce"] == 8.5
    lines = client_format.result_lines(body)
    assert "Total: 8.5/10" in lines and any("1.5/3" in line for line in lines)
    assert client_format.best({"best_score": 8.5, "max_score": 10}) == "8.5/10"
    assert client_format.exit_status(body) == client_format.BELOW_FULL_MARKS


def test_instructors_see_the_share_in_their_pages_and_exports(
    client: TestClient, session: Session, clock: Clock, lab_settings: LabSettings
) -> None:
    signed_in(client, session)
    submit(client)
    grade(session, clock, PARTIAL)
    client.cookies.clear()
    signed_in(client, session, Role.admin, prefix="teacher")
    rows = list(csv.DictReader(io.StringIO(client.get("/labs/ring-allreduce/submissions.csv").text)))
    assert [r["score"] for r in rows] == ["8.5"]
    book = list(csv.DictReader(io.StringIO(client.get("/instructor/gradebook.csv").text)))
    assert [r["lab:ring-allreduce:best"] for r in book if r["lab:ring-allreduce:best"]] == ["8.5"]
    assert "8.5/10" in client.get("/instructor/gradebook").text
