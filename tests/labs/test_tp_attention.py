"""The tp-attention lab on real gloo ranks: the reference gets every check, each mutant loses the ones it should.

Runs the lab's public driver in forked ranks (no sandbox; ``tp_ranks``), compares each rank's
result with ``checks.expected`` and judges the kernel's byte counts with ``checks.wire_verdict``,
so the driver, the reference and the wire bounds are checked apart from the sandbox, and each
mutant is shown to lose exactly the checks it should (its header's, as ``ringlab lab test`` checks them).
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

from labs.host.judge import settle
from labs.rank import trees
from labs.spec import DEFAULT_CONTENT
from labs.spec.mutants import Mutant

from . import tp_ranks
from .mutant_cases import assert_lost, mutant_params

LAB = DEFAULT_CONTENT / "tp-attention"
# Which checks of lab.yaml each result key feeds, as the cases' ``parts`` say.
PARTS = {
    "forward": ("output",),
    "sharding": ("weights",),
    "input-gradient": ("grad_x",),
    "weight-gradients": ("grads",),
}
FEEDBACK = {"sharding"}  # read from the rank's own object: shown, never scored

# Correct, and written differently from solution.py: heads picked with index_select, one
# scaled_dot_product_attention per head, a gradient hook instead of f, and a detached
# all-reduce added as a constant instead of g (its value is the sum, its backward the identity).
ALTERNATIVE = """
import torch
import torch.distributed as dist
import torch.nn.functional as F


def _all_reduce_grad(grad):
    grad = grad.clone()
    dist.all_reduce(grad)
    return grad


class ParallelSelfAttention(torch.nn.Module):
    def __init__(self, w_qkv, b_qkv, w_out, b_out, num_heads):
        super().__init__()
        n, r = dist.get_world_size(), dist.get_rank()
        d = w_qkv.shape[1]
        self.per_rank, self.dim = num_heads // n, d // num_heads
        mine = torch.arange(r * d // n, (r + 1) * d // n)
        rows = torch.cat([mine + part * d for part in range(3)])
        self.qkv_weight = torch.nn.Parameter(w_qkv.index_select(0, rows).clone())
        self.qkv_bias = torch.nn.Parameter(b_qkv[rows].clone()) if b_qkv is not None else None
        self.out_weight = torch.nn.Parameter(w_out.index_select(1, mine).clone())
        self.out_bias = torch.nn.Parameter(b_out.clone()) if b_out is not None else None

    def forward(self, x):
        shared = x * 1.0
        if shared.requires_grad:
            shared.register_hook(_all_reduce_grad)
        qkv = shared @ self.qkv_weight.T
        if self.qkv_bias is not None:
            qkv = qkv + self.qkv_bias
        width = self.per_rank * self.dim
        heads = []
        for h in range(self.per_rank):
            cols = slice(h * self.dim, (h + 1) * self.dim)
            q, k, v = (qkv[..., part * width :][..., cols] for part in range(3))
            heads.append(F.scaled_dot_product_attention(q, k, v))
        partial = torch.cat(heads, dim=-1) @ self.out_weight.T
        total = partial.detach().clone()
        dist.all_reduce(total)
        y = partial + (total - partial.detach())
        return y + self.out_bias if self.out_bias is not None else y
"""


@pytest.fixture(scope="module")
def lab() -> tuple[Any, Any]:
    torch.set_num_threads(1)
    checks = tp_ranks.load_module(LAB / "checks.py", "tpattn_checks")
    return checks, tp_ranks.load_module(LAB / "driver.py", "tpattn_driver")


def lost_checks(checks: Any, code: str, world_size: int, seed: int) -> set[str]:
    """The checks a submission fails at one world size, judged as the lab's checks.py judges them."""
    cases = checks.cases(world_size, torch.Generator().manual_seed(seed))
    settle(cases)  # the references a lab computes ``later``, in place as the grader puts them
    run = tp_ranks.run(code, LAB / "driver.py", world_size, [tp_ranks.Call(c.driver, c.inputs) for c in cases])
    tol = dict.fromkeys(checks.KEYS, checks.TOLERANCE)
    lost = set()
    for i, case in enumerate(cases):
        wrong = set()
        for r, got in enumerate(run.results[i]):
            want = case.expected[r]
            for check, keys in PARTS.items():
                part = [k for k in keys if k in want]
                if part and (
                    isinstance(got, str) or trees.compare(trees.select(want, part), trees.select(got, part), tol)
                ):
                    wrong.add(check)
        lost |= wrong
        # A measured call's bytes count only if its scored results are right (rules.wire_per_phase).
        if case.measure and (
            wrong - FEEDBACK or checks.wire_verdict(world_size, case.driver, case.inputs[0]["problem"], run.sent[i])[1]
        ):
            lost.add("communication")
    return lost


def test_reference_is_one_big_multihead_attention(lab: tuple[Any, Any]) -> None:
    # The single-process reference is torch.nn.MultiheadAttention with every rank's heads put together.
    checks, _ = lab
    problem = {"seed": 5, **checks.MEASURED}
    parts = checks.heads(problem, [torch.Generator().manual_seed(r) for r in range(3)])
    p = checks.whole(problem, parts)
    d, heads = problem["d_model"], problem["heads"]
    mha = torch.nn.MultiheadAttention(d, heads, batch_first=True, dtype=torch.float64)
    with torch.no_grad():
        mha.in_proj_weight.copy_(p["w_qkv"])
        mha.in_proj_bias.copy_(p["b_qkv"])
        mha.out_proj.weight.copy_(p["w_out"])
        mha.out_proj.bias.copy_(p["b_out"])
    want = mha(p["x"], p["x"], p["x"], need_weights=False)[0]
    torch.testing.assert_close(checks.reference(problem, parts)["output"], want, rtol=1e-12, atol=1e-12)


def test_each_rank_holds_only_its_own_heads(lab: tuple[Any, Any]) -> None:
    checks, driver = lab
    forward, backward = checks.cases(3, torch.Generator().manual_seed(9))[:2]
    d = checks.MEASURED["d_model"]
    for r, inputs in enumerate(forward.inputs):
        assert set(inputs) == {"key", "problem", "w_qkv", "b_qkv", "w_out"}
        assert inputs["w_qkv"].shape == (3 * d // 3, d) and inputs["w_out"].shape == (d, d // 3)
        full = driver.padded(inputs, d, 3, r)
        rows = full["w_qkv"].view(3, d, d)
        mine = driver.heads_slice(d, 3, r)
        assert not rows[:, mine].isnan().any() and int(rows.isnan().sum()) == 3 * d * (d - d // 3)
        assert int(full["w_out"].isnan().sum()) == d * (d - d // 3)
    assert all(set(i) == {"key", "problem"} for i in backward.inputs)


@pytest.mark.parametrize("world_size", [2, 3, 4])
def test_reference_passes_every_check(lab: tuple[Any, Any], world_size: int) -> None:
    checks, _ = lab
    code = (LAB / "solution.py").read_text()
    assert lost_checks(checks, code, world_size, seed=1000 + world_size) == set()


@pytest.mark.parametrize("world_size", [2, 4])
def test_a_differently_written_solution_passes_every_check(lab: tuple[Any, Any], world_size: int) -> None:
    checks, _ = lab
    assert lost_checks(checks, ALTERNATIVE, world_size, seed=31 + world_size) == set()


@pytest.mark.parametrize("mutant", mutant_params("tp-attention"))
def test_mutant_loses_its_checks(lab: tuple[Any, Any], mutant: Mutant) -> None:
    checks, _ = lab
    assert_lost(lost_checks(checks, mutant.code, 3, seed=77), mutant)
    assert mutant.loses - FEEDBACK, "every mutant loses points on a check judged outside the ranks"


def test_wire_bounds_on_counts(lab: tuple[Any, Any]) -> None:
    checks, _ = lab
    problem = {"seed": 0, **checks.MEASURED}
    theory = 2 * 3 * 2 * 96 * 192 * 8 / 4
    assert checks.wire_verdict(4, "forward", problem, [round(theory * 1.003)] * 4)[1] is None
    too_many = checks.wire_verdict(4, "forward", problem, [round(theory * 2)] * 4)[1]
    assert too_many and "rank 0 sent 884,736 bytes" in too_many and "442,368" in too_many
    half = checks.wire_verdict(4, "forward", problem, [round(theory / 2)] * 4)[1]
    assert half and "all-gather" in half
    too_few = checks.wire_verdict(4, "backward", problem, [0, 0, 0, 0])[1]
    assert too_few and "gradient of x" in too_few and "all-reduces the gradient" in too_few
