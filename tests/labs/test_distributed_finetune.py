"""distributed-finetune, graded for real beyond its proof (``ringlab lab test``): a correct script written
unlike the lab's reference gets full marks. The points must come from what the script produced, never
from how it is written (its checkpoint layout, how it sets the learning rate or skips batches)."""

from __future__ import annotations

from pathlib import Path

LAB = "distributed-finetune"
CORRECT = Path(__file__).resolve().parent / "correct" / LAB


def test_a_script_written_differently_gets_full_marks(one_grader) -> None:
    v = one_grader.grade(LAB, (CORRECT / "written_differently.py").read_text())
    assert v.status == "passed", [(c.id, c.score, c.message) for c in v.checks if c.score < c.points]
    assert v.score == v.max_score
