"""async-checkpoint: its reading of checkpoint files (torn, or changed while written) and its storage's crash run."""

from __future__ import annotations

import io

import torch

from labs.host.grader import Grader
from labs.spec import DEFAULT_CONTENT

LAB = DEFAULT_CONTENT / "async-checkpoint"


def _archive() -> bytes:
    buffer = io.BytesIO()
    torch.save({"state": {"w": torch.arange(64, dtype=torch.float64)}}, buffer)
    return buffer.getvalue()


def test_a_file_is_whole_torn_or_changed_under_its_checksums() -> None:
    _, checks = Grader.load_checks(LAB)
    data = _archive()
    assert checks.archive_state(data) == "whole"
    assert checks.archive_state(data[: len(data) // 2]) == "torn"
    assert checks.archive_state(data[:-1]) == "torn"
    # A value of the tensor changed after its CRC was taken: every byte is there, one number is not what was summed.
    at = data.index(torch.arange(64, dtype=torch.float64)[40:41].numpy().tobytes())
    changed = data[:at] + torch.tensor([-1.0], dtype=torch.float64).numpy().tobytes() + data[at + 8 :]
    assert len(changed) == len(data)
    assert checks.archive_state(changed) == "changed"


def test_two_writes_in_flight_lose_one_in_flight_alone_although_an_earlier_thread_is_late(worker_grader) -> None:
    """A checkpointer that keeps two writes in flight, each write's thread slower to start than the next one's
    in the run with a crash (what a busy machine does now and then; the storage's mode read only to place the
    delay there, where writes are not held): the later thread's write() comes first. The save of the step that
    crashes begins only once the earlier writes have ended, so the crash comes in its own write, and the only
    check lost is the one about two writes in flight."""
    code = (LAB / "solution.py").read_text()
    code = code.replace(
        "        self._finish()  # at most one save in flight: the previous write ends first\n",
        "        self._late /= 3\n",
    )
    code = code.replace(
        "        self._error: BaseException | None = None\n",
        "        self._error = None\n        self._late = 0.9 if write.__self__.mode == 'crash' else 0.0\n",
    )
    code = code.replace("args=(copy, path)", "args=(copy, path, self._late)")
    code = code.replace(
        "    def _write(self, state: Any, path: str) -> None:\n        try:\n",
        "    def _write(self, state: Any, path: str, late: float) -> None:\n"
        "        try:\n            time.sleep(late)\n",
    )
    code = code.replace("import threading\n", "import threading\nimport time\n")
    assert code.count("time.sleep(late)") == 1 and "self._finish()  # at most" not in code
    verdict = worker_grader.grade("async-checkpoint", code, seed=3)
    lost = {c.id: c.message for c in verdict.checks if not c.passed}
    assert set(lost) == {"one-in-flight"}, lost
