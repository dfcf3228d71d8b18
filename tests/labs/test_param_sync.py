"""param-sync: the driver's changes are the ones the statement promises; each mutant loses the checks it should."""

from __future__ import annotations

import math

import pytest
import torch

from labs.authoring.public import load_public
from labs.spec.mutants import Mutant

from .conftest import labs_dir
from .mutant_cases import assert_loses, mutant_params, sizes

LAB = labs_dir() / "param-sync"


def driver():  # type: ignore[no-untyped-def]
    return load_public(str(LAB / "checks.py"), "driver")


def checks():  # type: ignore[no-untyped-def]
    return load_public(str(LAB / "checks.py"), "checks")


def test_the_changes_are_one_ulp_and_a_swap_that_keeps_the_sum() -> None:
    d, c = driver(), checks()
    common = c.model(b"key")
    assert sum(t.numel() for t in common.values()) == 17_616 and c.MODEL_BYTES == 70_464
    assert all(t.dtype == torch.float32 for t in common.values())
    base = d.build_model(common, c.DIMS)
    assert [n for n, _ in base.named_parameters()] == list(c.shapes())
    assert not torch.equal(c.model(b"other")["0.weight"], common["0.weight"])

    ulp = d.build_model(c.changed(common, {"kind": "ulp", "param": "2.bias", "at": 3, "up": False}), c.DIMS)
    a, b = base[2].bias.detach(), ulp[2].bias.detach()
    assert int((a != b).sum()) == 1 and bool(b[3] < a[3])
    assert bool(torch.nextafter(b[3], torch.tensor(math.inf)) == a[3])  # the next float32 below, no further

    swap = d.build_model(c.changed(common, {"kind": "swap", "param": "4.weight", "at": 0, "other": 5}), c.DIMS)
    a, b = base[4].weight.detach(), swap[4].weight.detach()
    assert int((a != b).sum()) == 2
    assert float(a.double().sum()) == float(b.double().sum())  # the exercise's fingerprint cannot tell
    # The model holds copies: the common parameters are unchanged.
    assert torch.equal(common["4.weight"], a)


@pytest.mark.parametrize("world_size", [2, 3, 4])
def test_no_rank_can_tell_from_its_inputs_whether_its_copy_differs(world_size: int) -> None:
    c = checks()
    orders = set()
    for seed in range(8):
        calls = c.cases(world_size, torch.Generator().manual_seed(seed))
        assert sorted(case.expected[0]["in_sync"] for case in calls) == [False, False, True, True]
        orders.add(tuple(case.expected[0]["in_sync"] for case in calls))
        for case in calls:
            held = [b"".join(t.numpy().tobytes() for t in i["params"].values()) for i in case.inputs]
            # In sync: every rank holds the same copy. Otherwise one rank's differs from all the others'.
            if case.expected[0]["in_sync"]:
                assert len(set(held)) == 1
            else:
                assert len(set(held)) == 2 and min(held.count(h) for h in held) == 1
            # A rank's inputs are the sizes and its copy of the parameters: nothing names a change.
            assert all(set(inputs) == {"dims", "params"} for inputs in case.inputs)
    assert len(orders) > 1  # the calls come in no fixed order


def test_answers_are_read_as_bools() -> None:
    d = driver()
    assert d.answer(True) is True and d.answer(torch.tensor(False)) is False
    assert d.answer(torch.tensor([True])) is True
    assert d.answer(torch.tensor([1, 2]).numpy().all()) is True  # a numpy bool
    assert d.answer(1).startswith("not a bool") and d.answer(torch.tensor([1.0])).startswith("not a bool")


@pytest.mark.parametrize("mutant", mutant_params("param-sync"))
def test_mutant_loses_its_checks(one_grader, mutant: Mutant) -> None:
    v = one_grader.grade("param-sync", mutant.code, world_sizes=sizes(mutant))
    assert_loses(v, mutant)
