"""Lab pages in-process: list, statement, editor, live result fragment, history, instructor re-grade."""

from __future__ import annotations

import re

from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from app.accounts.models import Role
from app.labs import queue
from app.labs.models import Submission, SubmissionStatus
from app.labs.settings import LabSettings
from tests.factories import csrf_token
from tests.labs_app.conftest import Clock, capacity, signed_in

HX = {"HX-Request": "true"}
VERDICT = {
    "lab": "ring-allreduce",
    "status": "failed",
    "score": 6,
    "max_score": 10,
    "elapsed_s": 0.61,
    "message": "Each rank sends only to rank + 1: world size 2: rank 0 sent 9 bytes to rank 0",
    "checks": [
        {
            "id": "ring-all-reduce",
            "title": "t",
            "points": 4,
            "passed": True,
            "score": 4,
            "message": "all right",
            "data": {"chart": {"title": "Loss curves", "series": [{"name": "mine", "points": [[0, 1.0], [1, 0.5]]}]}},
        },
        {
            "id": "ring-neighbours",
            "title": "t",
            "points": 2,
            "passed": False,
            "score": 0,
            "message": "world size 3, rank 2, first mismatch at element 7: expected 3.0, got 2.0",
        },
        {
            "id": "communication-volume",
            "title": "t",
            "points": 3,
            "passed": True,
            "score": 3,
            "message": "ok",
            "data": {
                "world_size_4": {
                    "tensor_bytes": 1048576,
                    "theoretical_bytes_per_rank": 1572864,
                    "measured_bytes_per_rank": [1573000, 1573001, 1573002, 1573003],
                    "ratio_to_theory": [1.0001, 1.0001, 1.0001, 1.0001],
                    "loopback_bytes": 1,
                }
            },
        },
        {"id": "no-builtin-collectives", "title": "t", "points": 1, "passed": False, "score": 0, "message": "no"},
    ],
    "output": {"ws2/rank1": "hello from rank one"},
    "data": {
        "wire": {"world size 2": [[0, 4242], [17, 0]]},
        "reference_wire": {"world size 2": [[0, 3000], [3000, 0]]},
    },
}


def submit(client: TestClient, code: str = "x = 1\n") -> tuple[int, str]:
    r = client.post(
        "/labs/ring-allreduce/submissions", data={"code": code}, headers={**HX, "X-CSRF-Token": csrf_token(client)}
    )
    assert r.status_code == 202, r.text
    sid = int(re.search(r"Submission #(\d+)", r.text).group(1))  # type: ignore[union-attr]
    return sid, r.text


def grade(session: Session, clock: Clock, verdict: dict[str, object]) -> None:
    job = queue.claim(capacity("w"), session=session, now=clock(), lease_s=30, max_attempts=3)
    assert job is not None
    queue.finish(job, "w", verdict, session=session, now=clock(), max_attempts=3)
    session.commit()


def test_list_and_exercise_pages_link_to_the_labs(client: TestClient) -> None:
    assert 'href="/labs/ring-allreduce"' in client.get("/labs").text
    assert 'href="/labs/collectives-p2p"' in client.get("/exercises").text
    ch35 = client.get("/exercises/ch35-exercises").text
    assert 'href="/labs/ring-allreduce"' in ch35 and 'href="/labs/collectives-p2p"' in ch35


def test_lab_page_shows_statement_math_starter_and_editor(client: TestClient, session: Session) -> None:
    assert "Sign in to submit" in client.get("/labs/ring-allreduce").text
    signed_in(client, session)
    page = client.get("/labs/ring-allreduce").text
    assert "<math" in page and "Ring all-reduce" in page
    assert 'name="code"' in page and "def ring_all_reduce" in page and 'name="csrf_token"' in page
    assert "/static/js/labs.js" in page and "<script>" not in page
    starter = client.get("/labs/ring-allreduce/starter.py")
    assert starter.headers["content-disposition"].startswith("attachment") and "def ring_all_reduce" in starter.text
    # Editing elsewhere and uploading is offered as an equal way, and the plain editor is one button away
    # (shown by labs.js next to the code editor; without JavaScript the textarea is already plain).
    assert "both ways are submitted and graded the same" in page
    assert 'href="/labs/ring-allreduce/starter.py" download>download the starter code</a>' in page
    assert "data-lab-plain-toggle" in page and 'aria-pressed="false"' in page
    assert 'aria-describedby="lab-code-plain-hint"' in page and "indent with spaces, 4 per level" in page
    assert client.get("/labs/nope").status_code == 404


def test_submit_polls_until_graded_then_shows_checks_and_bytes(
    client: TestClient, session: Session, clock: Clock, lab_settings: LabSettings
) -> None:
    signed_in(client, session)
    sid, fragment = submit(client)
    # A job that waits with no estimate (no worker runs here) is asked about again at once, and the
    # server holds the request until its status changes, 10 s at most.
    assert 'hx-trigger="load delay:250ms"' in fragment and "?wait=10.0&seen=queued&said=" in fragment
    assert "position" in fragment
    assert "<html" not in fragment
    # Polled fragments replace the result: it is no live region. A job that waits (no worker runs here)
    # has its queue line said once, by the page's #announcer; a poll that shows the same line says nothing.
    line = "Queued: position 1 in the queue; no grading worker that can take it is running now."
    assert "aria-live" not in fragment and f'data-announce="{line}"' in fragment
    poll = re.search(r'hx-get="[^"]+wait=10.0&([^"]+)"', fragment).group(1)  # type: ignore[union-attr]
    assert "data-announce" not in client.get(f"/labs/submissions/{sid}?{poll}", headers=HX).text
    grade(session, clock, VERDICT)
    done = client.get(f"/labs/submissions/{sid}", headers=HX)
    assert done.headers["HX-Trigger"] == "labs-submission-changed"
    assert "hx-trigger" not in done.text  # polling stops
    assert 'data-announce="6/10"' in done.text  # said once, by the page's #announcer
    assert '<strong class="badge badge-graded badge-partial" data-testid="outcome">6/10</strong>' in done.text
    assert "first mismatch at element 7" in done.text
    assert "1,573,000" in done.text and "1,572,864" in done.text and "2(N-1)/N" in done.text
    assert "hello from rank one" in done.text
    # A graded submission below full marks is not shown as a success.
    assert "badge-graded badge-partial" in done.text
    # The communication picture: the student's byte matrix beside the reference's, exact numbers on hover.
    assert done.text.count('class="chart wire-map"') == 2
    # One hint for a pointer that hovers, one for touch; static/css/labs.css shows one of them.
    assert '<span class="pointer-hover">hover a cell for its exact count' in done.text
    assert '<span class="pointer-touch">"The numbers" under each picture' in done.text
    assert "rank 0 → rank 1: 4,242 bytes" in done.text and "rank 1 → rank 0: 3,000 bytes" in done.text
    # A check that asks for a chart gets it, drawn on the server.
    assert 'class="chart line-chart"' in done.text and 'aria-label="Loss curves"' in done.text
    history = client.get("/labs/ring-allreduce/history", headers=HX).text
    assert f"/labs/submissions/{sid}" in history and "6/10" in history
    full = client.get(f"/labs/submissions/{sid}")
    assert "<html" in full.text and 'data-testid="outcome">6/10<' in full.text
    assert "data-announce=" not in full.text  # a verdict already there when the page opens is not news


def test_upload_without_javascript_redirects_to_the_result(
    client: TestClient, session: Session, lab_settings: LabSettings
) -> None:
    signed_in(client, session)
    r = client.post(
        "/labs/ring-allreduce/submissions",
        data={"code": "ignored", "csrf_token": csrf_token(client)},
        files={"upload": ("mine.py", b"def ring_all_reduce(t):\n    pass\n", "text/x-python")},
        follow_redirects=False,
    )
    assert r.status_code == 303
    sid = int(r.headers["location"].rsplit("/", 1)[1])
    assert session.get(Submission, sid).code.startswith("def ring_all_reduce")  # type: ignore[union-attr]


def test_submitting_needs_csrf_and_a_sign_in(client: TestClient, session: Session) -> None:
    r = client.post("/labs/ring-allreduce/submissions", data={"code": "x"}, follow_redirects=False)
    assert r.status_code == 403
    r = client.post(
        "/labs/ring-allreduce/submissions", data={"code": "x", "csrf_token": csrf_token(client)}, follow_redirects=False
    )
    assert r.status_code == 303 and r.headers["location"].startswith("/signin")


def test_students_see_only_their_own_submissions(client: TestClient, session: Session, clock: Clock) -> None:
    signed_in(client, session)
    sid, _ = submit(client)
    client.cookies.clear()
    signed_in(client, session)
    assert client.get(f"/labs/submissions/{sid}").status_code == 404
    assert client.get("/labs/ring-allreduce/all").status_code == 403


def test_instructors_see_every_submission_and_regrade(client: TestClient, session: Session, clock: Clock) -> None:
    author = signed_in(client, session)
    sid, _ = submit(client)
    grade(session, clock, VERDICT)
    client.cookies.clear()
    signed_in(client, session, Role.admin)
    page = client.get("/labs/ring-allreduce/all").text
    assert author in page and f"/labs/submissions/{sid}/regrade" in page
    assert client.get(f"/labs/submissions/{sid}").status_code == 200
    r = client.post(f"/labs/submissions/{sid}/regrade", data={"csrf_token": csrf_token(client)}, follow_redirects=False)
    assert r.status_code == 303
    row = session.get(Submission, sid)
    assert row is not None
    session.refresh(row)
    assert (row.status, row.attempts, row.regrades) == (SubmissionStatus.queued, 0, 1)
    grade(session, clock, VERDICT)
    # "Re-grade all" asks first, saying how many jobs it would queue, and queues nothing yet.
    r = client.post("/labs/ring-allreduce/regrade", data={"csrf_token": csrf_token(client)}, follow_redirects=False)
    assert r.status_code == 200 and "This queues <strong>1</strong> job:" in r.text
    session.refresh(row)
    assert row.status == SubmissionStatus.graded and row.regrades == 1
    r = client.post(
        "/labs/ring-allreduce/regrade",
        data={"csrf_token": csrf_token(client), "confirm": "yes"},
        follow_redirects=False,
    )
    assert r.status_code == 303 and r.headers["location"] == "/labs/ring-allreduce/all?queued=1"
    session.refresh(row)
    assert row.status == SubmissionStatus.queued and row.regrades == 2
    assert "Queued 1 job for re-grading" in client.get(r.headers["location"]).text


def test_a_labs_public_driver_is_readable_from_its_page(client: TestClient) -> None:
    page = client.get("/labs/ddp-from-scratch").text
    assert 'href="/labs/ddp-from-scratch/public/driver.py"' in page
    driver = client.get("/labs/ddp-from-scratch/public/driver.py")
    assert driver.status_code == 200 and "def " in driver.text and "sync_gradients" in driver.text
    assert client.get("/labs/ring-allreduce/public/driver.py").status_code == 404
