"""The reference solution after passing: the pure rule, the diff, and the page with real graded submissions."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from app.accounts.models import Role
from app.labs.diff import Row, side_by_side
from app.labs.reference import access
from app.labs.settings import LabSettings
from tests.conftest import CONTENT_DIR
from tests.factories import api_token
from tests.labs_app.conftest import Clock, signed_in, submit_graded

HX = {"HX-Request": "true"}
NOW = datetime(2026, 12, 5, 12, 0, tzinfo=UTC)
DUE = datetime(2026, 12, 1, 23, 59, 59, tzinfo=UTC)


def solution_lines(lab: str) -> list[str]:
    """Telling lines of the lab's solution.py (long, not comments, not in its starter or statement)."""
    folder = CONTENT_DIR / "labs" / lab
    public = (folder / "starter.py").read_text() + (folder / "statement.md").read_text()
    lines = {line.strip() for line in (folder / "solution.py").read_text().splitlines()}
    return sorted(line for line in lines if len(line) >= 24 and not line.startswith("#") and line not in public)


def ring_verdict(score: int) -> dict[str, Any]:
    """A ring verdict worth ``score`` of 10: full marks, or the neighbours check lost."""
    lost = 10 - score
    checks = [
        {"id": "ring-all-reduce", "title": "t", "points": 4, "passed": True, "score": 4, "message": "ok"},
        {"id": "ring-neighbours", "title": "t", "points": 3, "passed": lost == 0, "score": 3 - lost, "message": "m"},
        {"id": "communication-volume", "title": "t", "points": 3, "passed": True, "score": 3, "message": "ok"},
        {"id": "no-builtin-collectives", "title": "t", "points": 0, "passed": True, "score": 0, "message": "ok"},
    ]
    return {"lab": "ring-allreduce", "status": "passed" if lost == 0 else "failed", "score": score,
            "max_score": 10, "message": "m", "checks": checks, "output": {}, "data": {}}  # fmt: skip


# The rule ---------------------------------------------------------------------------------------------


def test_after_full_marks_opens_with_full_marks_only() -> None:
    assert access("after_full_marks", due=None, now=NOW, full_marks=True, instructor=False).allowed is True
    shut = access("after_full_marks", due=DUE, now=NOW, full_marks=False, instructor=False)
    assert shut.allowed is False
    assert shut.reason == (
        "The reference solution opens once one of your submissions to this lab earns full marks. Keep going!"
    )


def test_after_due_opens_once_the_due_date_has_passed() -> None:
    assert access("after_due", due=DUE, now=NOW, full_marks=False, instructor=False).allowed is True
    early = access("after_due", due=DUE, now=DUE - timedelta(seconds=1), full_marks=True, instructor=False)
    assert early.allowed is False
    assert early.reason == "The reference solution for this lab opens after its due date (01 Dec 2026, 23:59 UTC)."
    assert access("after_due", due=DUE, now=DUE, full_marks=True, instructor=False).allowed is False  # after, not at


def test_never_stays_shut_for_students_and_instructors_may_always_compare() -> None:
    never = access("never", due=DUE, now=NOW, full_marks=True, instructor=False)
    assert never == access("never", due=None, now=NOW, full_marks=True, instructor=False)
    assert never.allowed is False and never.reason.startswith("This lab does not publish its reference solution")
    assert access("never", due=None, now=NOW, full_marks=False, instructor=True).allowed is True


def test_the_diff_pairs_lines_and_marks_every_change() -> None:
    diff = side_by_side("a\nb\nc\nx\n", "a\nB\nc\ny\nz\n")
    assert diff.rows == [
        Row("same", 1, "a", 1, "a"),
        Row("changed", 2, "b", 2, "B"),
        Row("same", 3, "c", 3, "c"),
        Row("changed", 4, "x", 4, "y"),
        Row("added", None, None, 5, "z"),
    ]
    assert diff.counts == {"same": 2, "changed": 2, "removed": 0, "added": 1}
    removed = side_by_side("keep\ngone\n", "keep\n").rows[1]
    assert (removed.change, removed.symbol, removed.words) == ("removed", "−", "only in yours")
    assert [r.symbol for r in diff.rows] == ["", "~", "", "~", "+"]


# The page ---------------------------------------------------------------------------------------------


def test_the_reference_opens_after_full_marks_beside_the_students_own_best(
    client: TestClient, session: Session, clock: Clock, roomy: LabSettings
) -> None:
    secret = solution_lines("ring-allreduce")
    assert len(secret) >= 5
    # Another student's full marks, with code of their own, must never show on this student's page.
    signed_in(client, session)
    submit_graded(client, session, clock, ring_verdict(10), code="# someone else's ring\nOTHER = 1\n")
    client.cookies.clear()

    name = signed_in(client, session)
    auth = api_token(client, name)
    partial = submit_graded(client, session, clock, ring_verdict(7), code="# my first try\nMINE = 1\n")
    shut = client.get("/labs/ring-allreduce/reference")
    assert shut.status_code == 403
    assert "opens once one of your submissions to this lab earns full marks" in shut.text
    assert not any(line in shut.text for line in secret)
    api_shut = client.get("/api/v1/submissions/" + str(partial), headers=auth)
    assert api_shut.status_code == 200 and not any(line in api_shut.text for line in secret)
    page = client.get("/labs/ring-allreduce").text
    assert "/labs/ring-allreduce/reference" not in page
    assert "/labs/ring-allreduce/reference" not in client.get(f"/labs/submissions/{partial}", headers=HX).text

    best = submit_graded(client, session, clock, ring_verdict(10), code="# my ring\nMINE = 2\n")
    submit_graded(client, session, clock, ring_verdict(7), code="# a later, worse try\nMINE = 3\n")
    # The fragment of the passing submission links to the comparison; so does the lab page.
    assert 'href="/labs/ring-allreduce/reference"' in client.get(f"/labs/submissions/{best}", headers=HX).text
    assert 'data-testid="reference-link"' in client.get("/labs/ring-allreduce").text

    shown = client.get("/labs/ring-allreduce/reference")
    assert shown.status_code == 200
    text = shown.text
    assert "<caption" in text and f"Your submission #{best} beside the reference solution" in text
    assert (
        '<th scope="row" class="diff-mark">' in text
        and '<span class="visually-hidden">only in the reference</span>' in text
    )
    assert "<code>MINE = 2</code>" in text  # the best submission, not the latest
    assert "MINE = 3" not in text and "MINE = 1" not in text
    assert "OTHER = 1" not in text and "someone else" not in text
    assert any(line in text for line in secret)
    assert 'role="region"' in text and 'tabindex="0"' in text  # scrolls inside itself on a phone

    # The API never carries the reference, even now.
    api = [
        client.get("/api/v1/labs/ring-allreduce", headers=auth),
        client.get(f"/api/v1/submissions/{best}", headers=auth),
    ]
    assert all(r.status_code == 200 for r in api)
    assert not any(line in r.text for r in api for line in secret)


def test_the_statement_links_to_the_comparison_under_what_the_grader_does(
    client: TestClient, session: Session, clock: Clock, roomy: LabSettings
) -> None:
    signed_in(client, session)
    link = '<a href="/labs/ddp-from-scratch/reference">Compare your best submission with the reference solution</a>'
    assert link not in client.get("/labs/ddp-from-scratch").text
    points = {"gradients": 4, "parameters": 3, "ranks-identical": 1, "communication": 2}
    checks = [
        {"id": c, "title": "t", "points": p, "passed": True, "score": p, "message": "ok"} for c, p in points.items()
    ]
    result = {"lab": "ddp-from-scratch", "status": "passed", "score": 10, "max_score": 10, "message": "m",
              "checks": checks, "output": {}, "data": {}}  # fmt: skip
    submit_graded(client, session, clock, result, code="# ddp\n", lab="ddp-from-scratch")
    page = client.get("/labs/ddp-from-scratch").text
    assert re.search(r"<h2[^>]*>What the grader does</h2>" + re.escape('<p class="lab-reference-link">' + link), page)


def test_the_reference_needs_a_sign_in_and_instructors_may_always_compare(client: TestClient, session: Session) -> None:
    anonymous = client.get("/labs/ring-allreduce/reference", follow_redirects=False)
    assert anonymous.status_code == 303 and "/signin" in anonymous.headers["location"]
    signed_in(client, session, Role.admin)
    shown = client.get("/labs/ring-allreduce/reference")
    assert shown.status_code == 200 and "so on the left is its starter code" in shown.text
    assert client.get("/labs/nope/reference").status_code == 404
