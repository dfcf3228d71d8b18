"""Public driver for tree-broadcast: how the grader calls your code on each rank.

Not secret: read it to see exactly what runs. The grader calls ``run`` once per case, on every rank,
with this rank's input: the source rank gets the tensor to broadcast, the others a tensor of zeros of
the same shape. What ``run`` returns is compared with the source's tensor outside your processes.
"""

from __future__ import annotations

from typing import Any


def run(submission: Any, inputs: dict[str, Any]) -> dict[str, Any]:
    """Call the student's ``tree_broadcast`` on a copy of this rank's tensor; the tensor it leaves."""
    tensor = inputs["tensor"].clone()
    submission.tree_broadcast(tensor, inputs["src"])
    return {"tensor": tensor}
