"""A submission is graded against the lab version it was submitted to; a lab that cannot be loaded is our
error for that job at once (no retries through leases), and the worker goes on grading the other labs."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from app.content.service import sync_directory
from app.db import session_scope, utcnow
from app.labs import catalog, service
from app.labs.models import Submission, SubmissionStatus
from app.labs.queue import Job
from app.labs.settings import LabSettings
from app.labs.worker import Worker
from tests.conftest import CONTENT_DIR
from tests.factories import make_user, student_principal
from tests.labs_app.conftest import capacity, solution, unique


@pytest.fixture(scope="module")
def grader() -> Iterator[Any]:
    from labs.host.grader import Grader

    g = Grader(CONTENT_DIR / "labs", pool_size=1)
    yield g
    g.close()


def submit(factory: sessionmaker[Session], lab_id: str, code: str) -> int:
    with session_scope(factory) as session:
        lab = catalog.get_lab(session, lab_id)
        user = make_user(session, unique("ver"))
        limits = service.Limits.of(LabSettings())
        return service.submit(lab, student_principal(user), code, session=session, now=utcnow(), limits=limits).id


def test_each_submission_is_graded_against_its_own_lab_version(
    live_factory: sessionmaker[Session], grader: Any, tmp_path: Path
) -> None:
    lab_id = unique("versioned-p2p-")
    root = tmp_path / "content"
    shutil.copytree(CONTENT_DIR, root, ignore=shutil.ignore_patterns("__pycache__"))
    lab = root / "labs" / lab_id
    shutil.copytree(CONTENT_DIR / "labs" / "collectives-p2p", lab, ignore=shutil.ignore_patterns("__pycache__"))
    spec = (lab / "lab.yaml").read_text()
    (lab / "lab.yaml").write_text(spec.replace("id: collectives-p2p", f"id: {lab_id}"))
    sync_directory(root, live_factory)
    on_v1 = submit(live_factory, lab_id, solution("collectives-p2p"))

    # Version 2, synced before any worker looks: a renamed check, and checks that cannot even be imported.
    (lab / "lab.yaml").write_text((lab / "lab.yaml").read_text().replace("all_reduce sums in place", "Renamed"))
    # It keeps the checks contract (the content check reads it), and raises once imported.
    checks = (lab / "checks.py").read_text()
    (lab / "checks.py").write_text(checks + "\nraise RuntimeError('the checks of version 2 are broken')\n")
    sync_directory(root, live_factory)
    on_v2 = submit(live_factory, lab_id, solution("collectives-p2p"))
    other = submit(live_factory, "collectives-p2p", solution("collectives-p2p"))
    ids = [on_v1, on_v2, other]

    def load(job: Job) -> None:
        grader.lab(job.lab_id, job.lab_dir)

    def grade(job: Job, backend: str) -> dict[str, Any]:
        return grader.grade(job.lab_id, job.code, backend=backend, world_sizes=[2], lab_dir=job.lab_dir).to_dict()  # type: ignore[no-any-return]

    worker = Worker(live_factory, grade, capacity(unique("versions")), cache_dir=tmp_path / "cache", load=load)
    for _ in range(20):
        with live_factory() as session:
            rows = list(session.scalars(select(Submission).where(Submission.id.in_(ids)).order_by(Submission.id)))
        if all(row.done for row in rows):
            break
        worker.step()
    try:
        v1, v2, p2p = rows
        assert [v1.lab_version, v2.lab_version] == [1, 2]
        assert v1.status == SubmissionStatus.graded and v1.score == v1.max_score, v1.verdict
        assert v1.verdict is not None and "all_reduce sums in place on every rank" in [
            c["title"] for c in v1.verdict["checks"]
        ]
        assert v2.status == SubmissionStatus.error and v2.attempts == 1 and v2.score is None  # ours, at once
        assert v2.verdict is not None and v2.verdict["status"] == "internal_error"
        message = v2.verdict["message"]
        assert f"lab {lab_id} (version 2) could not be loaded" in message and "not your fault" in message
        assert "the checks of version 2 are broken" in message
        assert p2p.status == SubmissionStatus.graded and p2p.score == p2p.max_score  # the other lab goes on
    finally:
        sync_directory(CONTENT_DIR, live_factory)  # retire the extra lab


def test_a_job_whose_lab_was_never_synced_is_our_error_at_once(
    live_factory: sessionmaker[Session], tmp_path: Path
) -> None:
    with session_scope(live_factory) as session:
        user = make_user(session, unique("ghost"))
        row = Submission(user_id=user.id, lab_id="never-synced", lab_version=3, code="x = 1\n", gpus_needed=0,
                         attempts=0, regrades=0, submitted_at=utcnow(), queued_at=utcnow())  # fmt: skip
        session.add(row)
        session.flush()
        sid = row.id
    graded: list[int] = []

    def grade(job: Job, backend: str) -> dict[str, Any]:
        graded.append(job.id)
        return {"status": "passed", "score": 1, "max_score": 1, "message": "", "checks": []}

    worker = Worker(live_factory, grade, capacity(unique("ghosts")), cache_dir=tmp_path)
    for _ in range(10):
        with live_factory() as session:
            done = session.get(Submission, sid)
            assert done is not None
            if done.done:
                break
        worker.step()
    assert done.status == SubmissionStatus.error and done.attempts == 1
    assert done.verdict is not None and "could not be loaded" in done.verdict["message"]
    assert sid not in graded
