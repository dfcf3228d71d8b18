"""loss-scaling graded for real: the schedule shows each usual mistake, which checks each mutant loses,
and a solution built on torch.amp.GradScaler itself at full marks."""

from __future__ import annotations

import pytest
import torch

from labs.authoring.public import load_public
from labs.spec.mutants import Mutant

from .conftest import labs_dir
from .mutant_cases import assert_loses, mutant_params, sizes
from .mutant_cases import mutant as lab_mutant

LAB = "loss-scaling"
WORLD_SIZES = [2]  # every mutant shows at two ranks; the reference is graded at 2, 3 and 4
WRONG_RULE = {"scales"}
NOT_SKIPPED = {"scales", "skipped", "parameters"}
# Checks a mutant loses on some draws only. A step taken on an overflowed gradient leaves an inf or nan
# in the parameters; behind a tanh (an inf weight saturates it, and its gradient is 0) the later
# steps stay finite and the scales stay right; elsewhere every later step overflows and backs off.

# A different structure: GradScaler itself, whose found-inf flags are all-reduced after unscale_,
# as torch.distributed.fsdp's ShardedGradScaler does.
ALTERNATIVE = """
import torch
import torch.distributed as dist


class DistributedLossScaler(torch.amp.GradScaler):
    def __init__(self, init_scale=2.0**16, growth_factor=2.0, backoff_factor=0.5, growth_interval=2000):
        super().__init__(
            "cpu",
            init_scale=init_scale,
            growth_factor=growth_factor,
            backoff_factor=backoff_factor,
            growth_interval=growth_interval,
        )

    def unscale_(self, optimizer):
        super().unscale_(optimizer)
        for found in self._per_optimizer_states[id(optimizer)]["found_inf_per_device"].values():
            dist.all_reduce(found, op=dist.ReduceOp.MAX)
"""


def checks():  # type: ignore[no-untyped-def]
    return load_public(str(labs_dir() / LAB / "checks.py"), "checks")


def test_the_rule_is_gradscalers() -> None:
    c = checks()
    overflow = [False, False, True, False, False, False, True, False]
    # k = 2: grows after two clean steps; an overflow halves and resets the count.
    assert c.simulate(overflow, 8.0, 2.0, 0.5, 2) == [8, 16, 8, 8, 16, 16, 8, 8]
    # Without the reset, step 5's clean step still counts after the overflow at step 6.
    assert c.simulate(overflow, 8.0, 2.0, 0.5, 2, reset=False) == [8, 16, 8, 8, 16, 16, 8, 16]
    scaler = torch.amp.GradScaler("cpu", init_scale=8.0, growth_factor=2.0, backoff_factor=0.5, growth_interval=2)
    w = torch.nn.Parameter(torch.ones(3, dtype=torch.float64))
    optimizer = torch.optim.SGD([w], lr=0.1)
    seen = []
    for bad in overflow:
        w.grad = None
        scaler.scale((w**2).sum()).backward()
        if bad:
            w.grad[0] = float("inf")
        scaler.step(optimizer)
        scaler.update()
        seen.append(scaler.get_scale())
    assert seen == c.simulate(overflow, 8.0, 2.0, 0.5, 2)


@pytest.mark.parametrize("world_size", [2, 3, 4])
def test_every_schedule_shows_the_usual_mistakes(world_size: int) -> None:
    c = checks()
    for seed in range(20):
        (case,) = c.cases(world_size, torch.Generator().manual_seed(seed))
        inputs, plan = case.inputs[0], c.plan_of(case)
        args = [inputs[k] for k in ("init_scale", "growth_factor", "backoff_factor", "growth_interval")]
        overflow = [str(s) in plan for s in range(c.STEPS)]
        assert sum(overflow) == c.OVERFLOWS and not overflow[0]
        kinds = {i["kind"] for items in plan.values() for i in items}
        assert kinds == {"inf", "nan"}
        # Each rank is told only about its own overflows.
        for r, mine in enumerate(case.inputs):
            assert all(i["rank"] == r for items in mine["injections"].values() for i in items)
        right = c.simulate(overflow, *args)
        assert [float(v) for v in case.expected[0]["scales"]] == right  # GradScaler itself agrees
        assert right != c.simulate(overflow, *args, reset=False)
        assert right != c.simulate(overflow, *args, every_step=True)
        assert case.expected[0]["skipped"].tolist() == overflow


def test_skipped_steps_are_read_from_the_tensors() -> None:
    d = load_public(str(labs_dir() / LAB / "checks.py"), "driver")
    w = {"a": torch.zeros(2, dtype=torch.float64)}
    moved = {"a": torch.ones(2, dtype=torch.float64)}
    nan = {"a": torch.full((2,), float("nan"), dtype=torch.float64)}
    # Unchanged: skipped. Moved: taken. Inf or nan before or after: nothing tells.
    assert d.skipped_steps(w, [w, moved, moved, nan, nan, moved]) == [True, False, True, None, None, None]


@pytest.mark.parametrize("mutant", mutant_params(LAB))
def test_mutant_loses_its_checks(one_grader, mutant: Mutant) -> None:
    v = one_grader.grade(LAB, mutant.code, world_sizes=sizes(mutant))
    assert_loses(v, mutant)


def _ambiguous_seed(rank: int) -> int:
    """A seed whose draw at world size 2 gives ``rank``'s own overflows exactly the scales of the inf
    steps alone: on that rank, missing the nan and missing the other rank's overflows look the same."""
    c = checks()
    for seed in range(200):
        (case,) = c.cases(2, torch.Generator().manual_seed(seed))
        args, overflow = c._settings(case), c._overflow(case)
        mine = c._local(case, rank)
        if mine != overflow and c.simulate(mine, *args) == c.simulate(c._inf_only(case), *args):
            return seed
    raise AssertionError("no such draw in 200 seeds")


@pytest.mark.parametrize(
    ("mutant", "named", "not_named"),
    [
        ("inf_only", "torch.isfinite", "own overflows only"),
        ("update_uses_local_flag", "own overflows only", "torch.isinf is False for nan"),
    ],
)
def test_when_two_mistakes_fit_one_rank_the_feedback_names_the_one_made(
    one_grader, mutant: str, named: str, not_named: str
) -> None:
    v = one_grader.grade(LAB, lab_mutant(LAB, mutant).code, world_sizes=WORLD_SIZES, seed=_ambiguous_seed(0))
    said = " ".join(c.message for c in v.checks if not c.passed)
    assert named in said and not_named not in said, said


def test_gradscaler_with_an_all_reduced_flag_gets_full_marks(one_grader) -> None:
    v = one_grader.grade(LAB, ALTERNATIVE, world_sizes=[2, 3, 4])
    assert v.score == v.max_score, [(c.id, c.message) for c in v.checks if not c.passed]


def test_reference_full_marks_and_starter_says_not_implemented(one_grader) -> None:
    v = one_grader.grade(LAB, (labs_dir() / LAB / "solution.py").read_text(), world_sizes=[3])
    assert v.score == v.max_score, v.message
    v = one_grader.grade(LAB, (labs_dir() / LAB / "starter.py").read_text(), world_sizes=WORLD_SIZES)
    messages = " ".join(c.message for c in v.checks)
    assert v.score == 0 and "NotImplementedError" in messages and "NameError" not in messages, messages
