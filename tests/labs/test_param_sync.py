"""param-sync: the driver's changes are the ones the statement promises; each mutant loses the checks it should."""

from __future__ import annotations

import math

import pytest
import torch

from labs.public import load_public

from .conftest import labs_dir

LAB = labs_dir() / "param-sync"
LOSES = {
    "allclose_fingerprint": {"answers"},  # one ulp is within any tolerance
    "first_parameter_only": {"answers"},  # the one-ulp change is never in the first parameter
    "gather_parameters": {"communication"},  # right answers, 4.3 MB per rank
    "only_rank0": {"answers", "agreement"},  # the ranks disagree: the wire holds
    "sum_fingerprint": {"answers"},  # the swap keeps the sum
}


def driver():  # type: ignore[no-untyped-def]
    return load_public(str(LAB / "checks.py"), "driver")


def test_the_changes_are_one_ulp_and_a_swap_that_keeps_the_sum() -> None:
    d = driver()
    dims = [512, 1024, 512, 64]
    base = d.build_model(7, dims)
    assert sum(p.numel() for p in base.parameters()) == 1_082_944
    assert all(p.dtype == torch.float32 for p in base.parameters())
    same = d.build_model(7, dims)
    assert all(torch.equal(a, b) for a, b in zip(base.parameters(), same.parameters(), strict=True))
    assert not torch.equal(d.build_model(8, dims)[0].weight, base[0].weight)

    ulp = d.build_model(7, dims)
    d.apply_change(ulp, {"kind": "ulp", "param": "2.bias", "index": 3, "up": False})
    a, b = base[2].bias.detach(), ulp[2].bias.detach()
    assert int((a != b).sum()) == 1 and bool(b[3] < a[3])
    assert bool(torch.nextafter(b[3], torch.tensor(math.inf)) == a[3])  # the next float32 below, no further

    swap = d.build_model(7, dims)
    d.apply_change(swap, {"kind": "swap", "param": "4.weight", "index": 0, "other": 5})
    a, b = base[4].weight.detach(), swap[4].weight.detach()
    assert int((a != b).sum()) == 2
    assert float(a.double().sum()) == float(b.double().sum())  # the exercise's fingerprint cannot tell
    # The built model is a copy: changing it leaves the next call's model as drawn.
    assert torch.equal(d.build_model(7, dims)[4].weight, a)


def test_answers_are_read_as_bools() -> None:
    d = driver()
    assert d.answer(True) is True and d.answer(torch.tensor(False)) is False
    assert d.answer(torch.tensor([True])) is True
    assert d.answer(torch.tensor([1, 2]).numpy().all()) is True  # a numpy bool
    assert d.answer(1).startswith("not a bool") and d.answer(torch.tensor([1.0])).startswith("not a bool")


def test_every_mutant_is_listed() -> None:
    assert {f.stem for f in (LAB / "mutants").glob("*.py")} == set(LOSES)


@pytest.mark.parametrize("mutant", sorted(LOSES))
def test_mutant_loses_its_checks(one_grader, mutant: str) -> None:
    v = one_grader.grade("param-sync", (LAB / "mutants" / f"{mutant}.py").read_text(), world_sizes=[3])
    assert v.score < v.max_score
    assert {c.id for c in v.checks if not c.passed} == LOSES[mutant], v.message
