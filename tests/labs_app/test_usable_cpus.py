"""A worker reports the CPUs it may run on (what its queue page and the capacity table count), not the host's."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from app.paths import REPO_ROOT

ASK = "from app.labs.worker import capacity; print(capacity(gpu_count=0, sandboxed=False).cpu_count)"


def _reported(cpus: set[int]) -> int:
    out = subprocess.run(
        [sys.executable, "-c", ASK], cwd=REPO_ROOT, capture_output=True, text=True, check=True, timeout=60,
        preexec_fn=lambda: os.sched_setaffinity(0, cpus),
    )  # fmt: skip
    return int(out.stdout.strip())


def test_a_worker_bound_to_one_cpu_reports_one() -> None:
    allowed = sorted(os.sched_getaffinity(0))
    assert _reported({allowed[0]}) == 1
    assert _reported(set(allowed)) == len(allowed)


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs to bind a worker to one of them")
def test_bound_to_fewer_cpus_than_the_host_has_it_reports_fewer() -> None:
    assert _reported({sorted(os.sched_getaffinity(0))[-1]}) < (os.cpu_count() or 1)
