"""The tensor-parallel lab on real gloo ranks: the reference gets every check, each mutant loses the ones it should.

Runs the lab's public driver in forked ranks (no sandbox; ``tp_ranks``), compares each rank's
result with ``checks.expected`` and judges the kernel's byte counts with ``checks.wire_verdict``,
so the driver, the reference and the wire bounds are checked apart from the sandbox, and each
mutant is shown to lose exactly the checks it should (``ringlab lab test`` only asks that it lose points).
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

from labs import trees
from labs.spec import DEFAULT_CONTENT

from . import tp_ranks

LAB = DEFAULT_CONTENT / "tensor-parallel"
# Which checks of lab.yaml each result key feeds, as the cases' ``parts`` say.
PARTS = {
    "forward": ("hidden", "output"),
    "sharding": ("column_weights", "row_weights"),
    "input-gradient": ("grad_x",),
    "weight-gradients": ("grads",),
}
LOSES = {
    "autograd_all_reduce": {"input-gradient", "weight-gradients", "communication"},
    "column_splits_inputs": {"forward", "sharding", "input-gradient", "weight-gradients", "communication"},
    "full_column_weight": {"sharding", "weight-gradients"},
    "gathers_weight": {"communication"},
    "no_backward_all_reduce": {"input-gradient", "communication"},
    "row_bias_on_every_rank": {"forward"},
    "strided_shards": {"forward", "sharding", "weight-gradients"},
}


@pytest.fixture(scope="module")
def lab() -> tuple[Any, Any]:
    torch.set_num_threads(1)
    return tp_ranks.load_module(LAB / "checks.py", "tp_checks"), tp_ranks.load_module(LAB / "driver.py", "tp_driver")


def lost_checks(checks: Any, driver: Any, code: str, world_size: int, seed: int) -> set[str]:
    """The checks a submission fails at one world size, judged as the lab's checks.py judges them."""
    calls, expected = [], []
    for key, dims in (("mlp", checks.MEASURED), ("no-bias", checks.SMALL)):
        problem = {"seed": seed, **dims}
        forward, backward = checks.expected(driver, problem, world_size)
        for name, want in (("forward", forward), ("backward", backward)):
            calls.append(tp_ranks.Call(name, [{"key": key, "problem": problem}] * world_size))
            expected.append(want)
    run = tp_ranks.run(code, LAB / "driver.py", world_size, calls)
    tol = dict.fromkeys(checks.KEYS, checks.TOLERANCE)
    lost = set()
    for i, want in enumerate(expected):
        for r, got in enumerate(run.results[i]):
            for check, keys in PARTS.items():
                part = [k for k in keys if k in want[r]]
                if part and (
                    isinstance(got, str) or trees.compare(trees.select(want[r], part), trees.select(got, part), tol)
                ):
                    lost.add(check)
    for i, phase in ((0, "forward"), (1, "backward")):
        if checks.wire_verdict(world_size, phase, calls[i].inputs[0]["problem"], run.sent[i])[1]:
            lost.add("communication")
    return lost


@pytest.mark.parametrize("world_size", [2, 3, 4])
def test_reference_passes_every_check(lab: tuple[Any, Any], world_size: int) -> None:
    checks, driver = lab
    code = (LAB / "solution.py").read_text()
    assert lost_checks(checks, driver, code, world_size, seed=1000 + world_size) == set()


@pytest.mark.parametrize("mutant", sorted(LOSES))
def test_mutant_loses_its_checks(lab: tuple[Any, Any], mutant: str) -> None:
    checks, driver = lab
    code = (LAB / "mutants" / f"{mutant}.py").read_text()
    assert code.startswith("# "), "a mutant's first line says what is wrong"
    assert lost_checks(checks, driver, code, 3, seed=77) == LOSES[mutant]


def test_every_mutant_is_listed() -> None:
    assert {p.stem for p in (LAB / "mutants").glob("*.py")} == set(LOSES)


def test_wire_bounds_on_counts(lab: tuple[Any, Any]) -> None:
    checks, _ = lab
    problem = {"seed": 0, **checks.MEASURED}
    theory = 2 * 3 * 64 * 384 * 8 / 4
    assert checks.wire_verdict(4, "forward", problem, [round(theory * 1.003)] * 4)[1] is None
    too_many = checks.wire_verdict(4, "forward", problem, [round(theory * 2)] * 4)[1]
    assert too_many and "rank 0 sent 589,824 bytes" in too_many and "294,912" in too_many
    too_few = checks.wire_verdict(4, "backward", problem, [0, 0, 0, 0])[1]
    assert too_few and "gradient of x" in too_few and "all-reduce the gradient of its input" in too_few
