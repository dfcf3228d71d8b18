"""`ringlab worker` as deployed: two real worker processes on one database grade every job once.

On PostgreSQL both listen for NOTIFY; on SQLite one listens on the wake-up socket and the other
polls. Real bubblewrap sandboxes and real ranks: this is how a course scales out.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from app.db import session_scope, utcnow
from app.labs import catalog, service
from app.labs.models import LabWorker, Submission, SubmissionStatus
from app.labs.settings import LabSettings
from app.web.auth import Principal
from tests.conftest import CONTENT_DIR, REPO
from tests.factories import make_user
from tests.labs_app.conftest import solution, unique


@pytest.fixture
def workers(live_url: str, tmp_path: Path) -> Iterator[list[subprocess.Popen[bytes]]]:
    """Two worker processes; the i-th one's log is ``tmp_path / f"worker-{i}.log"``."""
    env = {**os.environ, "DATABASE_URL": live_url, "RINGLAB_CONTENT_DIR": str(CONTENT_DIR)}
    command = [sys.executable, "-m", "app", "worker", "--pool", "1"]
    procs = []
    for i in range(2):
        with (tmp_path / f"worker-{i}.log").open("wb") as log:
            procs.append(subprocess.Popen(command, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT))
    yield procs
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_two_worker_processes_grade_every_job_once_and_stop_cleanly(
    live_url: str, live_factory: sessionmaker[Session], workers: list[subprocess.Popen[bytes]], tmp_path: Path
) -> None:
    lab = catalog.get_lab(CONTENT_DIR, "collectives-p2p")
    limits = service.Limits.of(LabSettings())
    ids = []
    for code in [solution("collectives-p2p")] * 3 + ["def all_reduce(t):\n    pass\n"]:
        with session_scope(live_factory) as session:
            user = make_user(session, unique("proc"))
            ids.append(service.submit(lab, Principal.of(user), code, session=session, now=utcnow(), limits=limits).id)

    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        with live_factory() as session:
            rows = session.scalars(select(Submission).where(Submission.id.in_(ids)).order_by(Submission.id)).all()
            if all(r.status in (SubmissionStatus.graded, SubmissionStatus.failed) for r in rows):
                break
        assert all(p.poll() is None for p in workers), "a worker exited early"
        time.sleep(0.2)
    statuses = [r.status for r in rows]
    assert statuses == [SubmissionStatus.graded] * 3 + [SubmissionStatus.failed], statuses  # the last lacks functions
    assert [r.attempts for r in rows] == [1, 1, 1, 1]  # claimed once each: no job was graded twice
    assert [r.score == r.max_score for r in rows[:3]] == [True, True, True]
    with live_factory() as session:
        holders = {r.worker_id for r in rows}
        registered = session.scalars(select(LabWorker).where(LabWorker.id.in_(holders))).all()
        assert {w.id for w in registered} == holders  # graded by registered worker processes only
        assert {w.pid for w in registered} <= {p.pid for p in workers}

    for proc in workers:
        proc.send_signal(signal.SIGTERM)
    outputs = []
    for i, proc in enumerate(workers):
        proc.wait(timeout=60)
        outputs.append((tmp_path / f"worker-{i}.log").read_text())
        assert proc.returncode == 0, outputs[-1][-2000:]
    listening = sum("listening for new jobs" in o for o in outputs)
    assert listening == (2 if live_url.startswith("postgresql") else 1), outputs  # SQLite: one socket a host
