"""The grading queue on the instructor home: depth, the oldest job's wait, each alive worker's job and rate."""

from __future__ import annotations

import re

from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from app.accounts.models import Role
from app.db import utcnow
from app.labs import queue
from tests.factories import make_user, sign_in
from tests.labs_app import waiting


def _section(page: str) -> str:
    start = page.index('data-testid="grading-queue"')
    return " ".join(page[start : page.index("</section>", start)].split())


def test_staff_see_the_queue_its_oldest_job_and_each_workers_rate(client: TestClient, session: Session) -> None:
    make_user(session, "queue-prof", role=Role.admin)
    sign_in(client, "queue-prof")
    empty = _section(client.get("/instructor").text)
    assert '<span data-figure="queue-depth">0</span> jobs queued;' in empty
    assert "No job was graded in the last 10 minutes." in empty and "No grading worker is running" in empty

    a, b = (make_user(session, name).id for name in ("queue-ada", "queue-bob"))
    cap = waiting.busy(session, a, b, "worker-busy-1", utcnow()).worker
    idle = waiting.worker(session, "worker-idle-2", utcnow())
    queue.stopped(waiting.worker(session, "worker-gone-3", utcnow()).worker_id, session=session, now=utcnow())
    session.commit()
    text = _section(client.get("/instructor").text)
    # The queued job was queued 175 s before busy() returned: its age, rounded down, and what runs.
    oldest = r'<span data-figure="queue-oldest">(2 min 5|3 min )\d s</span>'
    running = r'<span data-figure="queue-running">1</span> being graded\.'
    depth = r'<span data-figure="queue-depth">1</span> job queued'
    assert re.search(rf"{depth}, the oldest waiting for {oldest}; {running}", text)
    # Two workers share the queued job and half the running one, then 40 s: 70 s, said as about 2 min.
    assert "a job took 40.0 s to grade (the median): a submission made now would wait about 2 min" in text
    busy = re.search(rf'<tr data-worker="{cap.worker_id}">(.*?)</tr>', text)
    assert busy is not None  # three grades in its five minutes alive: 0.6 a minute; grading the held job
    cells = re.findall(r"<td>(.*?)</td>", busy.group(1))
    assert cells[:2] == ["2", "0"] and cells[3:] == ["3", "0.6"]
    assert re.fullmatch(r'<a href="/labs/submissions/\d+">#\d+</a>', cells[2])
    quiet = re.search(rf'<tr data-worker="{idle.worker_id}">(.*?)</tr>', text)
    assert quiet is not None and re.findall(r"<td>(.*?)</td>", quiet.group(1))[2:] == ["idle", "0", "0.0"]
    assert "worker-gone-3" not in text  # stopped: not shown
