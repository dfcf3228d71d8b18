"""PostgreSQL restarts (``pg_ctl stop -m immediate``, then start) under a running site.

The site as deployed, on a PostgreSQL cluster of this module's own (the suite's shared one is never
stopped): ``ringlab serve`` without its embedded worker, and one ``ringlab worker`` grading in its
sandbox. During the outage every request that needs the database is a 503 with Retry-After (JSON
under /api, a page elsewhere, whether the route or the session-cookie lookup met it), never a 500;
the worker keeps the verdict it computed and writes it once the server is back. Afterwards every
acknowledged submission is there and graded exactly once, the first request succeeds, and the
worker listens for new jobs again.

The queue's side of it (a claim whose answer was lost, a verdict written after its lease expired)
is checked on both backends without a server.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from sqlalchemy import func, select, text
from sqlalchemy.exc import DBAPIError, IntegrityError
from sqlalchemy.orm import Session

from app.accounts.service import issue_api_token, start_session
from app.content.service import sync_directory
from app.db import make_engine, make_sessionmaker, session_scope, unavailable, utcnow
from app.labs import queue
from app.labs.models import LabWorker, Submission, SubmissionStatus
from app.labs.wake import CHANNEL
from app.migrate import upgrade
from app.web.auth import COOKIE
from app.web.errors import RETRY_AFTER_S
from tests.conftest import BACKENDS, CONTENT_DIR, REPO
from tests.factories import make_user
from tests.labs_app.conftest import Clock, capacity, solution, unique
from tests.pg import PostgresCluster

LAB = "ring-allreduce"
RIGHT, WRONG = solution(LAB), (CONTENT_DIR / "labs" / LAB / "starter.py").read_text()
# Right, and slow enough (0.4 s more per world size) to be mid-grading when the server stops;
# printing keeps it from looking idle.
SLOW = RIGHT + "\nimport time\nfor _ in range(2):\n    print('.', flush=True)\n    time.sleep(0.2)\n"
DONE = {"graded", "failed", "error"}
ON_POSTGRESQL = pytest.mark.skipif("postgresql" not in BACKENDS, reason="RINGLAB_TEST_BACKENDS leaves PostgreSQL out")


@pytest.fixture(scope="module")
def cluster() -> Iterator[PostgresCluster]:
    """A cluster this module may stop and start: the other tests' server keeps running."""
    base = Path(tempfile.mkdtemp(prefix="ringlab-pg-restart-"))
    base.chmod(0o755)  # as root the server runs as `postgres`, which must reach its files
    server = PostgresCluster(base)
    server.start()
    yield server
    server.stop()
    shutil.rmtree(base, ignore_errors=True)


def start_again(cluster: PostgresCluster) -> None:
    """``pg_ctl restart`` of a stopped server starts it with the options it last ran with (postmaster.opts)."""
    command = [str(cluster.bin / "pg_ctl"), "-D", str(cluster.data), "-l", str(cluster.base / "server.log"), "-w"]
    if cluster.as_postgres:
        command = ["runuser", "-u", "postgres", "--", *command]
    done = subprocess.run([*command, "restart"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr


@dataclass
class Process:
    proc: subprocess.Popen[bytes]
    log: Path

    def alive(self) -> None:
        assert self.proc.poll() is None, f"{self.log.name} exited:\n{self.log.read_text()[-3000:]}"

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode


@dataclass
class Site:
    base: str
    url: str
    web: Process
    worker: Process
    tokens: list[str]
    cookie: str


def spawn(args: list[str], env: dict[str, str], log: Path) -> Process:
    with log.open("wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "app", *args], cwd=REPO, env=env, stdout=out,
                                stderr=subprocess.STDOUT)  # fmt: skip
    return Process(proc, log)


@pytest.fixture
def site(cluster: PostgresCluster, tmp_path: Path) -> Iterator[Site]:
    url = cluster.create_database("ringlab_restart")
    with psycopg.connect(f"host=127.0.0.1 port={cluster.port} user=ringlab dbname=postgres", autocommit=True) as conn:
        # The test cluster trades durability for speed (synchronous_commit=off): a crash then loses
        # commits the server had already acknowledged, which no application can make up for.
        conn.execute("ALTER DATABASE ringlab_restart SET synchronous_commit = on")
    upgrade(url)
    engine = make_engine(url)
    factory = make_sessionmaker(engine)
    sync_directory(CONTENT_DIR, factory)
    with session_scope(factory) as session:
        users = [make_user(session, unique("restart")) for _ in range(4)]
        tokens = [issue_api_token(u, session=session, now=utcnow(), ttl=timedelta(hours=1)).token for u in users]
        cookie = start_session(users[0], session=session, now=utcnow(), ttl=timedelta(hours=1)).token
    engine.dispose()
    env = {
        **os.environ,
        "DATABASE_URL": url,
        "RINGLAB_DATA_DIR": str(tmp_path),
        "RINGLAB_CONTENT_DIR": str(CONTENT_DIR),
        "RINGLAB_EMBEDDED_WORKER": "false",
        "RINGLAB_SYNC_CONTENT_ON_START": "false",
    }
    worker = spawn(["worker", "--pool", "1"], env, tmp_path / "worker.log")
    port = _free_port()
    web = spawn(["serve", "--port", str(port)], env, tmp_path / "web.log")
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while not _up(base):
            web.alive()
            assert time.monotonic() < deadline, web.log.read_text()[-3000:]
            time.sleep(0.2)
        yield Site(base, url, web, worker, tokens, cookie)
    finally:
        worker.stop()
        web.stop()


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _up(base: str) -> bool:
    try:
        return httpx.get(base + "/api/v1/labs", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def wait_for(what: str, check: Any, timeout: float, *alive: Process) -> Any:
    deadline = time.monotonic() + timeout
    while not (found := check()):
        for process in alive:
            process.alive()
        assert time.monotonic() < deadline, f"{what}: not within {timeout} s"
        time.sleep(0.1)
    return found


def status(client: httpx.Client, sid: int, token: str) -> dict[str, Any]:
    response = client.get(f"/api/v1/submissions/{sid}", headers=auth(token))
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def assert_unavailable(response: httpx.Response, kind: str) -> None:
    assert response.status_code == 503, (response.status_code, response.text[:500])
    assert response.headers["retry-after"] == str(RETRY_AFTER_S)
    assert response.headers["content-type"].startswith(kind)
    assert "cannot be reached" in response.text
    if kind == "text/html":
        assert "<h1>503 · Back in a moment</h1>" in response.text
        assert response.headers["x-content-type-options"] == "nosniff"  # the usual headers, as on every page


def listening(url: str) -> int:
    """Connections of this database that sit in LISTEN for new jobs (the workers' wake-up listeners)."""
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            query = "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND query = :q"
            return int(conn.execute(text(query), {"q": f"LISTEN {CHANNEL}"}).scalar_one())
    finally:
        engine.dispose()


@ON_POSTGRESQL
def test_a_postgresql_restart_loses_nothing_and_grades_each_submission_once(
    site: Site, cluster: PostgresCluster
) -> None:
    ada, bob, cy, dee = site.tokens
    submit = f"/api/v1/labs/{LAB}/submissions"
    with httpx.Client(base_url=site.base, timeout=30) as client:
        sent: dict[int, tuple[str, str]] = {}  # acknowledged: id -> (token, code)
        for token, code in ((ada, SLOW), (bob, WRONG)):  # the wrong one waits in the queue through it
            response = client.post(submit, json={"code": code}, headers=auth(token))
            assert response.status_code == 202, response.text
            sent[response.json()["id"]] = (token, code)
        slow = next(iter(sent))
        # A cold worker imports torch and warms its sandbox first.
        wait_for("the slow one running", lambda: status(client, slow, ada)["status"] == "running", 180, site.worker)

        # A poll held (?wait=) on the queued one when the server goes: answered at once, with the 503.
        queued = next(sid for sid, (_, code) in sent.items() if code == WRONG)
        holding = ThreadPoolExecutor(1)
        held = holding.submit(client.get, f"/api/v1/submissions/{queued}?wait=25", headers=auth(bob))
        time.sleep(1.0)
        assert not held.done()

        cluster.stop()  # pg_ctl stop -m immediate: every connection cut, as in a crash
        stopped = time.monotonic()
        assert_unavailable(held.result(timeout=10), "application/json")
        holding.shutdown()
        assert time.monotonic() - stopped < 10  # not held for the rest of its 25 s
        assert_unavailable(client.get(f"/api/v1/submissions/{slow}", headers=auth(ada)), "application/json")
        assert_unavailable(client.post(submit, json={"code": RIGHT}, headers=auth(cy)), "application/json")
        assert_unavailable(client.get("/quizzes"), "text/html")  # the route's query
        client.cookies.set(COOKIE, site.cookie)
        page = client.get("/labs", headers={"HX-Request": "true"})  # the session lookup, before any route
        client.cookies.clear()
        assert_unavailable(page, "text/html")
        assert "ringlab:announce" in page.headers["hx-trigger"]  # htmx leaves the page; its live region says why
        health = client.get("/healthz")
        assert health.status_code == 503 and health.json()["database"]["ok"] is False, health.text
        assert health.headers["retry-after"] == "5"

        # The worker finishes grading with the server away, and holds on to the verdict.
        wait_for(
            "the worker waiting to write the slow one's verdict",
            lambda: f"submission {slow}: its verdict: the database is unavailable" in site.worker.log.read_text(),
            120,
            site.worker,
        )
        site.worker.alive()
        start_again(cluster)
        down_s = time.monotonic() - stopped

        first = client.get(f"/api/v1/submissions/{slow}", headers=auth(ada))  # the first request after it
        assert first.status_code == 200, first.text
        for sid, (token, _) in sent.items():
            wait_for(f"submission {sid} graded", lambda s=sid, t=token: status(client, s, t)["status"] in DONE, 120,
                     site.worker)  # fmt: skip
        finals = {sid: status(client, sid, token) for sid, (token, _) in sent.items()}
        for sid, (_, code) in sent.items():
            body = finals[sid]
            if code == WRONG:
                assert body["status"] == "failed", body
            else:
                assert body["status"] == "graded" and body["score"] == body["max_score"], body

        # The worker listens again, and grades what is submitted now (wrong code: it fails sooner).
        wait_for("the worker's LISTEN again", lambda: listening(site.url) == 1, 30, site.worker)
        response = client.post(submit, json={"code": WRONG}, headers=auth(dee))
        assert response.status_code == 202, response.text
        after = response.json()["id"]
        sent[after] = (dee, WRONG)
        wait_for("the new submission graded", lambda: status(client, after, dee)["status"] in DONE, 120, site.worker)
        assert status(client, after, dee)["status"] == "failed"
        health = client.get("/healthz")
        assert health.status_code == 200, health.text

    engine = make_engine(site.url)
    try:
        with make_sessionmaker(engine)() as session:
            rows = session.scalars(select(Submission).order_by(Submission.id)).all()
            # Every acknowledged submission, nothing else (the one refused with a 503 was not stored).
            assert [r.id for r in rows] == sorted(sent)
            assert [r.attempts for r in rows] == [1] * len(sent)  # claimed once: the code ran once
            graded = session.scalar(select(func.sum(LabWorker.graded))) or 0
            assert graded == len(sent)  # one verdict written per submission
    finally:
        engine.dispose()
    log = site.worker.log.read_text()
    assert log.count(f"listening for new jobs on PostgreSQL channel {CHANNEL}") == 2, log[-3000:]
    assert site.worker.stop() == 0, log[-3000:]
    assert "Traceback" not in site.web.log.read_text(), site.web.log.read_text()[-3000:]
    print(f"PostgreSQL down for {down_s:.1f} s; {len(sent)} submissions graded once each")


@ON_POSTGRESQL
def test_unavailable_tells_a_server_away_from_a_statement_refused(cluster: PostgresCluster) -> None:
    url = cluster.create_database("ringlab_unavailable")
    engine = make_engine(url)
    try:
        with engine.connect() as conn, pytest.raises(DBAPIError) as refused:
            conn.execute(text("SELECT * FROM no_such_table"))
        assert not unavailable(refused.value)
        with engine.connect() as conn:
            conn.execute(text("CREATE TABLE t (id int PRIMARY KEY)"))
            conn.execute(text("INSERT INTO t VALUES (1)"))
            with pytest.raises(IntegrityError) as duplicate:
                conn.execute(text("INSERT INTO t VALUES (1)"))
        assert not unavailable(duplicate.value)
        with engine.connect() as conn:
            pid = conn.execute(text("SELECT pg_backend_pid()")).scalar_one()
            with engine.connect() as other:
                other.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})
            with pytest.raises(DBAPIError) as cut:
                conn.execute(text("SELECT 1"))
        assert cut.value.connection_invalidated and unavailable(cut.value)
    finally:
        engine.dispose()
    away = make_engine(f"postgresql+psycopg://ringlab@127.0.0.1:{_free_port()}/nothing")
    with pytest.raises(DBAPIError) as refused_connection:
        away.connect()
    assert unavailable(refused_connection.value)
    assert not unavailable(ValueError("not the database's"))


def test_a_claim_whose_answer_was_lost_is_taken_up_again_with_its_attempt(session: Session, clock: Clock) -> None:
    sub = _queued(session, clock)
    cap = capacity(unique("lost-answer"))
    queue.register(cap, session=session, now=clock())
    assert queue.resume(cap.worker_id, session=session, now=clock()) is None  # holds nothing
    job = queue.claim(cap, session=session, now=clock(), lease_s=30, max_attempts=3)
    assert job is not None and job.id == sub.id and job.attempt == 1
    later = clock.advance(20)
    again = queue.resume(cap.worker_id, session=session, now=later)  # the worker never saw the claim
    assert again == job
    session.refresh(sub)
    assert (sub.status, sub.attempts, sub.heartbeat_at) == (SubmissionStatus.running, 1, later)
    assert queue.resume(capacity(unique("other")).worker_id, session=session, now=later) is None


def test_a_verdict_written_after_its_lease_expired_counts_until_another_worker_claims(
    session: Session, clock: Clock
) -> None:
    passed = {"status": "passed", "score": 10, "max_score": 10, "message": "all checks passed", "checks": []}
    late, taken = _queued(session, clock), _queued(session, clock)
    slow, other = capacity(unique("slow")), capacity(unique("other"))
    for cap in (slow, other):
        queue.register(cap, session=session, now=clock())
    first = queue.claim(slow, session=session, now=clock(), lease_s=30, max_attempts=3)
    second = queue.claim(slow, session=session, now=clock(), lease_s=30, max_attempts=3)
    assert first is not None and second is not None and (first.id, second.id) == (late.id, taken.id)
    clock.advance(31)  # the database was away: no heartbeat reached it
    assert queue.reap(session=session, now=clock(), lease_s=30, max_attempts=3) == 2
    # Reaped, not yet claimed again: the late verdict is the one, and nobody runs the code again.
    assert queue.finish(first, slow.worker_id, passed, session=session, now=clock(), max_attempts=3) == "graded"
    session.refresh(late)
    assert (late.status, late.attempts, late.worker_id, late.score) == (SubmissionStatus.graded, 1, slow.worker_id, 10)
    # Claimed again by another worker: that one grades it; the late verdict is dropped.
    regrab = queue.claim(other, session=session, now=clock(), lease_s=30, max_attempts=3)
    assert regrab is not None and regrab.id == taken.id and regrab.attempt == 2
    assert queue.finish(second, slow.worker_id, passed, session=session, now=clock(), max_attempts=3) is None
    session.refresh(taken)
    assert (taken.status, taken.worker_id) == (SubmissionStatus.running, other.worker_id)


def _queued(session: Session, clock: Clock) -> Submission:
    user = make_user(session, unique("rq"))
    at = clock.advance(1)
    row = Submission(user_id=user.id, lab_id=LAB, code="# restart\n", gpus_needed=0, attempts=0, regrades=0,
                     submitted_at=at, queued_at=at)  # fmt: skip
    session.add(row)
    session.commit()
    return row
