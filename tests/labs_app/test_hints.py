"""Progressive hints per lab check: the pure rule, and the pages with real graded submissions."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.accounts.models import Role
from app.labs import hints
from app.labs.models import HintView, Submission, SubmissionStatus
from app.labs.settings import LabSettings
from labs.spec import load_labs
from tests.conftest import CONTENT_DIR
from tests.factories import api_token, csrf_token
from tests.labs_app.conftest import Clock, signed_in, submit_graded

HX = {"HX-Request": "true"}
LAB = load_labs(CONTENT_DIR / "labs")["ring-allreduce"].spec
NEIGHBOURS = LAB.check("ring-neighbours")
FIRST_HINT, SECOND_HINT = NEIGHBOURS.hints[0], NEIGHBOURS.hints[1]


def verdict(*, neighbours: int, status: str = "failed") -> dict[str, Any]:
    """A ring verdict whose sums are right and whose ring-neighbours check scores ``neighbours`` of 3."""
    checks = [
        {"id": "ring-all-reduce", "title": "t", "points": 4, "passed": True, "score": 4, "message": "ok"},
        {"id": "ring-neighbours", "title": "t", "points": 3, "passed": neighbours == 3, "score": neighbours,
         "message": "world size 3: rank 0 sent 4,096 bytes to rank 2"},
        {"id": "communication-volume", "title": "t", "points": 3, "passed": True, "score": 3, "message": "ok"},
        {"id": "no-builtin-collectives", "title": "t", "points": 0, "passed": True, "score": 0, "message": "ok"},
    ]  # fmt: skip
    score = sum(c["score"] for c in checks)
    return {"lab": "ring-allreduce", "status": status, "score": score, "max_score": 10, "message": "m",
            "checks": checks, "output": {}, "data": {}}  # fmt: skip


def reveal(client: TestClient, index: int) -> Any:
    return client.post(
        "/labs/ring-allreduce/hints/ring-neighbours",
        data={"index": str(index)},
        headers={**HX, "X-CSRF-Token": csrf_token(client)},
    )


# The rule -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("failures", "hint_after", "total", "earned"),
    [
        (0, 2, 3, 0),
        (1, 2, 3, 0),
        (2, 2, 3, 1),
        (3, 2, 3, 2),
        (4, 2, 3, 3),
        (9, 2, 3, 3),
        (1, 1, 2, 1),
        (2, 1, 2, 2),
        (5, 2, 0, 0),
        (4, 5, 3, 0),
        (5, 5, 3, 1),
    ],
)
def test_hints_are_earned_one_per_failed_submission_after_hint_after(
    failures: int, hint_after: int, total: int, earned: int
) -> None:
    assert hints.available(failures, hint_after, total) == earned


@pytest.mark.parametrize(
    ("failures", "hint_after", "total", "needed"),
    [(0, 2, 3, 2), (1, 2, 3, 1), (2, 2, 3, 1), (3, 2, 3, 1), (4, 2, 3, 0), (0, 1, 1, 1), (1, 1, 1, 0)],
)
def test_how_many_more_failures_the_next_hint_needs(failures: int, hint_after: int, total: int, needed: int) -> None:
    assert hints.still_needed(failures, hint_after, total) == needed


def test_only_checks_that_lost_points_count() -> None:
    assert hints.lost_points({"id": "a", "points": 3, "score": 0}) is True
    assert hints.lost_points({"id": "a", "points": 3, "score": 2}) is True  # partly right still lost points
    assert hints.lost_points({"id": "a", "points": 3, "score": 3}) is False
    assert hints.lost_points({"id": "a", "points": 0, "score": 0, "passed": False}) is False  # feedback only
    counted = hints.failures([verdict(neighbours=0), verdict(neighbours=2), verdict(neighbours=3), None, {}])
    assert dict(counted) == {"ring-neighbours": 2}


# The pages --------------------------------------------------------------------------------------------


def test_a_hint_is_earned_by_failing_twice_then_revealed_and_recorded(
    client: TestClient, session: Session, clock: Clock, roomy: LabSettings
) -> None:
    name = signed_in(client, session)
    auth = api_token(client, name)
    first = submit_graded(client, session, clock, verdict(neighbours=0))
    fragment = client.get(f"/labs/submissions/{first}", headers=HX).text
    # Under the failed check: how far the first hint is, and no hint text at all.
    assert 'data-hints-for="ring-neighbours"' in fragment
    assert "Hint 1 of 2 becomes available after 1 more graded submission that loses points here." in fragment
    assert FIRST_HINT not in fragment and "Show hint" not in fragment
    # Checks that passed, and checks without hints, get no hint box.
    assert 'data-hints-for="ring-all-reduce"' not in fragment and 'data-hints-for="no-builtin' not in fragment
    refused = reveal(client, 0)
    assert refused.status_code == 403
    assert "Hint 1 of 2 for &#39;Each rank sends only to rank + 1&#39; is not available yet" in refused.text
    assert "<html" not in refused.text and 'role="alert"' in refused.text  # the box again, saying why
    assert "after 1 more graded submission that loses points on this check" in refused.text
    assert FIRST_HINT not in refused.text

    # A crash the student's code caused has no check results, and our own errors never count.
    crash = {"lab": "ring-allreduce", "status": "runtime_error", "message": "boom", "checks": [], "output": {}}
    submit_graded(client, session, clock, crash)
    ours = {**verdict(neighbours=0), "status": "internal_error", "final": True}
    error_id = submit_graded(client, session, clock, ours)
    assert session.scalar(select(HintView.id)) is None  # nothing recorded yet
    assert session.get(Submission, error_id).status == SubmissionStatus.error  # type: ignore[union-attr]
    assert reveal(client, 0).status_code == 403

    second = submit_graded(client, session, clock, verdict(neighbours=1))  # partly right: still lost points
    fragment = client.get(f"/labs/submissions/{second}", headers=HX).text
    assert "Hint 1 of 2</span>" in fragment and ">Show hint 1</button>" in fragment
    assert FIRST_HINT not in fragment  # earned, but not shown until asked for
    assert "Hint 2 of 2 becomes" not in fragment
    api = client.get(f"/api/v1/submissions/{second}", headers=auth).text
    assert FIRST_HINT not in api and SECOND_HINT not in api

    clock.advance(5)
    shown = reveal(client, 0)
    assert shown.status_code == 200 and "<html" not in shown.text
    assert FIRST_HINT.split("$")[0].strip() in shown.text  # its Markdown, rendered
    assert 'id="hint-ring-neighbours-0"' in shown.text and "data-autofocus" in shown.text
    assert SECOND_HINT not in shown.text
    assert "Hint 2 of 2 becomes available after 1 more graded submission" in shown.text
    rows = list(session.scalars(select(HintView).where(HintView.check_id == "ring-neighbours")))
    assert [(r.lab_id, r.hint_index) for r in rows] == [("ring-allreduce", 0)]
    assert reveal(client, 0).status_code == 200  # asking again records nothing new
    assert session.scalar(select(HintView.id).where(HintView.id != rows[0].id)) is None
    assert reveal(client, 1).status_code == 403
    assert reveal(client, 5).status_code == 404
    plain = client.post(  # without JavaScript: the error page, with the reason
        "/labs/ring-allreduce/hints/ring-neighbours", data={"index": "1", "csrf_token": csrf_token(client)}
    )
    assert plain.status_code == 403 and "<html" in plain.text and "is not available yet" in plain.text
    # The whole page shows the revealed hint under the check, with no button for it.
    page = client.get("/labs/ring-allreduce").text
    assert FIRST_HINT.split("$")[0].strip() in page and ">Show hint 1</button>" not in page

    submit_graded(client, session, clock, verdict(neighbours=0))
    assert reveal(client, 1).status_code == 200

    # Another student has earned nothing, and sees nothing.
    client.cookies.clear()
    signed_in(client, session)
    assert reveal(client, 0).status_code == 403
    # The instructor sees who revealed which hint, and when.
    client.cookies.clear()
    signed_in(client, session, Role.admin)
    student_id = rows[0].user_id
    hinted = client.get(f"/instructor/students/{student_id}").text
    assert 'data-testid="hints"' in hinted
    assert hinted.count("<td>Each rank sends only to rank + 1</td>") == 2
    assert "<td>1 of 2</td>" in hinted and "<td>2 of 2</td>" in hinted
    # Reviewing that student's submission shows the verdict, not the student's hint buttons.
    review = client.get(f"/labs/submissions/{second}").text
    assert "Show hint" not in review and FIRST_HINT.split("$")[0].strip() not in review


def test_revealing_needs_a_sign_in_and_a_real_check(client: TestClient, session: Session) -> None:
    anonymous = client.post(
        "/labs/ring-allreduce/hints/ring-neighbours",
        data={"index": "0"},
        headers={"X-CSRF-Token": csrf_token(client)},
        follow_redirects=False,
    )
    assert anonymous.status_code == 303 and "/signin" in anonymous.headers["location"]
    signed_in(client, session)
    missing = client.post(
        "/labs/ring-allreduce/hints/no-such-check", data={"index": "0"}, headers={"X-CSRF-Token": csrf_token(client)}
    )
    assert missing.status_code == 404 and "has no hints for a check &#39;no-such-check&#39;" in missing.text
    nohints = client.post(
        "/labs/ring-allreduce/hints/no-builtin-collectives",
        data={"index": "0"},
        headers={"X-CSRF-Token": csrf_token(client)},
    )
    assert nohints.status_code == 404


def test_hints_never_reach_a_page_or_the_api_before_they_are_earned(client: TestClient, session: Session) -> None:
    name = signed_in(client, session)
    auth = api_token(client, name)
    every_hint = [h for lab in load_labs(CONTENT_DIR / "labs").values() for c in lab.spec.checks for h in c.hints]
    assert len(every_hint) >= 30
    responses = [client.get("/labs"), client.get("/api/v1/labs"), client.get("/openapi.json")]
    for lab in ("ring-allreduce", "collectives-p2p", "ddp-from-scratch", "zero-1"):
        responses += [client.get(f"/labs/{lab}"), client.get(f"/api/v1/labs/{lab}", headers=auth)]
    text = "\n".join(r.text for r in responses)
    assert all(r.status_code == 200 for r in responses)
    leaked = [h for h in every_hint if h[:40] in text]
    assert not leaked, leaked[:3]
