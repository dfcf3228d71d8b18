"""The lamb lab graded for real: the reference's chart, per-tensor partial credit, which checks each mutant loses."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from labs.host import template
from labs.spec import DEFAULT_CONTENT
from labs.spec.mutants import Mutant

from .mutant_cases import assert_loses, mutant, mutant_params

LAB = DEFAULT_CONTENT / "lamb"


@pytest.fixture(scope="module")
def lamb_grader() -> Iterator[object]:
    from labs.host.grader import Grader

    g = Grader(DEFAULT_CONTENT, pool_size=2, fork_from_template=template.available())
    yield g
    g.close()


def test_reference_gets_full_marks_and_a_chart_of_six_curves(lamb_grader) -> None:
    verdict = lamb_grader.grade("lamb", (LAB / "solution.py").read_text())
    assert verdict.status == "passed" and verdict.score == verdict.max_score == 10, verdict
    (convergence,) = [c for c in verdict.checks if c.id == "convergence"]
    chart = convergence.data["chart"]
    assert set(chart) == {"title", "x_label", "y_label", "series"}
    names = [s["name"] for s in chart["series"]]
    assert names == [f"{who}, batch {b}" for who in ("your LAMB", "AdamW") for b in (32, 256, 2048)]
    for series in chart["series"]:
        assert [x for x, _ in series["points"]] == list(range(1, 21))
        assert all(isinstance(y, float) and -6 < y < 3 for _, y in series["points"])
    # LAMB learns: its last loss at every batch size is below its first (log10 scale).
    assert all(s["points"][-1][1] < s["points"][0][1] for s in chart["series"][:3])


@pytest.mark.parametrize("mutant", mutant_params("lamb"))
def test_mutant_loses_exactly_its_checks(lamb_grader, mutant: Mutant) -> None:
    verdict = lamb_grader.grade("lamb", mutant.code)
    assert_loses(verdict, mutant)
    lost = {c.id for c in verdict.checks if c.score < c.points}
    assert all(len(c.message) > 40 for c in verdict.checks if c.id in lost)


def test_a_guard_missing_keeps_the_weights_first_step_and_says_why(lamb_grader) -> None:
    verdict = lamb_grader.grade("lamb", mutant("lamb", "no_zero_norm_guard").code)
    checks = {c.id: c for c in verdict.checks}
    # Per-tensor partial credit: the three weight matrices are right after one step, the biases are not.
    assert checks["first-step"].data == {"tensors": 6, "right": 3}
    assert checks["zero-biases"].score == 0
    assert "still all zero" in checks["zero-biases"].message and "r = 1" in checks["zero-biases"].message
