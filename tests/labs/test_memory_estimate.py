"""memory-estimate's mutants lose exactly the checks they should, and the measurement cannot be talked round."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from labs import template

from .conftest import labs_dir

LAB = "memory-estimate"
LOSES = {
    "checkpointing_ignored": {"activations", "checkpointing", "total"},
    "counts_weights": {"activations", "checkpointing", "total"},
    "forgets_gradients": {"gradients", "total"},
    "numel_not_bytes": {"parameters", "gradients", "optimizer-state", "total"},
    "one_example": {"activations", "checkpointing", "total"},
    "optimizer_one_moment": {"optimizer-state", "total"},
}


@pytest.fixture(scope="module")
def grader() -> Iterator[object]:
    from labs.grader import Grader

    g = Grader(pool_size=2, fork_from_template=template.available())
    yield g
    g.close()


def test_every_mutant_is_listed_and_says_what_is_wrong() -> None:
    files = sorted((labs_dir() / LAB / "mutants").glob("*.py"))
    assert {f.stem for f in files} == set(LOSES)
    assert all(f.read_text().startswith("# ") for f in files)


@pytest.mark.parametrize("mutant", sorted(LOSES))
def test_mutant_loses_its_checks(grader, mutant: str) -> None:
    v = grader.grade(LAB, (labs_dir() / LAB / "mutants" / f"{mutant}.py").read_text())
    assert v.status == "failed", v.message
    assert {c.id for c in v.checks if not c.passed} == LOSES[mutant], [c.message for c in v.checks]


def test_numpy_figures_are_accepted(grader) -> None:
    code = (labs_dir() / LAB / "solution.py").read_text()
    code = code.replace("    return {\n", "    import numpy\n\n    return {k: numpy.int64(v) for k, v in {\n")
    code = code.rstrip() + ".items()}\n"
    v = grader.grade(LAB, code)
    assert v.status == "passed" and v.score == v.max_score, [c.message for c in v.checks]


def test_patching_the_drivers_measurement_earns_nothing(grader) -> None:
    """The student's module shares the rank with the driver: figures it fakes there disagree with the grader's."""
    code = (labs_dir() / LAB / "mutants" / "one_example.py").read_text()
    code += (
        "\nimport driver\n\n_real = driver.activation_bytes\n"
        "driver.activation_bytes = lambda model, batch: _real(model, batch[:1])\n"
    )
    v = grader.grade(LAB, code)
    assert v.score == 0, [c.message for c in v.checks]
    assert "leave torch and the driver unchanged" in v.checks[0].message


def test_starter_runs_and_loses_points(grader) -> None:
    v = grader.grade(LAB, (labs_dir() / LAB / "starter.py").read_text())
    assert v.status == "failed" and 0 < v.score < v.max_score, v.message
    assert {c.id for c in v.checks if c.passed} == {"parameters"}
