"""`ringlab worker` as deployed: real worker processes, real bubblewrap sandboxes, real ranks.

Two workers on one database grade every job once (on PostgreSQL both listen for NOTIFY; on
SQLite one listens on the wake-up socket and the other polls): this is how a course scales out.
A GPU-only lab's job waits for a worker with a GPU per rank while CPU workers grade around it.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from app.content.service import sync_directory
from app.db import make_engine, make_sessionmaker, session_scope, utcnow
from app.labs import catalog, service
from app.labs.models import LabWorker, Submission, SubmissionStatus
from app.labs.settings import LabSettings
from app.migrate import upgrade
from tests.conftest import CONTENT_DIR, REPO, make_db_url
from tests.factories import make_user, student_principal
from tests.labs_app.conftest import solution, unique

GPU_LAB = "collectives-p2p-gpu"
GPU_EDITS = [  # collectives-p2p -> a GPU-only lab: NCCL, world size 1
    ("id: collectives-p2p", f"id: {GPU_LAB}"),
    ("world_sizes: [2, 3, 4]", "world_sizes: [1]"),
    ("backends: [gloo, nccl]", "backends: [nccl]"),
    ("needs_gpu: false", "needs_gpu: true"),
]


@dataclass
class Running:
    proc: subprocess.Popen[bytes]
    log: Path

    def alive(self) -> None:
        assert self.proc.poll() is None, f"a worker exited early:\n{self.log.read_text()[-2000:]}"

    def stop(self) -> str:
        """SIGTERM, as systemd would: the worker must exit 0. Returns its log."""
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=60)
        assert self.proc.returncode == 0, self.log.read_text()[-2000:]
        return self.log.read_text()


Start = Callable[..., Running]


@pytest.fixture
def start_worker(tmp_path: Path) -> Iterator[Start]:
    """``start_worker(url, content, **env)``: a ``ringlab worker`` process, killed at the end if still running."""
    started: list[Running] = []

    def start(url: str, content: Path = CONTENT_DIR, **env: str) -> Running:
        environ = {**os.environ, "DATABASE_URL": url, "RINGLAB_CONTENT_DIR": str(content), **env}
        command = [sys.executable, "-m", "app", "worker", "--pool", "1"]
        log = tmp_path / f"worker-{len(started)}.log"
        with log.open("wb") as out:
            proc = subprocess.Popen(command, cwd=REPO, env=environ, stdout=out, stderr=subprocess.STDOUT)
        started.append(Running(proc, log))
        return started[-1]

    yield start
    for running in started:
        if running.proc.poll() is None:
            running.proc.kill()
            running.proc.wait()


def submit(factory: sessionmaker[Session], content: Path, lab_id: str, code: str) -> int:
    with session_scope(factory) as session:
        lab = catalog.get_lab(session, lab_id)
        user = make_user(session, unique("proc"))
        limits = service.Limits.of(LabSettings())
        return service.submit(lab, student_principal(user), code, session=session, now=utcnow(), limits=limits).id


def wait_done(
    factory: sessionmaker[Session], ids: list[int], workers: list[Running], timeout: float = 180
) -> list[Submission]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with factory() as session:
            rows = list(session.scalars(select(Submission).where(Submission.id.in_(ids)).order_by(Submission.id)))
        if all(r.done for r in rows):
            return rows
        for worker in workers:
            worker.alive()
        time.sleep(0.2)
    raise AssertionError(f"not graded in {timeout} s: {[r.status for r in rows]}")


def test_two_worker_processes_grade_every_job_once_and_stop_cleanly(
    live_url: str, live_factory: sessionmaker[Session], start_worker: Start
) -> None:
    workers = [start_worker(live_url), start_worker(live_url)]
    codes = [solution("collectives-p2p")] * 3 + ["def all_reduce(t):\n    pass\n"]
    ids = [submit(live_factory, CONTENT_DIR, "collectives-p2p", code) for code in codes]

    rows = wait_done(live_factory, ids, workers)
    statuses = [r.status for r in rows]
    assert statuses == [SubmissionStatus.graded] * 3 + [SubmissionStatus.failed], statuses  # the last lacks functions
    assert [r.attempts for r in rows] == [1, 1, 1, 1]  # claimed once each: no job was graded twice
    assert [r.score == r.max_score for r in rows[:3]] == [True, True, True]
    with live_factory() as session:
        holders = {r.worker_id for r in rows}
        registered = session.scalars(select(LabWorker).where(LabWorker.id.in_(holders))).all()
        assert {w.id for w in registered} == holders  # graded by registered worker processes only
        assert {w.pid for w in registered} <= {w.proc.pid for w in workers}

    logs = [worker.stop() for worker in workers]
    listening = sum("listening for new jobs" in log for log in logs)
    assert listening == (2 if live_url.startswith("postgresql") else 1), logs  # SQLite: one socket a host


@pytest.fixture(scope="module")
def gpu_content(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The repository's content plus a GPU-only copy of collectives-p2p: NCCL, world size 1."""
    content = tmp_path_factory.mktemp("content") / "content"
    shutil.copytree(CONTENT_DIR, content)
    lab = content / "labs" / GPU_LAB
    # Its mutants are graded at world sizes this copy does not have: an author's material it does not need.
    shutil.copytree(CONTENT_DIR / "labs" / "collectives-p2p", lab, ignore=shutil.ignore_patterns("mutants"))
    spec = (lab / "lab.yaml").read_text()
    for old, new in GPU_EDITS:
        assert old in spec
        spec = spec.replace(old, new)
    (lab / "lab.yaml").write_text(spec)
    return content


@pytest.fixture(scope="module")
def gpu_db(gpu_content: Path, request: pytest.FixtureRequest) -> Iterator[tuple[str, sessionmaker[Session]]]:
    url = make_db_url("sqlite", request, "gpu_queue")
    upgrade(url)
    engine = make_engine(url)
    factory = make_sessionmaker(engine)
    sync_directory(gpu_content, factory)
    yield url, factory
    engine.dispose()


def test_a_gpu_only_job_waits_while_a_cpu_worker_grades_around_it(
    gpu_db: tuple[str, sessionmaker[Session]], gpu_content: Path, start_worker: Start
) -> None:
    url, factory = gpu_db
    cpu = start_worker(url, gpu_content, CUDA_VISIBLE_DEVICES="")  # no GPU, on any machine
    gpu_job = submit(factory, gpu_content, GPU_LAB, solution("collectives-p2p"))
    cpu_job = submit(factory, gpu_content, "collectives-p2p", solution("collectives-p2p"))

    (graded,) = wait_done(factory, [cpu_job], [cpu])
    assert graded.status == SubmissionStatus.graded and graded.score == graded.max_score
    time.sleep(1.5)  # three more looks at the queue
    with factory() as session:
        waiting = session.get(Submission, gpu_job)
        assert waiting is not None and waiting.status == SubmissionStatus.queued and waiting.attempts == 0
        assert waiting.gpus_needed == 1
        worker = session.get(LabWorker, graded.worker_id)
        assert worker is not None and worker.gpu_count == 0
    cpu.stop()


torch = pytest.importorskip("torch")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU on this machine: the nccl path needs one")
def test_a_gpu_worker_takes_the_waiting_gpu_only_job_and_grades_it_with_nccl(
    gpu_db: tuple[str, sessionmaker[Session]], gpu_content: Path, start_worker: Start
) -> None:
    url, factory = gpu_db
    gpu_job = submit(factory, gpu_content, GPU_LAB, solution("collectives-p2p"))
    cpu = start_worker(url, gpu_content, CUDA_VISIBLE_DEVICES="")
    time.sleep(8)  # the CPU worker is up and looking; it must leave the job alone
    with factory() as session:
        assert (row := session.get(Submission, gpu_job)) is not None and row.status == SubmissionStatus.queued
    gpu = start_worker(url, gpu_content)
    (done,) = wait_done(factory, [gpu_job], [cpu, gpu])
    assert done.status == SubmissionStatus.graded, done.verdict
    assert done.score == done.max_score, done.verdict
    assert done.verdict is not None and done.verdict["data"]["backend"] == "nccl"
    with factory() as session:
        worker = session.get(LabWorker, done.worker_id)
        assert worker is not None and worker.gpu_count >= 1 and worker.pid == gpu.proc.pid
    cpu.stop()
    gpu.stop()
