"""activation-checkpointing graded for real: which checks each mutant loses, other correct designs, the chart."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from labs.host import template
from labs.spec import DEFAULT_CONTENT
from labs.spec.mutants import Mutant

from .mutant_cases import assert_loses, mutant_params

LAB = DEFAULT_CONTENT / "activation-checkpointing"
# Written differently from solution.py: an own autograd Function that saves the segment's input and
# the random state, and differentiates the recomputed segment with torch.autograd.grad.
OWN_FUNCTION = """
import torch


class Segment(torch.autograd.Function):
    @staticmethod
    def forward(ctx, run, x, *params):
        ctx.run = run
        ctx.rng = torch.get_rng_state()
        ctx.save_for_backward(x, *params)
        with torch.no_grad():
            return run(x)

    @staticmethod
    def backward(ctx, grad):
        x, *params = ctx.saved_tensors
        with torch.random.fork_rng(devices=[]):
            torch.set_rng_state(ctx.rng)
            with torch.enable_grad():
                h = x.detach().requires_grad_()
                y = ctx.run(h)
        grads = torch.autograd.grad(y, [h, *params], grad, allow_unused=True)
        return (None, *grads)


def checkpointed_forward(blocks, x, segments):
    size = len(blocks) // segments
    for start in range(0, len(blocks), size):
        part = list(blocks[start : start + size])

        def run(h, part=part):
            for block in part:
                h = block(h)
            return h

        x = Segment.apply(run, x, *[p for b in part for p in b.parameters()])
    return x
"""

# torch's own: the last segment runs without checkpointing (nothing to recompute there).
SEQUENTIAL = """
import torch
from torch.utils.checkpoint import checkpoint_sequential


def checkpointed_forward(blocks, x, segments):
    return checkpoint_sequential(torch.nn.Sequential(*blocks), segments, x, use_reentrant=False)
"""

# The reentrant variant, one nn.Sequential per segment.
REENTRANT = """
import torch
from torch.utils.checkpoint import checkpoint


def checkpointed_forward(blocks, x, segments):
    n = len(blocks) // segments
    for s in range(segments):
        x = checkpoint(torch.nn.Sequential(*blocks[s * n : (s + 1) * n]), x, use_reentrant=True)
    return x
"""


@pytest.fixture(scope="module")
def ckpt_grader() -> Iterator[object]:
    from labs.host.grader import Grader

    g = Grader(DEFAULT_CONTENT, pool_size=2, fork_from_template=template.available())
    yield g
    g.close()


@pytest.mark.parametrize("mutant", mutant_params("activation-checkpointing"))
def test_mutant_loses_exactly_its_checks(ckpt_grader, mutant: Mutant) -> None:
    verdict = ckpt_grader.grade("activation-checkpointing", mutant.code)
    assert_loses(verdict, mutant)
    lost = {c.id for c in verdict.checks if c.score < c.points}
    assert all(len(c.message) > 40 for c in verdict.checks if c.id in lost)
    recompute = verdict.check("recompute")
    assert recompute.points == 0 and recompute.score == 0
    # Recorded in the rank, so feedback without points: what a mutant's header says is the recompute message's.
    if "recompute" in mutant.loses:
        assert mutant.says and all(text in recompute.message for text in mutant.says), recompute.message


@pytest.mark.parametrize("code", [OWN_FUNCTION, SEQUENTIAL, REENTRANT], ids=["own-function", "sequential", "reentrant"])
def test_other_correct_designs_get_full_marks(ckpt_grader, code: str) -> None:
    verdict = ckpt_grader.grade("activation-checkpointing", code)
    assert verdict.status == "passed" and verdict.score == verdict.max_score == 10, [
        (c.id, c.message) for c in verdict.checks
    ]


def test_reference_memory_is_within_the_bound(ckpt_grader) -> None:
    verdict = ckpt_grader.grade("activation-checkpointing", (LAB / "solution.py").read_text())
    assert verdict.status == "passed" and verdict.score == verdict.max_score, verdict
    memory = verdict.check("memory")
    assert "measured by the kernel" in memory.message and "plain backpropagation holds" in memory.message
    figures = memory.data["figures"]
    six = figures["segments_6"]
    assert six["peak_bytes"] <= six["allowed_bytes"] - 3 * 2**20, six
    # Below plain backpropagation's tensors alone, with Python and torch included.
    assert six["peak_bytes"] < figures["plain_live_peak_bytes"]
    chart = memory.data["chart"]
    assert [s["name"] for s in chart["series"]] == [
        "plain backprop, live tensors",
        "reference checkpointing, live tensors",
        "yours, measured by the kernel",
        "allowed",
    ]
    assert [x for x, _ in chart["series"][1]["points"]] == [2, 3, 4, 6]
    assert [x for x, _ in chart["series"][2]["points"]] == [6]


def test_bounds_are_the_statements() -> None:
    from labs.host.grader import Grader

    _, checks = Grader.load_checks(LAB)
    bounds = checks.bounds()
    statement = (LAB / "statement.md").read_text()
    shown = [f"{v / 2**20:.1f} MiB" for v in (bounds["plain_peak"], *bounds["peaks"].values())]
    shown.append(f"{bounds['allowed'][6] / 2**20:.1f} MiB")
    assert all(m in statement for m in shown), shown
    # Checkpointing 4 segments keeps about 1/sqrt(12) of plain backpropagation's tensors alive at the peak.
    assert f"{bounds['peaks'][4] / bounds['plain_peak']:.2f} of plain" in statement
    assert 0.2 < bounds["peaks"][4] / bounds["plain_peak"] < 0.35
    peaks = [bounds["peaks"][k] for k in (2, 3, 4, 6)]
    assert peaks == sorted(peaks, reverse=True)


def test_starter_runs_and_loses_the_memory_points(ckpt_grader) -> None:
    verdict = ckpt_grader.grade("activation-checkpointing", (LAB / "starter.py").read_text())
    assert verdict.status == "failed", verdict.message
    assert {c.id for c in verdict.checks if c.score < c.points} == {"memory"}
    assert not verdict.check("recompute").passed
