"""memory-estimate's mutants lose exactly the checks they should, and the expected figures never come from the rank."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from labs.authoring.public import load_public
from labs.host import template
from labs.spec.mutants import Mutant

from .conftest import labs_dir
from .mutant_cases import assert_loses, mutant_params, sizes

LAB = "memory-estimate"


@pytest.fixture(scope="module")
def grader() -> Iterator[object]:
    from labs.host.grader import Grader

    g = Grader(pool_size=2, fork_from_template=template.available())
    yield g
    g.close()


@pytest.mark.parametrize("mutant", mutant_params(LAB))
def test_mutant_loses_its_checks(grader, mutant: Mutant) -> None:
    v = grader.grade(LAB, mutant.code, world_sizes=sizes(mutant))
    assert_loses(v, mutant)
    assert v.status == "failed", v.message


REAL_STEP = """
import contextlib
import copy

import torch


@contextlib.contextmanager
def flag(model, value):
    old = model.checkpointing
    model.checkpointing = value
    try:
        yield
    finally:
        model.checkpointing = old


def estimate_memory_consumption(model, batch, checkpointing):
    twin = copy.deepcopy(model)
    twin(batch).float().pow(2).mean().backward()
    gradients = sum(p.grad.numel() * p.grad.element_size() for p in twin.parameters() if p.grad is not None)
    optimizer = torch.optim.AdamW(twin.parameters(), lr=1e-3)
    optimizer.step()
    state = sum(s[k].numel() * s[k].element_size() for s in optimizer.state.values() for k in ("exp_avg", "exp_avg_sq"))
    own = {p.untyped_storage().data_ptr() for p in model.parameters()}
    seen = {}

    def pack(t):
        storage = t.untyped_storage()
        if storage.data_ptr() not in own:
            seen[storage.data_ptr()] = storage.nbytes()
        return t

    with flag(model, checkpointing), torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        model(batch)
    figures = {
        "parameters": sum(p.nbytes for p in model.parameters()),
        "gradients": gradients,
        "optimizer_state": state,
        "activations": sum(seen.values()),
    }
    figures["total"] = sum(figures.values())
    return figures
"""

# Correct, and short: the public driver's own count of the activations, arithmetic for the rest.
PUBLIC_COUNT = """
import driver


def estimate_memory_consumption(model, batch, checkpointing):
    params = sum(p.numel() * p.element_size() for p in model.parameters())
    trainable = sum(p.numel() * p.element_size() for p in model.parameters() if p.requires_grad)
    before, model.checkpointing = model.checkpointing, checkpointing
    activations, _ = driver.activation_bytes(model, batch)
    model.checkpointing = before
    return {
        "parameters": params,
        "gradients": trainable,
        "optimizer_state": 2 * trainable,
        "activations": activations,
        "total": params + 3 * trainable + activations,
    }
"""


@pytest.mark.parametrize("code", [REAL_STEP, PUBLIC_COUNT], ids=["real-step", "public-count"])
def test_other_correct_solutions_get_full_marks(grader, code: str) -> None:
    v = grader.grade(LAB, code)
    assert v.status == "passed" and v.score == v.max_score, [c.message for c in v.checks]


def test_numpy_figures_are_accepted(grader) -> None:
    code = (labs_dir() / LAB / "solution.py").read_text()
    code = code.replace("    return {\n", "    import numpy\n\n    return {k: numpy.int64(v) for k, v in {\n")
    code = code.rstrip() + ".items()}\n"
    v = grader.grade(LAB, code)
    assert v.status == "passed" and v.score == v.max_score, [c.message for c in v.checks]


def test_shrinking_the_model_handed_over_earns_nothing(grader) -> None:
    """The student's code owns the model it is given: halving it there leaves the grader's figures alone."""
    code = (labs_dir() / LAB / "solution.py").read_text()
    first = "    params = list(model.parameters())\n"
    code = code.replace(first, "    model.half()\n" + first)
    assert "model.half()" in code
    v = grader.grade(LAB, code)
    assert v.status == "failed", v.message
    lost = {c.id for c in v.checks if not c.passed}
    assert {"parameters", "gradients", "optimizer-state", "total"} <= lost, [c.message for c in v.checks]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_grader_figures_are_a_real_backward_and_adamw_step(seed: int) -> None:
    """The counts the checks grade against equal ``driver.measure``: a real backward and torch.optim.AdamW step."""
    import torch

    from labs.host.grader import Grader

    _, checks = Grader.load_checks(labs_dir() / LAB)
    driver = load_public(labs_dir() / LAB / "checks.py", "driver")
    torch.manual_seed(0)
    for config in checks._configs(torch.Generator().manual_seed(seed)):
        for flag in (False, True):
            measured = driver.measure(config, flag)
            assert {k: measured[k] for k in (*checks.FIGURES, "total")} == checks.expected_figures(config, flag)


def test_starter_runs_and_loses_points(grader) -> None:
    v = grader.grade(LAB, (labs_dir() / LAB / "starter.py").read_text())
    assert v.status == "failed" and 0 < v.score < v.max_score, v.message
    assert {c.id for c in v.checks if c.passed} == {"parameters"}
