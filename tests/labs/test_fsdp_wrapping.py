"""fsdp-wrapping, graded for real: the mutants lose exactly the checks they should, a differently
written correct solution gets full marks, and the expected figures are the statement's.

Each mutant is graded in the sandbox here and must lose the checks its header names, with messages
that say what its header's ``says:`` does.
"""

from __future__ import annotations

import pytest

from labs.authoring.public import load_public
from labs.spec.mutants import Mutant

from .conftest import labs_dir
from .mutant_cases import assert_loses, mutant_params, sizes

LAB = "fsdp-wrapping"
WORLD_SIZES = [2]

# Correct, but written differently from solution.py: explicit modules in another order, the
# default passed explicitly, and fully_shard's own return value returned.
ALTERNATIVE = """
from torch.distributed.fsdp import fully_shard


def wrap(model, strategy):
    inner = {
        "per-layer": [model.head, model.embed]
        + [getattr(block, name) for block in reversed(model.blocks) for name in ("down", "up")],
        "per-block": list(model.blocks)[::-1],
        "whole-model": [],
    }[strategy]
    for module in inner:
        fully_shard(module, reshard_after_forward=True)
    return fully_shard(model)
"""


# Correct, and different again: the units chosen by a helper, modules matched by exact type, and
# fully_shard's default mixed-precision policy passed explicitly.
POLICY = """
from torch import nn
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard


def units(model, strategy):
    if strategy == "whole-model":
        return []
    if strategy == "per-block":
        return [model.blocks[i] for i in range(len(model.blocks))]
    return [m for m in model.modules() if type(m) is nn.Linear]


def wrap(model, strategy):
    policy = MixedPrecisionPolicy()
    for module in units(model, strategy):
        fully_shard(module, mp_policy=policy)
    fully_shard(model, mp_policy=policy)
    return model
"""


@pytest.mark.parametrize("mutant", mutant_params(LAB))
def test_mutant_loses_its_checks(one_grader, mutant: Mutant) -> None:
    v = one_grader.grade(LAB, mutant.code, world_sizes=sizes(mutant))
    assert_loses(v, mutant)


def test_alternative_solution_gets_full_marks_with_the_figures(one_grader) -> None:
    v = one_grader.grade(LAB, ALTERNATIVE, world_sizes=[2, 3])
    assert v.score == v.max_score, [c.message for c in v.checks]
    gather = next(c for c in v.checks if c.id == "all-gather")
    rows = {(r["world_size"], r["strategy"]): r for r in gather.data["table"]}
    assert set(rows) == {(n, s) for n in (2, 3) for s in ("per-layer", "per-block", "whole-model")}
    for n in (2, 3):
        layer, block, whole = (rows[n, s] for s in ("per-layer", "per-block", "whole-model"))
        # Memory falls and communication grows as the units get smaller.
        assert layer["unsharded_peak_bytes"] < block["unsharded_peak_bytes"] < whole["unsharded_peak_bytes"]
        gathers = [r["all_gather_bytes_per_rank"] for r in (layer, block, whole)]
        assert gathers[0] > gathers[1] > gathers[2]
        for r in (layer, block, whole):
            assert 1.0 <= r["all_gather_bytes_per_rank"] / r["expected_all_gather_bytes_per_rank"] < 1.03, r
    assert gather.data["chart"]["series"][0]["name"] == "all-gather bytes per rank, 3 ranks (KiB)"
    peak = next(c for c in v.checks if c.id == "peak-memory")
    memory = {r["strategy"]: r for r in peak.data["memory"]}
    assert set(memory) == {"per-layer", "per-block"}
    # Measured by the kernel: per-layer holds less than per-block, each within its bound.
    assert memory["per-layer"]["peak_bytes"] < memory["per-block"]["peak_bytes"]
    assert all(r["peak_bytes"] <= r["allowed_bytes"] for r in memory.values()), memory
    assert "measured by the kernel" in peak.message
    # Described inside the rank, so feedback without points.
    assert v.check("units").points == 0 and v.check("units").passed


def test_a_differently_written_solution_gets_full_marks(one_grader) -> None:
    v = one_grader.grade(LAB, POLICY, world_sizes=WORLD_SIZES)
    assert v.score == v.max_score, [c.message for c in v.checks]


def test_starter_says_not_implemented(one_grader) -> None:
    v = one_grader.grade(LAB, (labs_dir() / LAB / "starter.py").read_text(), world_sizes=WORLD_SIZES)
    messages = " ".join(c.message for c in v.checks)
    assert v.score == 0 and "NotImplementedError" in messages and "NameError" not in messages


def test_expected_figures_are_the_statements() -> None:
    checks = load_public(labs_dir() / LAB / "checks.py", "checks")
    model = checks.DRIVER.build_model(0, checks.DIMS)
    statement = (labs_dir() / LAB / "statement.md").read_text()
    for strategy, peak, gathered in (
        ("per-layer", 118_080, 1_395_840),
        ("per-block", 466_560, 1_163_520),
        ("whole-model", 698_880, 698_880),
    ):
        assert checks.peak_bytes(model, strategy) == peak
        assert checks.gathered_bytes(model, strategy) == gathered
        assert f"{peak:,}" in statement and f"{gathered:,}" in statement and f"{gathered // 2:,}" in statement
    assert checks.unit_parameters(model, "per-layer")["(root)"] == ["norm.weight", "norm.bias"]
    assert checks.unit_parameters(model, "per-block")["(root)"] == [
        "embed.weight",
        "embed.bias",
        "norm.weight",
        "norm.bias",
        "head.weight",
        "head.bias",
    ]
