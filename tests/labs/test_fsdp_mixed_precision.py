"""fsdp-mixed-precision, graded for real and against its emulation: the mutants lose exactly the checks
they should, a differently written correct solution gets full marks on several seeds, and on many seeds
the wrong policies' numbers sit far outside the tolerance that the right one meets.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

from labs.authoring.public import load_public
from labs.spec.mutants import Mutant

from .conftest import labs_dir
from .mutant_cases import assert_loses, mutant_params, sizes

LAB = "fsdp-mixed-precision"
WORLD_SIZES = [2]

# Correct, written differently from solution.py: the policy's defaults spelled out, the blocks
# wrapped in reverse order, a policy object per call, fully_shard's own return value returned.
ALTERNATIVE = """
import torch
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard


def policy():
    return MixedPrecisionPolicy(
        param_dtype=torch.bfloat16, reduce_dtype=torch.float32, output_dtype=None, cast_forward_inputs=True
    )


def wrap(model):
    for block in reversed(list(model.blocks)):
        fully_shard(block, mp_policy=policy(), reshard_after_forward=True)
    return fully_shard(model, mp_policy=policy())
"""


@pytest.fixture(scope="module")
def checks() -> Any:
    torch.set_num_threads(1)
    return load_public(labs_dir() / LAB / "checks.py", "checks")


@pytest.mark.parametrize("mutant", mutant_params(LAB))
def test_mutant_loses_its_checks(one_grader, mutant: Mutant) -> None:
    v = one_grader.grade(LAB, mutant.code, world_sizes=sizes(mutant))
    assert_loses(v, mutant)


def test_alternative_solution_gets_full_marks_on_several_seeds(one_grader) -> None:
    # Each grading draws a fresh seed: three runs on 2 and 4 ranks are three seeds of bit-exact (2) and
    # within-tolerance (4) agreement with the emulation, with the expected bytes on the wire.
    for _ in range(3):
        v = one_grader.grade(LAB, ALTERNATIVE, world_sizes=[2, 4])
        assert v.score == v.max_score, [c.message for c in v.checks]
        wire = next(c for c in v.checks if c.id == "communication").data
        assert all(1.0 <= r < 1.02 for n in (2, 4) for r in wire[f"world_size_{n}"]["ratio"]), wire


def test_starter_says_not_implemented(one_grader) -> None:
    v = one_grader.grade(LAB, (labs_dir() / LAB / "starter.py").read_text(), world_sizes=WORLD_SIZES)
    messages = " ".join(c.message for c in v.checks)
    assert v.score == 0 and "NotImplementedError" in messages and "NameError" not in messages


def _worst(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor], rtol: float, atol: float) -> float:
    """The largest |a - b| / (atol + rtol |b|): above 1 fails the tolerance, by that factor."""
    return max(float(((a[n] - b[n]).abs() / (atol + rtol * b[n].abs())).max()) for n in b)


@pytest.mark.parametrize("world_size", [2, 4])
def test_wrong_policies_miss_the_target_by_a_margin_on_every_seed(checks: Any, world_size: int) -> None:
    tol = checks.TOLERANCE[world_size]
    grads_tol = tol["grads"] if tol["grads"] != (0.0, 0.0) else checks.TOLERANCE[4]["grads"]
    params_tol = tol["params"] if tol["params"] != (0.0, 0.0) else checks.TOLERANCE[4]["params"]
    for seed in range(12):
        inputs = checks.shards(world_size, torch.Generator().manual_seed(seed))
        right = checks.DRIVER.emulate(inputs)
        # A bfloat16 reduction rounds every averaged gradient to bfloat16: at least 10x the gradient tolerance.
        rounded = {n: g.to(torch.bfloat16).float() for n, g in right["grads"].items()}
        assert _worst(rounded, right["grads"], *grads_tol) > 10, seed
        reduced = checks.DRIVER.emulate(inputs, reduce_dtype=torch.bfloat16)
        assert _worst(reduced["params"], right["params"], *params_tol) > 100, seed
        for param in (None, torch.float16):  # float32 training, float16 parameters
            other = checks.DRIVER.emulate(inputs, param_dtype=param)
            assert _worst(other["grads"], right["grads"], *grads_tol) > 10, (seed, param)
            assert _worst(other["params"], right["params"], *params_tol) > 100, (seed, param)
            assert not torch.equal(other["losses"][0][0], right["losses"][0][0]), (seed, param)


def test_each_rank_gets_only_its_own_rows_and_examples(checks: Any) -> None:
    """No rank can run the model or average the gradients alone: it holds its rows of the parameters and
    its own examples, and no seed."""
    inputs = checks.shards(4, torch.Generator().manual_seed(3))
    width = checks.DIMS["width"]
    assert [tuple(i["x"][0].shape) for i in inputs] == [(checks.BATCH // 4, width)] * 4
    assert all(tuple(i["params"]["embed.weight"].shape) == (width // 4, width) for i in inputs)
    firsts = [i["params"]["embed.weight"] for i in inputs]
    assert all(not torch.equal(a, b) for k, a in enumerate(firsts) for b in firsts[k + 1 :])
    assert set(inputs[0]) == {"key", "dims", "steps", "lr", "weight_decay", "params", "x", "y"}
    # The model a rank's wrap receives: its own rows, NaN in every other rank's.
    model = checks.DRIVER.build_model(checks.DIMS, inputs[1]["params"], 4, 1)
    weight = model.embed.weight.detach()
    assert torch.equal(weight[width // 4 : width // 2], firsts[1])
    assert int(weight.isnan().sum()) == weight.numel() * 3 // 4


def test_expected_bytes_are_the_statements(checks: Any) -> None:
    gather, reduce = checks.expected_bytes({"dims": checks.DIMS}, 2)
    assert (round(gather), round(reduce)) == (145_440, 349_440)
    assert "349{,}440" in (labs_dir() / LAB / "statement.md").read_text()
