"""/healthz reports each component and answers 503 when the site cannot do its job."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from app.db import utcnow
from app.labs import queue
from app.labs.models import Submission
from tests.conftest import REPO
from tests.factories import make_user
from tests.labs_app.conftest import capacity


def queued_since(session: Session, seconds: float) -> Submission:
    at = utcnow() - timedelta(seconds=seconds)
    user = make_user(session, f"health-{seconds:.0f}")
    row = Submission(user_id=user.id, lab_id="ring-allreduce", lab_version=1, code="x = 1\n", gpus_needed=0,
                     attempts=0, regrades=0, submitted_at=at, queued_at=at)  # fmt: skip
    session.add(row)
    session.commit()
    return row


def test_grading_is_unhealthy_when_jobs_wait_with_no_worker_alive(client: TestClient, session: Session) -> None:
    row = queued_since(session, 60)
    response = client.get("/healthz")
    assert response.status_code == 503
    workers = response.json()["workers"]
    assert workers["ok"] is False and workers["alive"] == 0 and workers["queued"] == 1
    assert workers["oldest_queued_s"] >= 60 and "no grading worker alive" in workers["problem"]

    queue.register(capacity("health-worker"), session=session, now=utcnow())  # a heartbeat now
    session.commit()
    body = client.get("/healthz").json()
    assert body["status"] == "ok" and body["workers"]["alive"] == 1

    row.queued_at = utcnow() - timedelta(seconds=400)  # past RINGLAB_HEALTH_MAX_QUEUE_AGE_S (300)
    session.commit()
    response = client.get("/healthz")
    assert response.status_code == 503 and "oldest queued job has waited" in response.json()["workers"]["problem"]


FULL = """
import json, sys
from fastapi.testclient import TestClient
import app.web.health as health
from app.config import Settings
from app.main import create_app
from app.migrate import upgrade

data = sys.argv[1]
settings = Settings(data_dir=data)
upgrade(settings.sqlalchemy_url)
with TestClient(create_app(settings), raise_server_exceptions=False) as client:
    answers = [client.get("/healthz")]
    with open(f"{data}/filler", "wb") as f:  # fill the data directory to the last byte
        try:
            while True:
                f.write(b"x" * (1 << 20))
                f.flush()
        except OSError:
            pass
    answers.append(client.get("/healthz"))
    health.MIN_FREE_BYTES = 0  # without the free-space check, the write itself must fail
    client.app.state.health_probe = health.WriteProbe()
    answers.append(client.get("/healthz"))
    print(json.dumps([[a.status_code, a.json()["database"]] for a in answers]))
"""


def test_healthz_is_503_when_the_data_directory_is_full(tmp_path: Path) -> None:
    """The data directory on a 32 MiB file system of its own (bubblewrap), filled up while the app runs."""
    data = tmp_path / "data"
    data.mkdir()
    bwrap = shutil.which("bwrap")
    assert bwrap, "bubblewrap is needed (scripts/test.sh installs it)"
    command = [bwrap, "--dev-bind", "/", "/", "--size", str(32 << 20), "--tmpfs", str(data),
               sys.executable, "-c", FULL, str(data)]  # fmt: skip
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    (before, b_db), (full, f_db), (probed, p_db) = json.loads(done.stdout.strip().splitlines()[-1])
    assert before == 200 and b_db["writable"] is True
    assert full == 503 and f_db["reachable"] is True and f_db["writable"] is False
    assert "is full" in f_db["problem"]
    assert probed == 503 and p_db["writable"] is False and "disk is full" in p_db["problem"]
