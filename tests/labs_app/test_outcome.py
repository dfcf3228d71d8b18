"""One vocabulary for a submission's result: a score for every run that could be judged, else "Could not run: why"."""

from __future__ import annotations

import re

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from app.accounts.models import Role
from app.db import utcnow
from app.labs import outcome
from app.labs.models import Submission, SubmissionStatus
from tests.factories import api_token, make_user, sign_in

HX = {"HX-Request": "true"}


@pytest.mark.parametrize(
    ("status", "verdict", "score", "text", "kind"),
    [
        ("queued", None, None, "Queued", "waiting"),
        ("running", None, None, "Running", "waiting"),
        ("graded", "passed", 10, "10/10 Passed", "scored"),
        ("graded", "failed", 5, "5/10", "scored"),
        ("graded", "failed", 0, "0/10", "scored"),  # ran to the end, every check wrong: still a score
        # A rank raised or ran out of time part-way, after some checks were judged: the score they earned.
        ("failed", "runtime_error", 6, "6/10", "scored"),
        ("failed", "time_limit", 3, "3/10", "scored"),
        ("failed", "crashed", 10, "10/10 Passed", "scored"),
        # Nothing could be judged.
        ("failed", "compile_error", 0, "Could not run: the code does not parse", "not_run"),
        ("failed", "not_allowed", 0, "Could not run: the code reaches into the grader, so it was not run", "not_run"),
        ("failed", "crashed", 0, "Could not run: a rank crashed before any check could be judged", "not_run"),
        (
            "failed",
            "runtime_error",
            0,
            "Could not run: your code raised an error before any check could be judged",
            "not_run",
        ),
        ("failed", "time_limit", 0, "Could not run: the time limit passed before any result came back", "not_run"),
        (
            "failed",
            "memory_limit",
            0,
            "Could not run: the memory limit was reached before any result came back",
            "not_run",
        ),
        ("failed", "deadlock", 0, "Could not run: the ranks deadlocked before any result came back", "not_run"),
        ("error", "internal_error", None, "Could not run: the grader failed (not your fault)", "not_run"),
        ("error", "refused", None, "Could not run: the grader failed (not your fault)", "not_run"),
    ],
)
def test_each_case_has_one_label(status: str, verdict: str | None, score: int | None, text: str, kind: str) -> None:
    got = outcome.of(status, verdict, score, None if score is None else 10)
    assert (got.text, got.kind) == (text, kind)
    assert got.passed == text.endswith("Passed")
    assert got.reason == (text.removeprefix("Could not run: ") if kind == "not_run" else "")


def test_every_verdict_status_that_stops_a_run_has_a_reason() -> None:
    import typing

    from labs.verdict import Status

    assert set(typing.get_args(Status)) - {"passed", "failed"} == set(outcome.REASONS)
    assert set(outcome.STATUS_NAMES) == {s.value for s in SubmissionStatus}


CASES = [
    # (status, verdict status, score, label)
    (SubmissionStatus.graded, "passed", 10, "10/10 Passed"),
    (SubmissionStatus.graded, "failed", 5, "5/10"),
    (SubmissionStatus.failed, "runtime_error", 6, "6/10"),
    (SubmissionStatus.failed, "compile_error", 0, "Could not run: the code does not parse"),
    (SubmissionStatus.error, "internal_error", None, "Could not run: the grader failed (not your fault)"),
]


def _submissions(session: Session, user_id: int) -> list[int]:
    ids = []
    for status, verdict, score, _ in CASES:
        now = utcnow()
        row = Submission(
            user_id=user_id, lab_id="ring-allreduce", code="x = 1\n", status=status, submitted_at=now, queued_at=now,
            started_at=now, finished_at=now, score=score, max_score=None if score is None else 10,
            verdict={"lab": "ring-allreduce", "status": verdict, "score": score or 0, "max_score": 10,
                     "message": f"the {verdict} message", "checks": []},
        )  # fmt: skip
        session.add(row)
        session.flush()
        ids.append(row.id)
    session.commit()
    return ids


def test_the_pages_and_the_api_say_the_same_labels(client: TestClient, session: Session) -> None:
    student = make_user(session, "outcome-student")
    ids = _submissions(session, student.id)
    sign_in(client, "outcome-student")

    page = client.get("/labs/ring-allreduce").text
    history = page[page.index('id="lab-history"') :]
    assert '<th scope="col">Result</th>' in history
    shown = dict(re.findall(r'<a href="/labs/submissions/(\d+)">\d+</a>.*?<td data-outcome="\w+">([^<]+)</td>', history,
                            re.S))  # fmt: skip
    assert {int(k): v for k, v in shown.items()} == {sid: case[3] for sid, case in zip(ids, CASES, strict=True)}
    assert ">Failed<" not in page and ">Graded<" not in page

    for sid, (_, verdict, _, label) in zip(ids, CASES, strict=True):
        result = client.get(f"/labs/submissions/{sid}", headers=HX).text
        badge = re.search(r'<strong class="badge ([^"]+)" data-testid="outcome">([^<]+)</strong>', result)
        assert badge is not None and badge.group(2) == label
        # Colour is never the only sign: the label itself says passed, partly, or could not run.
        colour = {"10/10 Passed": "badge-graded", "5/10": "badge-graded badge-partial",
                  "6/10": "badge-graded badge-partial"}.get(label, "badge-failed")  # fmt: skip
        assert badge.group(1) == (colour if verdict != "internal_error" else "badge-error")
        announced = re.search(r'data-announce="([^"]*)"', result)
        assert announced is not None and announced.group(1).startswith(label)
        if verdict in ("runtime_error", "compile_error"):
            assert f"the {verdict} message" in announced.group(1)  # why, read out with it

    body = client.get(f"/api/v1/submissions/{ids[2]}", headers=api_token(client, "outcome-student")).json()
    assert (body["status"], body["result"], body["result_kind"], body["score"]) == ("failed", "6/10", "scored", 6)


def test_instructors_see_the_labels_and_how_each_run_ended(client: TestClient, session: Session) -> None:
    student = make_user(session, "outcome-other")
    ids = _submissions(session, student.id)
    make_user(session, "outcome-prof", role=Role.admin)
    sign_in(client, "outcome-prof")
    listing = client.get("/labs/ring-allreduce/all").text
    for sid, (_, verdict, _, label) in zip(ids, CASES, strict=True):
        row = listing[listing.index(f'<a href="/labs/submissions/{sid}">') :]
        row = row[: row.index("</tr>")]
        assert f">{label}</td>" in row and f"({verdict})" in row
    assert '<option value="failed" >stopped early (the code)</option>' in listing
    assert "2 ran to the end · 2 stopped early (the code) · 1 grader error" in listing
    student_page = client.get(f"/instructor/students/{student.id}").text
    assert '<td data-outcome="scored">6/10</td>' in student_page
    assert '<td data-outcome="not_run">Could not run: the code does not parse</td>' in student_page


def test_help_explains_the_labels(client: TestClient) -> None:
    text = client.get("/help").text
    section = text[text.index('id="lab-results"') :]
    section = section[: section.index("</p>")]
    assert "<strong>6/10</strong>" in section and "<strong>10/10 Passed</strong>" in section
    assert "Could not run:" in section and "only" in section
