"""The v1 labs' realistic wrong solutions (``mutants/``) lose exactly the checks they should, graded for real.

Each mutant is graded in the sandbox here; ``LOSES`` pins the checks it loses (the
catalogue test checks that it names every mutant).
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
        # Wrong sums: every byte went the ring's way, but bytes count only for a call that sums right.
        "averages": {"ring-all-reduce", "ring-neighbours", "communication-volume"},
        # Loses points on the wire (gloo's own ring sends to rank - 1); the built-in collective is
        # also named by the feedback check, which earns no points.
        "builtin_all_reduce": {"ring-neighbours", "communication-volume", "no-builtin-collectives"},
        "missing_all_gather": {"ring-all-reduce", "ring-neighbours", "communication-volume"},
        "result_not_written_back": {"ring-all-reduce", "ring-neighbours", "communication-volume"},
        "through_rank_zero": {"ring-neighbours", "communication-volume"},
        "torch_chunk": {"ring-all-reduce", "ring-neighbours", "communication-volume"},
    },
    "collectives-p2p": {
        "all_reduce_returns_sum": {"all-reduce"},
        "gather_default_dtype": {"all-reduce", "all-gather", "reduce-scatter"},
        "gather_in_arrival_order": {"all-gather"},
        "gather_returns_list": {"all-gather"},
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
    # Every mutant loses points on a check judged outside the ranks, not only on the feedback one.
    assert {c.id for c in v.checks if c.score < c.points} - {"no-builtin-collectives"}, v.message


@pytest.mark.parametrize("lab", sorted(LOSES))
def test_in_rank_collective_counts_earn_no_points(lab: str) -> None:
    """The built-in-collectives signal is counted inside the ranks, where student code can rewrite it."""
    from labs.spec import load_lab

    spec = load_lab(labs_dir() / lab).spec
    assert next(c for c in spec.checks if c.id == "no-builtin-collectives").points == 0


ZEROS_AROUND_THE_RING = """
import torch
import torch.distributed as dist


def ring_all_reduce(tensor):
    rank, n = dist.get_rank(), dist.get_world_size()
    send = torch.zeros(2 * (n - 1) * tensor.numel() // n, dtype=tensor.dtype)
    recv = torch.empty_like(send)
    ops = [dist.P2POp(dist.isend, send, (rank + 1) % n), dist.P2POp(dist.irecv, recv, (rank - 1) % n)]
    for req in dist.batch_isend_irecv(ops):
        req.wait()
"""


def test_a_rings_worth_of_bytes_that_sums_nothing_earns_nothing(one_grader) -> None:
    v = one_grader.grade("ring-allreduce", ZEROS_AROUND_THE_RING, world_sizes=[3])
    assert v.score == 0, v.message
    assert "the bytes look right, but the measured call's sums are wrong" in v.check("communication-volume").message


def test_a_builtin_collective_gets_the_p2p_values_and_only_feedback(one_grader) -> None:
    """dist.all_gather in collectives-p2p: right results, so every point; the feedback check names the call."""
    code = (labs_dir() / "collectives-p2p" / "solution.py").read_text()
    code = code.replace(
        "def all_gather(tensor: torch.Tensor) -> torch.Tensor:",
        "def all_gather(tensor: torch.Tensor) -> torch.Tensor:\n"
        "    parts = [torch.empty_like(tensor) for _ in range(dist.get_world_size())]\n"
        "    dist.all_gather(parts, tensor)\n"
        "    return torch.cat(parts, dim=0)\n\n\ndef _unused(tensor):",
    )
    v = one_grader.grade("collectives-p2p", code, world_sizes=[3])
    assert v.score == v.max_score, v.message
    feedback = v.check("no-builtin-collectives")
    assert not feedback.passed and "all_gather" in feedback.message and "no points" in feedback.message


@pytest.mark.parametrize("lab", sorted(LOSES))
def test_starter_imports_what_it_uses(one_grader, lab: str) -> None:
    """A first try runs into the starter's NotImplementedError, not a NameError."""
    code = (labs_dir() / lab / "starter.py").read_text()
    v = one_grader.grade(lab, code, world_sizes=[2])
    messages = " ".join(c.message for c in v.checks)
    assert "NotImplementedError" in messages and "NameError" not in messages
