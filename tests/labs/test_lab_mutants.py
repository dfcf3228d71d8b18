"""The v1 labs' realistic wrong solutions (``mutants/``) lose exactly the checks they should, graded for real.

``ringlab lab test`` (tests/labs/test_catalogue.py) proves that each loses points; this pins which.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from labs import template

from .conftest import labs_dir

# One world size each keeps this quick: 4 is where torch.chunk returns too few chunks and where a
# star through rank 0 is not a ring; 3 has ranks that are neither first nor last.
WORLD_SIZES = {"ring-allreduce": [4], "collectives-p2p": [3]}
LOSES = {
    "ring-allreduce": {
        # Wrong sums, but every byte went the ring's way: the wire checks hold on their own.
        "averages": {"ring-all-reduce"},
        "builtin_all_reduce": {"ring-neighbours", "communication-volume", "no-builtin-collectives"},
        "missing_all_gather": {"ring-all-reduce"},
        "result_not_written_back": {"ring-all-reduce"},
        "through_rank_zero": {"ring-neighbours", "communication-volume"},
        "torch_chunk": {"ring-all-reduce", "ring-neighbours", "communication-volume"},
    },
    "collectives-p2p": {
        "all_reduce_returns_sum": {"all-reduce"},
        "gather_by_broadcast": {"no-builtin-collectives"},
        "gather_default_dtype": {"all-reduce", "all-gather", "reduce-scatter"},
        "gather_in_arrival_order": {"all-gather"},
        "reduce_to_rank_zero": {"all-reduce"},
        "scatter_neighbours_chunk": {"reduce-scatter"},
    },
}
MUTANTS = [(lab, name) for lab, names in LOSES.items() for name in names]


@pytest.fixture(scope="module")
def one_grader() -> Iterator[object]:
    """One mode is enough here: tests/labs/test_grading.py covers forked and cold zygotes alike."""
    from labs.grader import Grader

    g = Grader(pool_size=2, fork_from_template=template.available())
    yield g
    g.close()


@pytest.mark.parametrize("lab", sorted(LOSES))
def test_every_mutant_is_listed_and_says_what_is_wrong(lab: str) -> None:
    files = sorted((labs_dir() / lab / "mutants").glob("*.py"))
    assert len(files) >= 4
    assert {f.stem for f in files} == set(LOSES[lab])
    for f in files:
        assert f.read_text().startswith("# "), f"{f}: the first line is a comment saying what is wrong"


@pytest.mark.parametrize(("lab", "mutant"), MUTANTS)
def test_mutant_loses_its_checks(one_grader, lab: str, mutant: str) -> None:
    code = (labs_dir() / lab / "mutants" / f"{mutant}.py").read_text()
    v = one_grader.grade(lab, code, world_sizes=WORLD_SIZES[lab])
    assert v.score < v.max_score
    assert {c.id for c in v.checks if not c.passed} == LOSES[lab][mutant], v.message


@pytest.mark.parametrize("lab", sorted(LOSES))
def test_starter_imports_what_it_uses(one_grader, lab: str) -> None:
    """A first try runs into the starter's NotImplementedError, not a NameError."""
    code = (labs_dir() / lab / "starter.py").read_text()
    v = one_grader.grade(lab, code, world_sizes=[2])
    messages = " ".join(c.message for c in v.checks)
    assert "NotImplementedError" in messages and "NameError" not in messages
