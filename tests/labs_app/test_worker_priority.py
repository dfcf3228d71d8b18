"""The grading worker, and the ranks it runs, yield the CPU to the web process (RINGLAB_WORKER_NICE)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from sqlalchemy.orm import Session, sessionmaker

from app.labs.models import SubmissionStatus
from tests.conftest import BACKENDS, CONTENT_DIR
from tests.labs_app.conftest import solution
from tests.labs_app.test_worker_process import Start, start_worker, submit, wait_done

__all__ = ["start_worker"]  # the fixture, shared with the worker process tests

SAYS_ITS_NICENESS = 'import os\nprint("niceness", os.getpriority(os.PRIO_PROCESS, 0), flush=True)\n'


def niceness(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[16])


@pytest.mark.parametrize("live_url", BACKENDS[:1], indirect=True)  # niceness is the same on either database
def test_the_worker_and_its_ranks_run_at_the_configured_niceness(
    live_url: str, live_factory: sessionmaker[Session], start_worker: Start
) -> None:
    worker = start_worker(live_url, RINGLAB_WORKER_NICE="7")
    code = SAYS_ITS_NICENESS + solution("collectives-p2p")
    [row] = wait_done(live_factory, [submit(live_factory, CONTENT_DIR, "collectives-p2p", code)], [worker])
    assert row.status == SubmissionStatus.graded, row.verdict
    assert niceness(worker.proc.pid) == 7
    # A session of its own, so a scheduler group of its own where the kernel groups by session.
    assert os.getsid(worker.proc.pid) == worker.proc.pid != os.getsid(0)
    group = Path(f"/proc/{worker.proc.pid}/autogroup")
    if group.exists():  # kernels built with autogroup
        assert group.read_text().split()[-1] == "7" and group.read_text() != Path("/proc/self/autogroup").read_text()
    outputs = (row.verdict or {}).get("output", {})
    assert outputs and all("niceness 7" in text for text in outputs.values()), outputs
    worker.stop()
