"""The tensor-parallel lab on real gloo ranks: the reference gets every check, each mutant loses the ones it should.

Runs the lab's public driver in forked ranks (no sandbox; ``tp_ranks``) on the lab's own cases,
compares each rank's result with the case's expected one and judges the kernel's byte counts with
``checks.wire_verdict``, so the driver, the reference and the wire bounds are checked apart from
the sandbox, and each mutant is shown to lose exactly the checks it should (its header's,
as ``ringlab lab test`` checks them in the sandbox).
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

from labs.host.judge import settle
from labs.rank import trees
from labs.spec import DEFAULT_CONTENT, load_lab
from labs.spec.mutants import Mutant

from . import tp_ranks
from .mutant_cases import assert_lost, mutant_params

LAB = DEFAULT_CONTENT / "tensor-parallel"
# Which checks of lab.yaml each result key feeds, as the cases' ``parts`` say.
PARTS = {
    "forward": ("hidden", "output"),
    "sharding": ("column_weights", "row_weights"),
    "input-gradient": ("grad_x",),
    "weight-gradients": ("grads",),
}
FEEDBACK = {"sharding"}  # read from the rank's own objects: shown, never scored


@pytest.fixture(scope="module")
def lab() -> tuple[Any, Any]:
    torch.set_num_threads(1)
    return tp_ranks.load_module(LAB / "checks.py", "tp_checks"), tp_ranks.load_module(LAB / "driver.py", "tp_driver")


def lost_checks(checks: Any, code: str, world_size: int, seed: int) -> set[str]:
    """The checks a submission fails at one world size, judged as the lab's checks.py judges them."""
    cases = checks.cases(world_size, torch.Generator().manual_seed(seed))
    settle(cases)  # the references a lab computes ``later``, in place as the grader puts them
    run = tp_ranks.run(code, LAB / "driver.py", world_size, [tp_ranks.Call(c.driver, c.inputs) for c in cases])
    tol = dict.fromkeys(checks.KEYS, checks.TOLERANCE)
    lost = set()
    for i, case in enumerate(cases):
        wrong = set()
        for r, got in enumerate(run.results[i]):
            want = case.expected[r]
            for check, keys in PARTS.items():
                part = [k for k in keys if k in want]
                if part and (
                    isinstance(got, str) or trees.compare(trees.select(want, part), trees.select(got, part), tol)
                ):
                    wrong.add(check)
        lost |= wrong
        # A measured call's bytes count only if its scored results are right (rules.wire_per_phase).
        if case.measure and (
            wrong - FEEDBACK or checks.wire_verdict(world_size, case.driver, case.inputs[0]["problem"], run.sent[i])[1]
        ):
            lost.add("communication")
    return lost


@pytest.mark.parametrize("world_size", [2, 3, 4])
def test_reference_passes_every_check(lab: tuple[Any, Any], world_size: int) -> None:
    checks, _ = lab
    code = (LAB / "solution.py").read_text()
    assert lost_checks(checks, code, world_size, seed=1000 + world_size) == set()


@pytest.mark.parametrize("mutant", mutant_params("tensor-parallel"))
def test_mutant_loses_its_checks(lab: tuple[Any, Any], mutant: Mutant) -> None:
    checks, _ = lab
    assert_lost(lost_checks(checks, mutant.code, 3, seed=77), mutant)
    assert mutant.loses - FEEDBACK, "every mutant loses points on a check judged outside the ranks"


def test_what_a_layer_keeps_earns_no_points() -> None:
    points = {c.id: c.points for c in load_lab(LAB).spec.checks}
    assert all(points[c] == 0 for c in FEEDBACK) and sum(points.values()) == 10


def test_each_rank_holds_only_its_own_chunks(lab: tuple[Any, Any]) -> None:
    checks, _ = lab
    forward, backward = checks.cases(4, torch.Generator().manual_seed(5))[:2]
    hidden = checks.MEASURED["d_hidden"]
    for inputs in forward.inputs:
        assert inputs["w1"].shape == (hidden // 4, checks.MEASURED["d_in"])
        assert inputs["w2"].shape == (checks.MEASURED["d_out"], hidden // 4)
        assert set(inputs) == {"key", "problem", "w1", "b1", "w2"}
    # Different ranks, different weights: none can be drawn from another's inputs or from the seed.
    firsts = [i["w1"] for i in forward.inputs]
    assert all(not torch.equal(a, b) for k, a in enumerate(firsts) for b in firsts[k + 1 :])
    assert all(set(i) == {"key", "problem"} for i in backward.inputs)


def test_the_driver_pads_a_chunk_with_nan(lab: tuple[Any, Any]) -> None:
    _, driver = lab
    assert [driver.chunk_slice(10, 4, r) for r in range(4)] == [slice(0, 3), slice(3, 6), slice(6, 9), slice(9, 10)]
    full = torch.arange(24.0, dtype=torch.float64).view(4, 6)
    for r in range(3):
        mine = full.chunk(3, dim=1)[r]
        got = driver.padded(mine, 1, 6, 3, r)
        assert got.shape == full.shape and torch.equal(got.chunk(3, dim=1)[r], mine)
        assert int(got.isnan().sum()) == full.numel() - mine.numel()
    assert driver.padded(None, 0, 6, 3, 0) is None


def test_wire_bounds_on_counts(lab: tuple[Any, Any]) -> None:
    checks, _ = lab
    problem = {"seed": 0, **checks.MEASURED}
    theory = 2 * 3 * 64 * 384 * 8 / 4
    assert checks.wire_verdict(4, "forward", problem, [round(theory * 1.003)] * 4)[1] is None
    too_many = checks.wire_verdict(4, "forward", problem, [round(theory * 2)] * 4)[1]
    assert too_many and "rank 0 sent 589,824 bytes" in too_many and "294,912" in too_many
    too_few = checks.wire_verdict(4, "backward", problem, [0, 0, 0, 0])[1]
    assert too_few and "gradient of x" in too_few and "all-reduce the gradient of its input" in too_few
