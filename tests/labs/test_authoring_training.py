"""``labs.authoring.training.ranks_identical`` over hand-built result trees: labels, ``at_most`` and unfinished runs."""

from __future__ import annotations

from typing import Any

import pytest

from labs.authoring import training
from labs.host.judge import Case, Facts, GroupRun

from .gpu_facts import rank

torch = pytest.importorskip("torch")


def run(world_size: int, h: int, params: list[Any], check: str = "parameters") -> GroupRun:
    """One case judging ``check`` whose rank r returned ``params[r]`` (a str: an error, training unfinished)."""
    inputs = [{"H": h} for _ in range(world_size)]
    case = Case(check=check, fn="train", label="", inputs=inputs, expected=[None] * world_size)
    trees = [p if isinstance(p, str) else {"params": {"w": p}} for p in params]
    return GroupRun(world_size, [case], [rank(t) for t in trees], status="ok")


def same(n: int) -> list[Any]:
    return [torch.ones(3, dtype=torch.float64) for _ in range(n)]


def apart(n: int) -> list[Any]:
    return [torch.ones(3, dtype=torch.float64) * (1 + 1e-9 * r) for r in range(n)]


def by_h(g: Any, case: Case) -> str:
    return f"world size {g.world_size}, H = {case.inputs[0]['H']}"


def test_identical_ranks_pass_in_every_judged_check() -> None:
    facts = Facts([run(2, 1, same(2), "sync"), run(3, 2, same(3), "local")])
    outcome = training.ranks_identical(facts, steps=8, advice="A.", first_check="sync", checks=("sync", "local"))
    assert outcome.passed and outcome.fraction == 1.0
    assert outcome.message == "every rank ended with the same parameters"


def test_every_difference_is_named_with_its_run_and_the_advice_once() -> None:
    facts = Facts([run(2, 1, apart(2)), run(3, 1, apart(3))])
    outcome = training.ranks_identical(facts, steps=8, advice="Average them.", first_check="parameters")
    assert not outcome.passed and outcome.fraction == 0.0
    assert outcome.message.startswith('world size 2: params["w"][')
    assert "; world size 3: " in outcome.message and outcome.message.endswith(". Average them.")
    assert "on rank 1 but" in outcome.message and "after 8 steps" in outcome.message


def test_at_most_shows_the_first_run_and_counts_the_rest() -> None:
    facts = Facts([run(2, h, apart(2), "local") for h in (1, 2, 4)] + [run(3, 2, same(3), "local")])
    outcome = training.ranks_identical(
        facts, steps=8, advice="B.", first_check="local", checks=("local",), label=by_h, at_most=1
    )
    assert outcome.message.startswith("world size 2, H = 1: ")
    assert "H = 2" not in outcome.message and " (2 more runs like it). B." in outcome.message
    assert outcome.fraction == pytest.approx(1 / 4)


def test_unfinished_runs_are_named_by_label_and_send_to_the_first_check() -> None:
    facts = Facts([run(2, 2, ["boom", "boom"], "local"), run(2, 4, same(2), "local")])
    outcome = training.ranks_identical(facts, steps=8, advice="C.", first_check="local", checks=("local",), label=by_h)
    assert not outcome.passed and outcome.fraction == 0.5
    assert outcome.message == (
        "Training did not finish on every rank (world size 2, H = 2), so the ranks' parameters could not be"
        " compared: fix the error that the local check shows."
    )


def test_unfinished_world_sizes_read_as_before_without_a_label() -> None:
    facts = Facts([run(2, 1, ["boom", "boom"]), run(3, 1, ["boom"] * 3)])
    outcome = training.ranks_identical(facts, steps=8, advice="D.", first_check="gradients")
    assert outcome.message.startswith("Training did not finish on every rank (world size 2, 3), so")


def test_no_judged_case_is_a_failure_not_a_pass() -> None:
    outcome = training.ranks_identical(Facts([run(2, 1, same(2), "other")]), steps=8, advice="E.", first_check="x")
    assert not outcome.passed and outcome.message == "no cases were run for this check"
