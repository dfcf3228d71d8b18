"""grad-accumulation's realistic wrong solutions lose exactly the checks they should, graded for real.

Each mutant is graded in the sandbox here and must lose the checks its header names, with messages
that say what its header's ``says:`` does.
"""

from __future__ import annotations

import pytest

from labs.spec.mutants import Mutant

from .conftest import labs_dir
from .mutant_cases import assert_loses, mutant_params, sizes

LAB = "grad-accumulation"
WORLD_SIZES = [2]  # K = 4 micro-batches per rank there: syncing each one sends 4 times the bytes


# Right values without synchronising a gradient: every rank all-gathers all the micro-batches and
# backpropagates the whole global batch itself.
DATA_GATHERED = """
import torch
import torch.distributed as dist


def _everyones(t):
    every = [torch.empty_like(t) for _ in range(dist.get_world_size())]
    dist.all_gather(every, t.contiguous())
    return torch.cat(every)


def accumulate_and_sync(model, micro_batches, loss_fn):
    x = _everyones(torch.cat([x for x, _ in micro_batches]))
    y = _everyones(torch.cat([y for _, y in micro_batches]))
    model.zero_grad(set_to_none=True)
    loss_fn(model(x), y).backward()
"""


def test_values_reached_by_moving_the_data_earn_nothing(one_grader) -> None:
    v = one_grader.grade(LAB, DATA_GATHERED, world_sizes=WORLD_SIZES)
    assert v.score == 0, v.message
    assert "as many as all its examples" in v.check("gradients").message


@pytest.mark.parametrize("mutant", mutant_params(LAB))
def test_mutant_loses_its_checks(one_grader, mutant: Mutant) -> None:
    v = one_grader.grade(LAB, mutant.code, world_sizes=sizes(mutant))
    assert_loses(v, mutant)


def test_reference_sends_one_all_reduce_per_step_and_starter_says_not_implemented(one_grader) -> None:
    v = one_grader.grade(LAB, (labs_dir() / LAB / "solution.py").read_text(), world_sizes=WORLD_SIZES)
    assert v.score == v.max_score, v.message
    wire = next(c for c in v.checks if c.id == "communication").data["world_size_2"]
    assert all(0.95 < ratio < 1.1 for ratio in wire["ratio"]), wire
    v = one_grader.grade(LAB, (labs_dir() / LAB / "starter.py").read_text(), world_sizes=WORLD_SIZES)
    messages = " ".join(c.message for c in v.checks)
    assert "NotImplementedError" in messages and "NameError" not in messages
