"""A queue people can see: a waiting submission's position and estimated wait, in the service, on its
page (said once, by the page's live region), in the API, and as a warning on the lab page."""

from __future__ import annotations

import re
import threading
import time
from datetime import timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from app.db import utcnow
from app.labs import queue, service
from app.labs.catalog import get_lab
from app.labs.models import Submission
from app.labs.queue_view import WINDOW_S
from app.labs.settings import LabSettings
from tests.factories import api_token, csrf_token, make_user
from tests.labs_app import waiting
from tests.labs_app.conftest import Clock, unique
from tests.labs_app.test_gpu_labs import GPU_LAB
from tests.labs_app.test_pages import HX, signed_in


def students(session: Session, n: int) -> list[int]:
    return [make_user(session, unique("wait")).id for _ in range(n)]


def test_the_estimate_follows_the_queue_the_workers_and_the_recent_grades(session: Session, clock: Clock) -> None:
    a, b, c = students(session, 3)
    w1 = waiting.worker(session, unique("w"), clock())
    for seconds in (30.0, 50.0, 40.0):  # median 40 s
        waiting.grade(session, w1, a, clock(), seconds)
        clock.advance(seconds + 1)
    queue.seen(w1.worker_id, session=session, now=clock())  # its heartbeat
    state = service.snapshot(session=session, now=clock())
    assert (state.depth, state.running, state.workers, state.grade_s, state.oldest_queued_at) == (0, 0, 1, 40.0, None)

    held = waiting.hold(session, w1, a, clock.advance(1))
    first = waiting.enqueue(session, b, clock.advance(1))
    second = waiting.enqueue(session, c, clock.advance(1))
    queue.seen(w1.worker_id, session=session, now=clock())
    state = service.snapshot(session=session, now=clock())
    assert (state.depth, state.running, state.workers, state.oldest_queued_at) == (2, 1, 1, first.queued_at)
    one, two = (service.estimate(s, session=session, now=clock()) for s in (first, second))
    assert one is not None and two is not None
    assert (one.position, one.wait_s, one.waits) == (1, 60.0, True)  # half the running job, then its own
    assert (two.position, two.wait_s) == (2, 100.0)
    assert two.text == "Queued: position 2 in the queue, about 2 min to your result."
    new = service.estimate_new(get_lab(session, "ring-allreduce"), session=session, now=clock())
    assert (new.position, new.wait_s) == (3, 140.0)
    assert service.estimate(session.get_one(Submission, held.id), session=session, now=clock()) is None

    # A second worker halves the work ahead; a GPU lab's job has no worker that can take it.
    w2 = waiting.worker(session, unique("w"), clock())
    two = service.estimate(second, session=session, now=clock())
    assert two is not None and (two.workers, two.wait_s) == (2, 70.0)
    gpu = service.estimate_new(get_lab(session, GPU_LAB), session=session, now=clock())
    assert gpu.workers == 0 and gpu.wait_s is None and gpu.position == 3
    assert "no grading worker that can take it" in gpu.text

    # Ten minutes after the last grade there is nothing recent to go by; the workers still beat.
    clock.advance(WINDOW_S + 1)
    for w in (w1, w2):
        queue.seen(w.worker_id, session=session, now=clock())
    later = service.estimate(second, session=session, now=clock())
    assert later is not None and later.grade_s is None and later.wait_s is None
    assert later.text == "Queued: position 2 in the queue."
    # Workers that stopped beating are not counted: the job waits for one.
    clock.advance(queue.ALIVE_S + 1)
    gone = service.estimate(second, session=session, now=clock())
    assert gone is not None and gone.workers == 0 and gone.waits
    assert service.snapshot(session=session, now=clock()).depth == 2


def test_recent_means_the_last_ten_minutes_by_the_verdicts_clock(session: Session, clock: Clock) -> None:
    (a,) = students(session, 1)
    w = waiting.worker(session, unique("w"), clock())
    waiting.grade(session, w, a, clock(), 12.0)
    done_at = clock() + timedelta(seconds=12)
    assert service.grade_times(session=session, now=done_at + timedelta(seconds=WINDOW_S)) == [12.0]
    assert service.grade_times(session=session, now=done_at + timedelta(seconds=WINDOW_S + 1)) == []
    # Failed code took grading time too; our own errors did not grade anything and are left out.
    failed = waiting.enqueue(session, a, clock.advance(100))
    job = waiting.claim(session, w, clock(), failed)
    crashed = {"status": "crashed", "score": 0, "max_score": 10, "message": "rank 1 crashed", "checks": []}
    queue.finish(job, w.worker_id, crashed, session=session, now=clock.advance(7), max_attempts=waiting.ATTEMPTS)
    ours = waiting.enqueue(session, a, clock.advance(1))
    job = waiting.claim(session, w, clock(), ours)
    final = {"status": "internal_error", "final": True, "message": "the lab cannot be loaded", "checks": []}
    queue.finish(job, w.worker_id, final, session=session, now=clock.advance(90), max_attempts=waiting.ATTEMPTS)
    session.commit()
    assert sorted(service.grade_times(session=session, now=clock())) == [7.0, 12.0]


def test_the_board_shows_each_workers_job_and_recent_rate(session: Session, clock: Clock) -> None:
    a, b = students(session, 2)
    start = clock()
    old = waiting.worker(session, unique("old"), start)
    waiting.grade(session, old, a, clock(), 5.0)  # finished more than ten minutes before the board: not counted
    clock.advance(WINDOW_S + 60)
    for _ in range(3):
        waiting.grade(session, old, a, clock.advance(10), 5.0)
    young = waiting.worker(session, unique("young"), clock.advance(10))
    waiting.grade(session, young, b, clock(), 5.0)
    held = waiting.hold(session, young, b, clock.advance(10))
    queued = waiting.enqueue(session, a, clock.advance(5))
    gone = waiting.worker(session, unique("gone"), clock())
    queue.stopped(gone.worker_id, session=session, now=clock())
    now = clock.advance(60)
    for w in (old, young):
        queue.seen(w.worker_id, session=session, now=now)
    board = service.board(session=session, now=now)
    rows = {r.worker_id: r for r in board.workers}
    assert set(rows) == {old.worker_id, young.worker_id}  # the stopped one is gone
    assert (rows[old.worker_id].recent, rows[old.worker_id].per_minute, rows[old.worker_id].job_id) == (3, 0.3, None)
    assert (rows[young.worker_id].recent, rows[young.worker_id].job_id) == (1, held.id)
    assert rows[young.worker_id].per_minute == 0.8  # one job in the 75 s since it started
    assert (board.snapshot.depth, board.snapshot.running, board.oldest_age_s) == (1, 1, 60.0)
    assert board.snapshot.oldest_queued_at == queued.queued_at and board.oldest_age == "1 min 0 s"
    # Behind the queued job: 1.5 jobs of 5 s over two workers, then its own 5 s.
    assert (board.new_job.position, board.new_job.wait_s) == (2, 8.75)


def _history(session: Session) -> tuple[queue.Capacity, int]:
    a, b = students(session, 2)
    state = waiting.busy(session, a, b, unique("w"), utcnow())
    return state.worker, state.queued


def _submit(client: TestClient) -> tuple[int, str]:
    r = client.post(
        "/labs/ring-allreduce/submissions", data={"code": "x = 2\n"}, headers={**HX, "X-CSRF-Token": csrf_token(client)}
    )
    assert r.status_code == 202, r.text
    return int(re.search(r"Submission #(\d+)", r.text).group(1)), r.text  # type: ignore[union-attr]


def _poll_url(fragment: str) -> str:
    """The URL the fragment asks again, without its hold (?wait=, seen=): these tests read it as a plain poll."""
    url = re.search(r'hx-get="([^"]+)"', fragment).group(1).replace("&amp;", "&")  # type: ignore[union-attr]
    assert re.search(r"[?&]seen=(queued|running)(&|$)", url), url  # held on the status it shows
    return re.sub(r"(wait=[\d.]+|seen=\w+)&?", "", url).rstrip("?")


@pytest.fixture
def turns(client: TestClient, monkeypatch: pytest.MonkeyPatch) -> threading.Lock:
    """The rolled-back tests share one connection: the watch's reads and a test's worker thread take turns."""
    lock = threading.Lock()
    watch = client.app.state.watch  # type: ignore[attr-defined]
    read = watch._statuses

    def in_turn(ids: list[int]) -> dict[int, str]:
        with lock:
            return read(ids)  # type: ignore[no-any-return]

    monkeypatch.setattr(watch, "_statuses", in_turn)
    return lock


def _later(lock: threading.Lock, seconds: float, work: Any, *args: Any) -> threading.Timer:
    """``work(*args)`` in a thread after ``seconds``, in its turn on the shared connection."""

    def run() -> None:
        with lock:
            work(*args)

    timer = threading.Timer(seconds, run)
    timer.start()
    return timer


def _submitted(client: TestClient, session: Session, who: str) -> tuple[dict[str, str], int]:
    """A new student's API token and the submission they just made (queued)."""
    name = unique(who)
    make_user(session, name)
    auth = api_token(client, name)
    created = client.post("/api/v1/labs/ring-allreduce/submissions", json={"code": "x = 3\n"}, headers=auth)
    return auth, int(created.json()["id"])


def _settled(client: TestClient) -> None:
    """Wait for the watch's last read to end: the rolled-back tests share one connection, which a read
    still running in its thread must not use beside the test's next request."""
    deadline = time.monotonic() + 5
    while client.app.state.watch.ticking:  # type: ignore[attr-defined]
        assert time.monotonic() < deadline, "the watch still reads with no request held"
        time.sleep(0.05)


def _hold(fragment: str) -> float:
    """How long the fragment's next request asks the server to hold it until the status changes."""
    return float(re.search(r'hx-get="[^"]*[?&]wait=([\d.]+)', fragment).group(1))  # type: ignore[union-attr]


def test_a_waiting_submission_shows_its_place_and_wait_and_says_it_once(
    client: TestClient, session: Session, lab_settings: LabSettings
) -> None:
    _, first = _history(session)
    signed_in(client, session)
    sid, fragment = _submit(client)
    line = "Queued: position 2 in the queue, about 2 min to your result."
    assert f'data-announce="{line}">{line}</p>' in fragment  # said by the page's #announcer, once
    assert "a job took 40.0 s to grade (the median), and 1 worker grades one job at a time" in fragment
    assert "aria-live" not in fragment  # the swapped section itself is no live region
    assert 'hx-trigger="load delay:250ms"' in fragment  # asked again at once, and held
    assert _hold(fragment) == 25.0  # 100 s from its result: its line refreshed after a quarter of that at most
    poll = _poll_url(fragment)
    said = "Queued%3A%20position%202%20in%20the%20queue%2C%20about%202%20min%20to%20your%20result."
    assert poll == f"/labs/submissions/{sid}?said={said}"
    same = client.get(poll, headers=HX).text
    assert line in same and "data-announce" not in same and _poll_url(same) == poll  # unchanged: silent

    # The job ahead is claimed by a second worker: the line changes, so the next poll says the new one.
    helper = waiting.worker(session, unique("w"), utcnow())
    waiting.claim(session, helper, utcnow(), session.get_one(Submission, first))
    moved = client.get(poll, headers=HX).text
    line = "Queued: position 1 in the queue, about 1 min to your result."
    assert f'data-announce="{line}"' in moved and _hold(moved) == 15.0  # 60 s from its result
    assert "data-announce" not in client.get(_poll_url(moved), headers=HX).text

    full = client.get(f"/labs/submissions/{sid}").text  # a full page: the line is there, and is not news
    assert line in full and "data-announce" not in full and _poll_url(full) == _poll_url(moved)


def test_the_api_gives_the_place_and_the_wait_while_queued(
    client: TestClient, session: Session, lab_settings: LabSettings
) -> None:
    _, first = _history(session)
    name = unique("api")
    make_user(session, name)
    auth = api_token(client, name)
    created = client.post("/api/v1/labs/ring-allreduce/submissions", json={"code": "x = 3\n"}, headers=auth).json()
    body = client.get(f"/api/v1/submissions/{created['id']}", headers=auth).json()
    assert (body["queue_position"], body["estimated_wait_s"], body["position"]) == (2, 100.0, 2)
    assert body["poll_after_s"] == 10.0  # a tenth of the wait: a rush's waiting clients are the web's load
    assert body["long_poll_s"] == 25.0  # or held (?wait=) until the status changes, a quarter of it at most
    helper = waiting.worker(session, unique("w"), utcnow())
    waiting.claim(session, helper, utcnow(), session.get_one(Submission, first))
    mine = waiting.claim(session, helper, utcnow(), session.get_one(Submission, created["id"]))
    body = client.get(f"/api/v1/submissions/{mine.id}", headers=auth).json()
    assert (body["status"], body["queue_position"], body["estimated_wait_s"]) == ("running", None, None)
    assert body["poll_after_s"] == 0.5  # its verdict is close
    assert body["long_poll_s"] == 25.0  # a held request ends with the verdict
    fields = client.app.openapi()["components"]["schemas"]["SubmissionOut"]["properties"]  # type: ignore[attr-defined]
    assert "null when not queued" in fields["estimated_wait_s"]["description"].lower()
    assert "1 for the next job" in fields["queue_position"]["description"]


def test_the_lab_page_says_the_queue_is_long_before_a_submission(
    client: TestClient, session: Session, lab_settings: LabSettings
) -> None:
    signed_in(client, session)
    assert 'data-testid="queue-long"' not in client.get("/labs/ring-allreduce").text  # an empty queue
    _history(session)
    page = client.get("/labs/ring-allreduce").text
    warning = re.search(r'<p class="notice" id="lab-queue-long"[^>]*>(.*?)</p>', page, re.S)
    assert warning is not None and " ".join(warning.group(1).split()) == (
        "The grading queue is long now: a submission made now would wait about 2 min for its result "
        "(1 job ahead of it, 1 worker grading)."
    )
    assert 'data-lab-submit aria-describedby="lab-queue-long"' in page  # read with the Submit button
    lab_settings.lab_queue_long_s = 100.0  # the wait (100 s) must pass the threshold, not meet it
    assert 'data-testid="queue-long"' not in client.get("/labs/ring-allreduce").text


def test_jobs_waiting_for_no_worker_are_a_long_queue(
    client: TestClient, session: Session, clock: Clock, lab_settings: LabSettings
) -> None:
    signed_in(client, session)
    (a,) = students(session, 1)
    waiting.enqueue(session, a, utcnow())
    page = client.get("/labs/ring-allreduce").text
    assert "1 job is waiting and no grading worker that can take this lab is running." in page


def test_a_job_an_idle_worker_is_about_to_take_polls_quickly(
    client: TestClient, session: Session, lab_settings: LabSettings
) -> None:
    waiting.worker(session, unique("w"), utcnow())  # alive and idle: the job is next
    signed_in(client, session)
    _, fragment = _submit(client)
    assert _hold(fragment) == 25.0, fragment  # held until a worker takes it, then until its verdict


def test_a_held_poll_is_answered_when_the_status_changes_and_else_after_its_hold(
    client: TestClient, session: Session, lab_settings: LabSettings, turns: threading.Lock
) -> None:
    helper = waiting.worker(session, unique("w"), utcnow())  # alive and idle: the job is next
    auth, sid = _submitted(client, session, "held")
    url = f"/api/v1/submissions/{sid}"

    began = time.monotonic()
    quiet = client.get(f"{url}?wait=0.6", headers=auth).json()  # nothing changes: answered after its hold
    _settled(client)
    assert quiet["status"] == "queued" and time.monotonic() - began >= 0.6
    assert quiet["long_poll_s"] == 25.0

    # A worker takes the job 0.3 s into a 20 s hold: the answer comes then, saying it runs.
    job = session.get_one(Submission, sid)
    began = time.monotonic()
    claim = _later(turns, 0.3, waiting.claim, session, helper, utcnow(), job)
    try:
        held = client.get(f"{url}?wait=20", headers=auth).json()
    finally:
        claim.join()
    _settled(client)
    assert held["status"] == "running" and time.monotonic() - began < 10

    assert client.get(f"{url}?wait=31", headers=auth).status_code == 422  # holds of 30 s at most
    other = make_user(session, unique("other"))
    assert client.get(f"{url}?wait=20", headers=api_token(client, other.username)).status_code == 404  # at once


def test_the_result_fragment_held_on_a_queued_job_comes_back_when_it_runs(
    client: TestClient, session: Session, lab_settings: LabSettings, turns: threading.Lock
) -> None:
    helper = waiting.worker(session, unique("w"), utcnow())
    signed_in(client, session)
    sid, fragment = _submit(client)
    job = session.get_one(Submission, sid)
    began = time.monotonic()
    claim = _later(turns, 0.3, waiting.claim, session, helper, utcnow(), job)
    try:
        running = client.get(f"/labs/submissions/{sid}?wait={_hold(fragment)}", headers=HX).text
    finally:
        claim.join()
    _settled(client)
    assert 'data-status="running"' in running and time.monotonic() - began < 10
    assert _hold(running) == 25.0  # and held again, until its verdict


def test_a_held_poll_that_sees_its_job_start_waits_a_moment_more_for_the_verdict(
    client: TestClient, session: Session, lab_settings: LabSettings, turns: threading.Lock
) -> None:
    helper = waiting.worker(session, unique("w"), utcnow())
    auth, sid = _submitted(client, session, "held")
    job = session.get_one(Submission, sid)

    def grade(claimed: list[queue.Job]) -> None:
        queue.finish(claimed[0], helper.worker_id, waiting.PASSED, session=session, now=utcnow(), max_attempts=3)
        session.commit()

    claimed: list[queue.Job] = []  # claimed 0.3 s into the hold, graded 0.4 s after that
    claim = _later(turns, 0.3, lambda: claimed.append(waiting.claim(session, helper, utcnow(), job)))
    worker = _later(turns, 0.7, grade, claimed)
    try:
        # Held on the status the client last saw (seen=): no first look at the submission.
        body = client.get(f"/api/v1/submissions/{sid}?wait=20&seen=queued", headers=auth).json()
    finally:
        claim.join()
        worker.join()
    _settled(client)
    assert body["status"] == "graded" and body["score"] == 10  # one answer, with the verdict


def test_a_poll_held_on_the_clients_word_does_not_tell_when_someone_elses_submission_changed(
    client: TestClient, session: Session, lab_settings: LabSettings, turns: threading.Lock
) -> None:
    helper = waiting.worker(session, unique("w"), utcnow())
    _, sid = _submitted(client, session, "owner")
    url = f"/api/v1/submissions/{sid}"
    snoop = api_token(client, make_user(session, unique("snoop")).username)
    job = session.get_one(Submission, sid)
    began = time.monotonic()
    claim = _later(turns, 0.3, waiting.claim, session, helper, utcnow(), job)
    try:
        refused = client.get(f"{url}?wait=2&seen=queued", headers=snoop)
    finally:
        claim.join()
    _settled(client)
    # Not theirs: refused as if absent, and only when the hold ends, not when the job started at 0.3 s.
    assert refused.status_code == 404 and time.monotonic() - began >= 2.0
    assert client.get(f"{url}?wait=2&seen=graded", headers=snoop).status_code == 422  # only queued or running
