"""Verdict messages a student can act on, for submissions that break the rules in unusual ways."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.labs.conftest import solution

RING = "ring-allreduce"
LEFT_BEHIND = "a rank must not leave processes running"


@pytest.fixture(scope="module")
def grader() -> Iterator[Any]:
    from labs.host.grader import Grader

    g = Grader(pool_size=1)
    yield g
    g.close()


def test_a_daemonising_submission_is_told_a_process_was_left_running(grader: Any) -> None:
    code = solution(RING) + "\nimport os, time\nif os.fork() == 0:\n    os.setsid()\n    time.sleep(60)\n"
    v = grader.grade(RING, code, world_sizes=[2], time_limit_s=5)
    assert v.status == "deadlock", v.message
    assert LEFT_BEHIND in v.message and "daemon" in v.message
    assert "was waiting: " not in v.message  # the old message, with an empty list of ranks


def test_a_fork_bomb_is_told_about_its_processes(grader: Any) -> None:
    code = solution(RING) + "\nimport os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n"
    v = grader.grade(RING, code, world_sizes=[2], time_limit_s=5)
    assert v.status in ("deadlock", "time_limit") and v.score == 0, v.message
    if v.status == "deadlock":  # every process asleep or blocked: the message must mention processes
        assert "too many processes, such as a fork bomb" in v.message, v.message


def test_a_nul_byte_is_named_with_its_line(grader: Any) -> None:
    v = grader.grade(RING, "x = 1\n\0y = 2\n")
    assert v.status == "compile_error"
    assert v.message.startswith("the file contains a NUL byte (line 2)"), v.message
    assert "None" not in v.message


def test_a_sandbox_that_stops_answering_in_a_fork_bomb_still_names_the_fork_bomb() -> None:
    # On a loaded machine a fork bomb can keep the sandbox from answering before its group ends: the
    # grader then reads the group's refused forks from the kernel (labs/host/grader.py, measure) and says so.
    from labs.host.feedback import summarise
    from labs.host.judge import GroupRun, RankRun

    group = GroupRun(2, [], [RankRun(info={"rank": 0}), RankRun(info={"rank": 1})])
    group.ranks[1].pids_limited = True
    status, message = summarise([group], {"kind": "lost", "detail": "the sandbox stopped answering"}, [])
    assert status == "time_limit"
    assert message.startswith("world size 2: rank 1 reached the limit of 64 processes"), message
    assert "fork bomb" in message and message.endswith("the sandbox was stopped: the sandbox stopped answering")
