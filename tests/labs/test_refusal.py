"""No sandbox, no grading: a clear refusal unless the development-only escape hatch is asked for."""

from __future__ import annotations

import pytest

from labs.host.grader import Grader

from .conftest import solution


def test_missing_bubblewrap_refuses_with_a_clear_message(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    with Grader(pool_size=1) as grader:
        v = grader.grade("ring-allreduce", solution("ring-allreduce"), world_sizes=[2])
    assert v.status == "refused"
    assert "bubblewrap" in v.message
    assert v.score == 0 and all(c.message == "not run" for c in v.checks)


def test_unsafe_no_sandbox_runs_for_development() -> None:
    with Grader(pool_size=0, unsafe_no_sandbox=True) as grader:
        v = grader.grade("ring-allreduce", solution("ring-allreduce"), world_sizes=[2])
    assert v.status in ("passed", "failed"), v.message  # no per-rank uids: wire bytes may not be attributable
    assert v.check("ring-all-reduce").passed
