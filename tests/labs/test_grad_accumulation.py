"""grad-accumulation's realistic wrong solutions lose exactly the checks they should, graded for real.

Each mutant is graded in the sandbox here; ``LOSES`` pins the checks it loses and what its messages
say to do.
"""

from __future__ import annotations

import pytest

from .conftest import labs_dir

LAB = "grad-accumulation"
WORLD_SIZES = [2]  # K = 4 micro-batches per rank there: syncing each one sends 4 times the bytes
# Wrong values lose the training's bytes too: they count only for training whose values are right.
LOSES = {
    "grads_not_zeroed": ({"parameters", "communication"}, "zero gradients"),
    "last_micro_batch_only": ({"gradients", "parameters", "communication"}, "last micro-batch only"),
    "never_synchronised": ({"gradients", "parameters", "ranks-identical", "communication"}, "nothing was averaged"),
    "no_world_size_division": ({"gradients", "parameters", "communication"}, "divide by dist.get_world_size()"),
    "sum_not_mean_over_k": ({"gradients", "parameters", "communication"}, "K = 4 times too large"),
    "sync_every_micro_batch": ({"communication"}, "one all-reduce per micro-batch"),
}


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


def test_every_mutant_is_listed() -> None:
    assert {f.stem for f in (labs_dir() / LAB / "mutants").glob("*.py")} == set(LOSES)


@pytest.mark.parametrize("mutant", sorted(LOSES))
def test_mutant_loses_its_checks(one_grader, mutant: str) -> None:
    code = (labs_dir() / LAB / "mutants" / f"{mutant}.py").read_text()
    v = one_grader.grade(LAB, code, world_sizes=WORLD_SIZES)
    lost, advice = LOSES[mutant]
    assert {c.id for c in v.checks if not c.passed} == lost, v.message
    assert advice in " ".join(c.message for c in v.checks if not c.passed)


def test_reference_sends_one_all_reduce_per_step_and_starter_says_not_implemented(one_grader) -> None:
    v = one_grader.grade(LAB, (labs_dir() / LAB / "solution.py").read_text(), world_sizes=WORLD_SIZES)
    assert v.score == v.max_score, v.message
    wire = next(c for c in v.checks if c.id == "communication").data["world_size_2"]
    assert all(0.95 < ratio < 1.1 for ratio in wire["ratio"]), wire
    v = one_grader.grade(LAB, (labs_dir() / LAB / "starter.py").read_text(), world_sizes=WORLD_SIZES)
    messages = " ".join(c.message for c in v.checks)
    assert "NotImplementedError" in messages and "NameError" not in messages
