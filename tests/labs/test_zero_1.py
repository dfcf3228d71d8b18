"""zero-1 graded for real: what each mutant loses, other correct designs, and the kernel's memory figures.

Whether a rank keeps only 1/N of AdamW's state is judged from its memory high-water, read from its
control group outside the rank, in a group of 2 ranks of its own (the memory case); the training at
the requested world sizes is judged by its values.
"""

from __future__ import annotations

import pytest

from labs.spec.mutants import Mutant

from .conftest import labs_dir
from .mutant_cases import assert_loses, mutant_params, sizes
from .mutant_cases import mutant as lab_mutant

LAB = "zero-1"
WORLD_SIZES = [2]  # the training; the memory case always runs on MEMORY_WORLD_SIZE ranks of its own

# Correct, written differently from solution.py: the parameters become views of one flat buffer, so
# the all-gather writes straight into them, and the moments are updated with lerp_.
FLAT_VIEWS = """
import math

import torch
import torch.distributed as dist


class ZeroAdamW:
    def __init__(self, params, lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0):
        self.params = list(params)
        self.lr, self.betas, self.eps, self.wd = lr, betas, eps, weight_decay
        self.n, self.rank = dist.get_world_size(), dist.get_rank()
        total = sum(p.numel() for p in self.params)
        self.per = math.ceil(total / self.n)
        self.flat = torch.zeros(self.per * self.n, dtype=self.params[0].dtype)
        offset = 0
        for p in self.params:
            self.flat[offset : offset + p.numel()].copy_(p.detach().reshape(-1))
            p.data = self.flat[offset : offset + p.numel()].view_as(p)
            offset += p.numel()
        self.total = total
        self.m = torch.zeros(self.per, dtype=self.flat.dtype)
        self.v = torch.zeros(self.per, dtype=self.flat.dtype)
        self.t = 0

    @torch.no_grad()
    def step(self):
        self.t += 1
        b1, b2 = self.betas
        lo = self.rank * self.per
        g = torch.zeros(self.per, dtype=self.flat.dtype)
        offset = 0
        for p in self.params:  # copy only the gradient elements that fall in this rank's slice
            a, b = max(offset, lo), min(offset + p.numel(), lo + self.per)
            if a < b:
                g[a - lo : b - lo] = p.grad.reshape(-1)[a - offset : b - offset]
            offset += p.numel()
        mine = self.flat[lo : lo + self.per].clone()
        mine.mul_(1 - self.lr * self.wd)
        self.m.lerp_(g, 1 - b1)
        self.v.mul_(b2).addcmul_(g, g, value=1 - b2)
        denom = (self.v / (1 - b2**self.t)).sqrt_().add_(self.eps)
        mine.addcdiv_(self.m, denom, value=-self.lr / (1 - b1**self.t))
        dist.all_gather_into_tensor(self.flat, mine)

    def zero_grad(self):
        for p in self.params:
            if p.grad is not None:
                p.grad.zero_()
"""

# Correct, and different again: this rank's slice as a parameter of its own, stepped by an inner
# torch.optim.AdamW (whose two moments are then the slice's size), shared with all_gather.
INNER_ADAMW = """
import torch
import torch.distributed as dist


class ZeroAdamW:
    def __init__(self, params, lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0):
        self.params = [p for p in params]
        self.n, self.rank = dist.get_world_size(), dist.get_rank()
        flat = torch.cat([p.detach().reshape(-1) for p in self.params])
        self.bounds = [len(c) for c in torch.tensor_split(torch.arange(flat.numel()), self.n)]
        self.start = sum(self.bounds[: self.rank])
        self.slice = torch.nn.Parameter(flat[self.start : self.start + self.bounds[self.rank]].clone())
        self.inner = torch.optim.AdamW([self.slice], lr=lr, betas=betas, eps=eps, weight_decay=weight_decay)

    @torch.no_grad()
    def step(self):
        grads = torch.cat([p.grad.reshape(-1) for p in self.params])
        self.slice.grad = grads[self.start : self.start + self.slice.numel()].clone()
        del grads
        self.inner.step()
        self.slice.grad = None
        pieces = [torch.empty(k, dtype=self.slice.dtype) for k in self.bounds]
        dist.all_gather(pieces, self.slice.detach().clone())
        flat = torch.cat(pieces)
        offset = 0
        for p in self.params:
            p.copy_(flat[offset : offset + p.numel()].view_as(p))
            offset += p.numel()

    def zero_grad(self):
        for p in self.params:
            p.grad = None
"""

# Full AdamW state, but no state at all for large layers (plain signed-gradient steps there): the
# memory case's memory is small, and its parameters are wrong.
SKIPS_STATE_WHEN_LARGE = """
import torch

_Full = globals()["ZeroAdamW"]


class ZeroAdamW(_Full):
    def __init__(self, params, lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0):
        self.params = list(params)
        self.lr = lr
        self.large = sum(p.numel() for p in self.params) > 100_000
        if not self.large:
            super().__init__(self.params, lr, betas, eps, weight_decay)

    @torch.no_grad()
    def step(self):
        if not self.large:
            return super().step()
        for p in self.params:
            p.add_(p.grad.sign(), alpha=-self.lr)

    def zero_grad(self):
        for p in self.params:
            p.grad = None
"""


def _code(name: str) -> str:
    return lab_mutant(LAB, name).code


@pytest.mark.parametrize("mutant", mutant_params(LAB))
def test_mutant_loses_its_checks(one_grader, mutant: Mutant) -> None:
    v = one_grader.grade(LAB, mutant.code, world_sizes=sizes(mutant))
    assert_loses(v, mutant)


def test_full_state_is_seen_in_the_kernels_count(one_grader) -> None:
    v = one_grader.grade(LAB, _code("full_state_every_rank"), world_sizes=WORLD_SIZES)
    state = v.check("sharded-state")
    data = state.data
    assert all(p > data["allowed_bytes"] for p in data["peak_bytes_per_rank"]), data
    assert "measured by the kernel" in state.message and "Full AdamW state on every rank adds" in state.message


@pytest.mark.parametrize("code", [FLAT_VIEWS, INNER_ADAMW], ids=["flat-views", "inner-adamw"])
def test_other_correct_designs_get_full_marks(one_grader, code: str) -> None:
    v = one_grader.grade(LAB, code, world_sizes=WORLD_SIZES)
    assert v.status == "passed" and v.score == v.max_score, [(c.id, c.message) for c in v.checks]


def test_reference_memory_is_well_within_the_bound(one_grader) -> None:
    v = one_grader.grade(LAB, (labs_dir() / LAB / "solution.py").read_text(), world_sizes=[2, 3, 4])
    assert v.status == "passed" and v.score == v.max_score, [(c.id, c.message) for c in v.checks]
    data = v.check("sharded-state").data
    peaks = data["peak_bytes_per_rank"]
    assert len(peaks) == 2
    # Parameters and half of the moments, plus a few layer-size temporaries and the runtime's own: well
    # below the bound (full AdamW state on every rank adds 18 MiB more moments: see the full-state test).
    assert max(peaks) < data["allowed_bytes"] - 4 * 2**20, data


def test_an_optimizer_that_keeps_no_state_for_the_memory_case_earns_nothing(one_grader) -> None:
    code = _code("full_state_every_rank") + "\n\n" + SKIPS_STATE_WHEN_LARGE
    v = one_grader.grade(LAB, code, world_sizes=WORLD_SIZES)
    state = v.check("sharded-state")
    assert state.score == 0 and "the parameters after training are wrong" in state.message, state.message


def test_the_memory_bound_is_the_statements() -> None:
    from labs.host.grader import Grader

    _, checks = Grader.load_checks(labs_dir() / LAB)
    budget = checks.allowed_bytes(checks.MEMORY_WORLD_SIZE)
    statement = (labs_dir() / LAB / "statement.md").read_text()
    for key in ("parameters", "moments", "temporaries", "allowed", "full_moments"):
        assert f"{budget[key] / 2**20:.1f}" in statement, key
    width, layers = checks.MEMORY["width"], checks.MEMORY["layers"]
    assert f"{layers} layers, each a ${width} \\times {width}$ weight" in statement
