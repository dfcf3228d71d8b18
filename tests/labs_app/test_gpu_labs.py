"""GPU-only labs in the app: their pages say they need a GPU worker, and whether one is connected now.

Workers are registered with the queue's own ``register`` (what ``ringlab worker`` does at start) and
judged alive by the same heartbeat rule as /healthz (``service.workers``).
"""

from __future__ import annotations

from datetime import timedelta

from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from app.db import utcnow
from app.labs import queue, service
from app.labs.catalog import get_lab
from app.labs.queue import ALIVE_S
from app.labs.settings import LabSettings
from tests.factories import csrf_token
from tests.labs_app.conftest import Clock, capacity, unique
from tests.labs_app.test_pages import HX, grade, signed_in

GPU_LAB = "gpu-memory-profile"
NONE = "needs a GPU worker; none is connected"


def register(session: Session, gpus: int, *, age_s: float = 0.0) -> str:
    name = unique("gpu-worker")
    queue.register(capacity(name, gpus=gpus), session=session, now=utcnow() - timedelta(seconds=age_s))
    session.flush()
    return name


def card(page: str, lab_id: str) -> str:
    start = page.index(f'data-lab="{lab_id}"')
    return page[start : page.index("</article>", start)]


def test_without_a_gpu_worker_the_lab_page_and_the_list_say_none_is_connected(
    client: TestClient, session: Session
) -> None:
    register(session, gpus=0)  # a CPU worker is alive: it cannot take a GPU lab's jobs
    page = client.get(f"/labs/{GPU_LAB}").text
    assert NONE in page and "a submission waits in the queue until one is" in page
    listing = client.get("/labs").text
    assert NONE in card(listing, GPU_LAB) and NONE in card(listing, "gpu-mixed-precision")
    assert "GPU" not in card(listing, "ring-allreduce")  # a CPU lab says nothing of GPUs
    assert "GPU" not in client.get("/labs/ring-allreduce").text.split("<dl", 1)[1].split("</dl>", 1)[0]


def test_a_live_gpu_worker_is_connected_a_stale_or_stopped_one_is_not(client: TestClient, session: Session) -> None:
    stale = register(session, gpus=1, age_s=ALIVE_S + 5)  # last heartbeat too old: /healthz counts it dead
    assert NONE in client.get(f"/labs/{GPU_LAB}").text
    live = register(session, gpus=1)
    page = client.get(f"/labs/{GPU_LAB}").text
    assert "needs a GPU worker" in page and NONE not in page
    assert NONE not in card(client.get("/labs").text, GPU_LAB)
    queue.stopped(live, session=session, now=utcnow())
    session.flush()
    assert NONE in client.get(f"/labs/{GPU_LAB}").text
    assert stale != live


def test_gpu_waiting_follows_the_heartbeat_rule(session: Session) -> None:
    lab = get_lab(session, GPU_LAB)
    now = utcnow()
    assert service.gpu_waiting(lab, session=session, now=now)
    register(session, gpus=2)
    assert not service.gpu_waiting(lab, session=session, now=now)
    assert service.gpu_waiting(lab, session=session, now=now + timedelta(seconds=ALIVE_S + 1))
    assert not service.gpu_waiting(get_lab(session, "ring-allreduce"), session=session, now=now)
    assert service.gpus_connected(session=session, now=now) == 2


def test_a_queued_gpu_submission_says_it_waits_for_a_gpu_worker(
    client: TestClient, session: Session, clock: Clock, lab_settings: LabSettings
) -> None:
    signed_in(client, session)
    r = client.post(
        f"/labs/{GPU_LAB}/submissions", data={"code": "x = 1\n"}, headers={**HX, "X-CSRF-Token": csrf_token(client)}
    )
    assert r.status_code == 202, r.text
    assert "it waits for a GPU worker, and none is connected now" in r.text
    sid = int(r.text.split("Submission #", 1)[1].split("<", 1)[0])
    # A CPU worker does not take it: still queued, still waiting.
    assert queue.claim(capacity(unique("cpu")), session=session, now=clock(), lease_s=30, max_attempts=3) is None
    register(session, gpus=1)
    polled = client.get(f"/labs/submissions/{sid}", headers=HX).text
    assert "it waits for a GPU worker." in polled and "none is connected" not in polled


def test_a_checks_table_is_drawn_under_the_checks(
    client: TestClient, session: Session, clock: Clock, lab_settings: LabSettings
) -> None:
    """A check's ``data.table`` (the mixed-precision lab's speed and memory against float32) is shown as a table."""
    signed_in(client, session)
    r = client.post(
        "/labs/ring-allreduce/submissions", data={"code": "x = 1\n"}, headers={**HX, "X-CSRF-Token": csrf_token(client)}
    )
    sid = int(r.text.split("Submission #", 1)[1].split("<", 1)[0])
    table = {
        "caption": "One training step, measured in your run",
        "columns": ["", "time per step", "peak memory"],
        "rows": [["float32", "21.00 ms", "900.0 MiB"], ["your AMP step", "4.20 ms", "<520.0 MiB>"]],
    }
    check = {"id": "ring-all-reduce", "title": "t", "points": 4, "passed": True, "score": 4, "message": "ok"}
    verdict = {"lab": "ring-allreduce", "status": "passed", "score": 4, "max_score": 10, "message": "m",
               "checks": [{**check, "data": {"table": table}}]}  # fmt: skip
    grade(session, clock, verdict)
    done = client.get(f"/labs/submissions/{sid}", headers=HX).text
    assert 'data-check-table="ring-all-reduce"' in done and "One training step, measured in your run" in done
    assert '<th scope="row">your AMP step</th><td class="num">4.20 ms</td>' in done
    assert "&lt;520.0 MiB&gt;" in done  # escaped like any text
