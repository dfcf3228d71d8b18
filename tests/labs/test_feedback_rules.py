"""Feedback that names the real mistake: one test (or a few) per rule, each showing the old message's fault gone.

- a float32 near-miss prints two different numbers, its error, and says it looks like lost precision;
- a known-mistake variant that equals the reference where it is compared is never named;
- bytes on the wire are described as what they show, causes as possibilities; passing
  ``reshard_after_forward=True`` (as the fsdp-wrapping statement once said was the default) keeps the
  all-gather check;
- partial credit is the share of the points, to one decimal, shown as 7.5/10 and 10/10;
- a driver's placeholder for missing state is reported as missing, with the phase, and whether it was saved;
- a single-rank lab counts its results as what its cases are, not as ranks.
"""

from __future__ import annotations

import io
from typing import Any

import pytest
import torch

from labs.authoring.public import load_public
from labs.host.grader import points
from labs.host.judge import Case, Facts, GroupRun, Outcome, RankRun, case_failure, correctness, counted
from labs.rank import trees
from labs.verdict import points_number, points_share, show_points, total_points

from .conftest import labs_dir, solution


def saved(tree: Any) -> bytes:
    buffer = io.BytesIO()
    torch.save(tree, buffer)
    return buffer.getvalue()


def one_rank(case: Case, tree: Any, phase: str | None = None) -> Facts:
    """The facts of a run in which rank 0 of a one-rank group returned ``tree`` for ``case``."""
    group = GroupRun(1, [case], [RankRun(results={0: saved(tree)})], status="passed", phase=phase)
    return Facts([group])


# --- values that print the same ----------------------------------------------------------------


def test_a_float32_near_miss_prints_two_different_values_and_says_it_looks_like_lost_precision() -> None:
    want = torch.tensor([0.5, -0.019998000123456, 1.2415000987654, 3.0], dtype=torch.float64)
    got = want.float().double()  # every value rounded through float32: off by ~1e-8 relative
    found = trees.compare(want, got, {"": (1e-10, 1e-12)})
    assert found is not None
    text = str(found)
    # The old message: "element [1] is -0.019998, expected -0.019998": the same six digits twice.
    shown = text.split(" is ", 1)[1].split(" (", 1)[0]
    mine, theirs = shown.split(", expected ")
    assert mine != theirs, text
    assert "off by" in text and "relative" in text
    assert "lost precision" in text and "float32" in text and "rtol=1e-10, atol=1e-12" in text


def test_the_element_shown_is_the_one_with_the_largest_error() -> None:
    want = torch.zeros(6, dtype=torch.float64) + 1.0
    got = want.clone()
    got[1] += 1e-3
    got[4] += 0.5  # the largest error; the first one found used to be shown
    text = str(trees.compare(want, got))
    assert text.startswith("element [4] is 1.5, expected 1 "), text
    assert "2 of 6 elements differ, the largest error shown" in text
    assert "lost precision" not in text  # a real mistake is not blamed on rounding


def test_a_wrong_formula_is_not_called_lost_precision_even_when_one_element_is_close() -> None:
    want = torch.tensor([1.0, 2.0], dtype=torch.float64)
    got = torch.tensor([1.0 + 1e-9, 2.5], dtype=torch.float64)
    assert "lost precision" not in str(trees.compare(want, got))


def test_a_scalar_near_miss_is_told_apart_too() -> None:
    text = str(trees.compare({"loss": 0.123456789}, {"loss": 0.1234568}))
    assert "is 0.1234568, expected 0.12345679" in text and "lost precision" in text


# --- a diagnosis that cannot tell ---------------------------------------------------------------


@pytest.fixture(scope="module")
def lamb() -> tuple[Any, Case]:
    checks = load_public(labs_dir() / "lamb" / "checks.py", "checks")
    (case,) = checks.cases(1, torch.Generator().manual_seed(7))
    return checks, case


L2 = "the weight decay went into the gradient"


def test_a_variant_equal_to_the_reference_is_not_named_for_rounding(lamb: tuple[Any, Case]) -> None:
    checks, case = lamb
    want = case.expected[0]["first"]
    rounded = {name: t.float().double() for name, t in want.items()}  # right, through float32
    facts = one_rank(case, {"first": rounded})
    biases = checks.zero_biases(facts)
    assert not biases.passed
    # On zero-initialised biases the L2 variant equals the right answer: it cannot be the diagnosis.
    assert L2 not in biases.message and "The parameters are what you get when" not in biases.message, biases.message
    assert "lost precision" in biases.message, biases.message
    first = checks.first_step(facts)
    assert "The parameters are what you get when" not in first.message, first.message


def test_a_variant_that_explains_the_submission_is_still_named(lamb: tuple[Any, Case]) -> None:
    checks, case = lamb
    variant = checks._variants(int(case.inputs[0]["seed"]))  # the mistakes, computed for these inputs
    advice = next(a for a in variant if a.startswith(L2))
    first = checks.first_step(one_rank(case, {"first": variant[advice]}))
    assert not first.passed and L2 in first.message, first.message


# --- advice from bytes on the wire --------------------------------------------------------------


def test_fsdp_mixed_precision_bytes_name_element_sizes_and_possible_causes() -> None:
    checks = load_public(labs_dir() / "fsdp-mixed-precision" / "checks.py", "checks")
    inputs = checks.cases(2, torch.Generator().manual_seed(3))[0].inputs[0]
    gather, reduce = checks.expected_bytes(inputs, 2)
    halved = checks._likely(gather + reduce / 2, inputs, 2)
    # Bytes tell 2-byte elements, never which 2-byte dtype: both are offered, as possibilities.
    assert "2-byte" in halved and "bfloat16 or float16" in halved and "possibly" in halved, halved
    doubled = checks._likely(2 * gather + reduce, inputs, 2)
    assert "4-byte" in doubled and "possibly" in doubled, doubled
    # More bytes than expected are never explained by a pattern that sends fewer ("without a unit per block").
    assert "once and never again" not in doubled and "once and never again" not in checks._likely(
        1.5 * (gather + reduce), inputs, 2
    )


def test_fsdp_wrapping_bytes_offer_causes_as_possibilities() -> None:
    checks = load_public(labs_dir() / "fsdp-wrapping" / "checks.py", "checks")
    fewer = checks._gather_advice("per-layer", 1.0, 2.0)
    more = checks._gather_advice("per-block", 3.0, 2.0)
    assert "Possible causes" in fewer and "gathered again for their backward" in fewer
    assert "Possible causes" in more and "more units than the strategy names" in more
    for text in (fewer, more):  # no longer stated as the one fact: "must be resharded ... (the default)"
        assert "must be resharded" not in text and "reshard_after_forward=True, the default" not in text


def test_fsdp_wrapping_accepts_a_root_resharded_after_its_forward() -> None:
    checks = load_public(labs_dir() / "fsdp-wrapping" / "checks.py", "checks")
    model = checks.DRIVER.build_model(0, checks.DIMS)
    once = checks.gathered_bytes(model, "per-block")
    twice = checks.gathered_bytes(model, "per-block", root_resharded=True)
    root = checks.unit_bytes(model, "per-block")[checks.ROOT]
    assert twice == once + root and twice > checks.HIGH * once  # outside the old band: it lost the check


RESHARD_TRUE = """
from torch import nn
from torch.distributed.fsdp import fully_shard


def wrap(model, strategy):
    inner = {
        "per-layer": [m for m in model.modules() if isinstance(m, nn.Linear)],
        "per-block": list(model.blocks),
        "whole-model": [],
    }[strategy]
    for module in inner:
        fully_shard(module, reshard_after_forward=True)
    fully_shard(model, reshard_after_forward=True)  # as the statement once said the default was
    return model
"""


def test_reshard_after_forward_true_everywhere_gets_full_marks(one_grader) -> None:
    v = one_grader.grade("fsdp-wrapping", RESHARD_TRUE, world_sizes=[2])
    assert v.check("all-gather").passed, v.check("all-gather").message
    assert v.score == v.max_score, [(c.id, c.message) for c in v.checks if not c.passed]


CRASHES_PER_BLOCK = solution("fsdp-wrapping").replace(
    "        for block in model.blocks:\n",
    "        raise RuntimeError('no blocks today')\n        for block in model.blocks:\n",
)


def test_a_strategy_that_crashed_is_not_told_to_reshard(one_grader) -> None:
    assert solution("fsdp-wrapping") != CRASHES_PER_BLOCK
    v = one_grader.grade("fsdp-wrapping", CRASHES_PER_BLOCK, world_sizes=[2])
    gather = v.check("all-gather")
    assert not gather.passed
    problem = gather.message.split("per-block, world size 2: ", 1)[-1]
    assert "the probe failed on rank" in problem and "say nothing about the wrapping" in problem, gather.message
    assert "no blocks today" in v.check("training").message
    assert "resharded" not in problem.split(" Measured:")[0], gather.message


# --- partial credit ------------------------------------------------------------------------------


def test_partial_credit_is_the_share_of_the_points_to_one_decimal() -> None:
    # 2 of 5 right used to earn int(2 * 2 / 5) = 0 of 2 points.
    assert points(2, Outcome(False, "", fraction=2 / 5)) == 0.8
    assert points(10, Outcome(False, "", fraction=3 / 4)) == 7.5
    assert points(3, Outcome(False, "", fraction=1 / 3)) == 1.0
    assert points(2, Outcome(False, "", fraction=0.99)) == 1.9  # never rounded up to full marks
    assert points(2, Outcome(True, "")) == 2
    assert points_share(4, 0.0) == 0 and total_points([0.1, 0.2, 2]) == 2.3


def test_scores_read_7_5_of_10_and_10_of_10() -> None:
    from app.labs import outcome

    assert show_points(7.5) == "7.5" and show_points(10.0) == "10" and show_points(0) == "0"
    assert points_number(10.0) == 10 and isinstance(points_number(10.0), int) and points_number(7.5) == 7.5
    assert outcome.of("graded", "failed", 7.5, 10).text == "7.5/10"
    assert outcome.of("graded", "passed", 10.0, 10).text == "10/10 Passed"


# --- internal values shown as the student's ------------------------------------------------------


def test_a_placeholder_for_missing_state_is_reported_as_missing_with_its_phase() -> None:
    want = {"optimizer": {"w": {"exp_avg": torch.ones(2, dtype=torch.float64)}}}
    got = {"optimizer": {"w": {"exp_avg": "missing"}}}
    case = Case("state", "load", "after load", [{}], [want], missing="missing")
    why = case_failure(one_rank(case, got, phase="load").groups[0], 0, 0)
    assert why is not None
    # The old message: 'optimizer["w"]["exp_avg"] expected a torch.Tensor, got str'.
    assert "got str" not in why and "torch.Tensor" not in why, why
    assert why.startswith('optimizer["w"]["exp_avg"] is missing after the load phase'), why
    # A lab that names no placeholder keeps judging the string as the student's value.
    plain = Case("state", "load", "after load", [{}], [want])
    assert "got str" in str(case_failure(one_rank(plain, got).groups[0], 0, 0))


SAVED_NOT_LOADED = """
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict


def save_checkpoint(model, optimizer, path):
    model_state, optim_state = get_state_dict(model, optimizer)
    dcp.save({"model": model_state, "optim": optim_state}, checkpoint_id=path)


def load_checkpoint(model, optimizer, path):
    state = {"model": model.state_dict(), "optim": optimizer.state_dict()}  # a fresh optimizer's: no moments
    dcp.load(state, checkpoint_id=path)
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optim"])
"""

NEVER_SAVED = """
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.state_dict import get_model_state_dict, set_model_state_dict


def save_checkpoint(model, optimizer, path):
    dcp.save({"model": get_model_state_dict(model)}, checkpoint_id=path)


def load_checkpoint(model, optimizer, path):
    state = {"model": get_model_state_dict(model)}
    dcp.load(state, checkpoint_id=path)
    set_model_state_dict(model, state["model"])
"""


@pytest.mark.parametrize(
    ("code", "says", "not_says"),
    [(SAVED_NOT_LOADED, "were saved", "never saved"), (NEVER_SAVED, "never saved", "were saved")],
    ids=["saved-not-loaded", "never-saved"],
)
def test_missing_optimizer_state_says_whether_it_was_saved(one_grader, code: str, says: str, not_says: str) -> None:
    v = one_grader.grade("checkpoint-resharding", code)
    state = v.check("optimizer-state")
    assert not state.passed
    assert "expected a torch.Tensor, got str" not in state.message, state.message
    assert "is missing after the load phase" in state.message, state.message
    assert says in state.message and not_says not in state.message, state.message


# --- words that fit the lab ----------------------------------------------------------------------


def test_results_are_counted_as_what_the_cases_are() -> None:
    one = GroupRun(1, [], [RankRun()])
    two = GroupRun(2, [], [RankRun(), RankRun()])
    assert counted(4, [one]) == "4 case results"
    assert counted(8, [one, two]) == "8 rank results"
    assert counted(4, [one], "segment counts") == "4 segment counts"


def test_a_single_rank_correctness_check_does_not_count_ranks() -> None:
    case = Case("values", "f", "k = 1", [{}], [torch.ones(2)])
    facts = Facts(
        [GroupRun(1, [case] * 4, [RankRun(results={i: saved(torch.ones(2)) for i in range(4)})], status="passed")]
    )
    outcome = correctness(facts, "values")
    assert outcome.passed and outcome.message == "all 4 case results correct"


def test_the_single_rank_checkpointing_lab_counts_segment_counts(one_grader) -> None:
    v = one_grader.grade("activation-checkpointing", solution("activation-checkpointing"))
    assert v.passed, [(c.id, c.message) for c in v.checks if not c.passed]
    for check in ("output", "gradients"):
        message = v.check(check).message
        # The old message: "all 4 rank results equal the plain forward's output", on one rank.
        assert "rank results" not in message and "one per segment count on one rank" in message, message
