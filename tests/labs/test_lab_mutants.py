"""The v1 labs' realistic wrong solutions (``mutants/``) lose exactly the checks they should, graded for real.

Each mutant is graded in the sandbox here, at the world sizes its header names; its header says which
checks it loses (``labs.spec.mutants``).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from labs.host import template
from labs.spec.mutants import Mutant

from .conftest import labs_dir
from .mutant_cases import assert_loses, lab_mutant_params, lab_mutants, sizes

# Each mutant's header grades it at one world size, which keeps this quick: 4 is where torch.chunk returns
# too few chunks and where a star through rank 0 is not a ring; 3 has ranks that are neither first nor last.
LABS = ["collectives-p2p", "ring-allreduce"]
MUTANTS = lab_mutant_params(LABS)


@pytest.fixture(scope="module")
def one_grader() -> Iterator[object]:
    """One mode is enough here: tests/labs/test_grading.py covers forked and cold zygotes alike."""
    from labs.host.grader import Grader

    g = Grader(pool_size=2, fork_from_template=template.available())
    yield g
    g.close()


@pytest.mark.parametrize("lab", LABS)
def test_every_mutant_says_what_is_wrong_and_is_graded_at_one_size(lab: str) -> None:
    found = lab_mutants(lab)
    assert len(found) >= 4
    assert all(m.mistake and m.world_sizes and len(m.world_sizes) == 1 for m in found.values()), found


@pytest.mark.parametrize(("lab", "mutant"), MUTANTS)
def test_mutant_loses_its_checks(one_grader, lab: str, mutant: Mutant) -> None:
    v = one_grader.grade(lab, mutant.code, world_sizes=sizes(mutant))
    assert_loses(v, mutant)
    # Every mutant loses points on a check judged outside the ranks, not only on the feedback one.
    assert {c.id for c in v.checks if c.score < c.points} - {"no-builtin-collectives"}, v.message


@pytest.mark.parametrize("lab", LABS)
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


@pytest.mark.parametrize("lab", LABS)
def test_starter_imports_what_it_uses(one_grader, lab: str) -> None:
    """A first try runs into the starter's NotImplementedError, not a NameError."""
    code = (labs_dir() / lab / "starter.py").read_text()
    v = one_grader.grade(lab, code, world_sizes=[2])
    messages = " ".join(c.message for c in v.checks)
    assert "NotImplementedError" in messages and "NameError" not in messages
