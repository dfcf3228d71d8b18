"""async-checkpoint's reading of checkpoint files: a torn file from one whose tensors changed while it was written."""

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
