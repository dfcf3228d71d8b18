"""overlap-ddp: the bucket rule and the statement agree; each mutant loses the checks it should, graded for real.

Each mutant is graded in the sandbox here, at the world sizes its header names (2 and 3: a cap of 25,856 B
gives 4 buckets and 100,736 B gives 2; ``bucket_cap_in_elements`` at 4, since at 2 and 3 ranks it gives one
bucket, as ignoring the cap does), and must lose the checks its header names. This also proves
that correct solutions written differently get full marks, and that the overlap, seen only from
inside the ranks, is feedback: solutions without it keep every point and are told so.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from labs.host import template
from labs.host.grader import Grader
from labs.spec.mutants import Mutant

from .conftest import labs_dir
from .mutant_cases import assert_loses, mutant_params, sizes

LAB = "overlap-ddp"
FOLDER = labs_dir() / LAB
FEEDBACK = "This check is feedback: it is measured inside your own process, so it cannot count"

# Correct, and written unlike solution.py: tensor hooks that run before accumulation, the other accepted
# bucket rule (never over the cap: 6 buckets at cap 25,856, 10 at 768), .grad replaced by views.
TENSOR_HOOKS = """
import torch
import torch.distributed as dist


class OverlappingDDP:
    def __init__(self, model, bucket_cap_bytes):
        self.n = dist.get_world_size()
        self.groups, current, size = [], [], 0
        for p in reversed(list(model.parameters())):
            b = p.numel() * p.element_size()
            if current and size + b > bucket_cap_bytes:
                self.groups.append(current)
                current, size = [], 0
            current.append(p)
            size += b
        if current:
            self.groups.append(current)
        self.grads, self.inflight = {}, []
        for g, group in enumerate(self.groups):
            for p in group:
                p.register_hook(self._make(g, p))

    def _make(self, g, p):
        def hook(grad):
            self.grads[p] = grad
            if all(q in self.grads for q in self.groups[g]):
                buf = torch.cat([self.grads[q].flatten() for q in self.groups[g]])
                self.inflight.append((g, buf, dist.all_reduce(buf, op=dist.ReduceOp.SUM, async_op=True)))
            return grad
        return hook

    def finish(self):
        for g, buf, work in self.inflight:
            work.wait()
            buf.div_(self.n)
            for p, piece in zip(self.groups[g], buf.split([q.numel() for q in self.groups[g]])):
                p.grad = piece.view_as(p)
        self.inflight, self.grads = [], {}
"""

# Correct too: hooks on the AccumulateGrad nodes (they run after the driver's hooks, one gradient late),
# each gradient divided by N before the sum, buckets kept by index.
NODE_HOOKS = """
import torch
import torch.distributed as dist


class OverlappingDDP:
    def __init__(self, model, bucket_cap_bytes):
        params = list(model.parameters())
        self.n = dist.get_world_size()
        self.bucket_index, self.buckets, total = {}, [], 0
        for p in params[::-1]:
            if not self.buckets or total >= bucket_cap_bytes:
                self.buckets.append([])
                total = 0
            self.buckets[-1].append(p)
            self.bucket_index[id(p)] = len(self.buckets) - 1
            total += p.numel() * p.element_size()
        self.ready, self.works, self.keep = [0] * len(self.buckets), {}, []
        for p in params:
            acc = p.view_as(p).grad_fn.next_functions[0][0]
            acc.register_hook(self._hook_for(p))
            self.keep.append(acc)

    def _hook_for(self, p):
        def hook(grad_inputs, grad_outputs):
            b = self.bucket_index[id(p)]
            self.ready[b] += 1
            if self.ready[b] == len(self.buckets[b]):
                flat = torch.cat([q.grad.reshape(-1) / self.n for q in self.buckets[b]])
                self.works[b] = (dist.all_reduce(flat, async_op=True), flat)
        return hook

    def finish(self):
        for b in sorted(self.works):
            work, flat = self.works[b]
            work.wait()
            offset = 0
            for q in self.buckets[b]:
                q.grad.copy_(flat[offset : offset + q.numel()].view_as(q))
                offset += q.numel()
        self.works, self.ready = {}, [0] * len(self.buckets)
"""

# Right buckets and values, no overlap: every bucket is all-reduced in finish(), after backward.
SYNC_AFTER_BACKWARD = """
import torch
import torch.distributed as dist


class OverlappingDDP:
    def __init__(self, model, bucket_cap_bytes):
        self.buckets, size = [[]], 0
        for p in reversed(list(model.parameters())):
            self.buckets[-1].append(p)
            size += p.numel() * p.element_size()
            if size >= bucket_cap_bytes:
                self.buckets.append([])
                size = 0
        if not self.buckets[-1]:
            self.buckets.pop()

    def finish(self):
        works = []
        for bucket in self.buckets:
            flat = torch.cat([p.grad.reshape(-1) for p in bucket])
            works.append((dist.all_reduce(flat, async_op=True), flat, bucket))
        for work, flat, bucket in works:
            work.wait()
            flat /= dist.get_world_size()
            offset = 0
            for p in bucket:
                p.grad.copy_(flat[offset : offset + p.numel()].view_as(p))
                offset += p.numel()
"""

# Right buckets sent from the hooks, but each hook blocks in its all-reduce (no async_op): backward stalls.
BLOCKING_IN_HOOK = """
import torch
import torch.distributed as dist


class OverlappingDDP:
    def __init__(self, model, bucket_cap_bytes):
        params = list(model.parameters())
        self.buckets, size = [[]], 0
        for p in reversed(params):
            self.buckets[-1].append(p)
            size += p.numel() * p.element_size()
            if size >= bucket_cap_bytes:
                self.buckets.append([])
                size = 0
        if not self.buckets[-1]:
            self.buckets.pop()
        self.bucket_of = {p: i for i, bucket in enumerate(self.buckets) for p in bucket}
        self.pending = [len(b) for b in self.buckets]
        self.done = []
        for p in params:
            p.register_post_accumulate_grad_hook(self._ready)

    def _ready(self, p):
        i = self.bucket_of[p]
        self.pending[i] -= 1
        if self.pending[i] == 0:
            flat = torch.cat([q.grad.reshape(-1) for q in self.buckets[i]])
            dist.all_reduce(flat)
            self.done.append((flat, i))

    def finish(self):
        for flat, i in self.done:
            flat /= dist.get_world_size()
            offset = 0
            for q in self.buckets[i]:
                q.grad.copy_(flat[offset : offset + q.numel()].view_as(q))
                offset += q.numel()
        self.done.clear()
        self.pending = [len(b) for b in self.buckets]
"""

# Faking the overlap: an empty all-reduce at each bucket boundary during backward (no bytes on the wire), the
# real ones after backward. The driver's count of collectives per step gives it away, in the feedback only.
FAKE_OVERLAP = SYNC_AFTER_BACKWARD.replace(
    "        if not self.buckets[-1]:\n            self.buckets.pop()\n",
    "        if not self.buckets[-1]:\n            self.buckets.pop()\n"
    "        last = {id(b[-1]) for b in self.buckets}\n"
    "        for p in model.parameters():\n"
    "            if id(p) in last:\n"
    "                p.register_post_accumulate_grad_hook(\n"
    "                    lambda _: (dist.all_reduce(torch.zeros(0, dtype=torch.float64), async_op=True), None)[1]\n"
    "                )\n",
)
# Each one's overlap feedback says what it saw.
NO_OVERLAP = {
    "sync-after-backward": (SYNC_AFTER_BACKWARD, "0 issued during the whole backward pass"),
    "blocking-in-hook": (BLOCKING_IN_HOOK, "a hook waited for its all-reduce"),
    "fake-overlap": (FAKE_OVERLAP, "issued 8 collectives in step 0"),
}


def checks():  # type: ignore[no-untyped-def]
    return Grader.load_checks(FOLDER)[1]


def test_the_statement_lists_the_buckets_the_rule_gives() -> None:
    c = checks()
    statement = (FOLDER / "statement.md").read_text()
    for n, cap in c.CAPS.items():
        inputs = {"dims": c.DIMS, "bucket_cap_bytes": cap}
        ddp_rule = c.candidates(inputs)[0]
        row = next(line for line in statement.splitlines() if line.startswith(f"| {n} | {cap:,} |"))
        listed = [part.split("]")[0].split(", ") for part in row.split("[")[1:]]
        assert listed == ddp_rule, (n, row)
    assert [len(c.candidates({"dims": c.DIMS, "bucket_cap_bytes": c.CAPS[n]})[0]) for n in (2, 3, 4)] == [4, 2, 6]


def test_every_accepted_bucketing_ends_with_the_first_layer_alone_and_frames_no_whole_number() -> None:
    """The last bucket, [0.bias, 0.weight], is framed as 1/N of a full all-reduce: k buckets frame k - 1 + 1/N per
    step, so no set of large slices (a whole number of full all-reduces) passes for them."""
    c = checks()
    assert [c.framed(k, 2) for k in (1, 2, 3, 5, 9, 12_592)] == [0.25, 0.5, 0.75, 0.75, 0.75, 1.0]
    assert [c.framed(2, n) for n in (2, 3, 4)] == [0.5, 1 / 3, 0.25]
    model = c.load_public(c.__file__, "driver").build_model(0, c.DIMS)
    nbytes = {name: p.numel() * p.element_size() for name, p in model.named_parameters()}
    for n, cap in c.CAPS.items():
        options = c.candidates({"dims": c.DIMS, "bucket_cap_bytes": cap})
        assert [len(k) for k in options] == {2: [4, 6], 3: [2], 4: [6, 10]}[n]
        for buckets in options:
            assert buckets[-1] == ["0.bias", "0.weight"], (n, buckets)
            framing = c._framing(buckets, nbytes, n)
            assert framing == pytest.approx(len(buckets) - 1 + 1 / n)
            assert abs(framing - round(framing)) * c.STEPS >= 0.5  # a whole number of all-reduces is told apart


def test_bucket_rules() -> None:
    c = checks()
    sizes = [("a", 10), ("b", 30), ("c", 5), ("d", 40)]  # reverse order: d, c, b, a
    assert c.assign(sizes, 40, never_over=False) == [["d"], ["c", "b", "a"]]
    assert c.assign(sizes, 44, never_over=False) == [["d", "c"], ["b", "a"]]
    assert c.assign(sizes, 44, never_over=True) == [["d"], ["c", "b"], ["a"]]
    assert c.assign(sizes, 1000, never_over=False) == [["d", "c", "b", "a"]]
    assert c.assign(sizes, 1, never_over=True) == [["d"], ["c"], ["b"], ["a"]]


def test_backward_makes_the_gradients_ready_in_reverse_parameter_order() -> None:
    c = checks()
    driver = c.load_public(c.__file__, "driver")
    inputs = {"seed": 3, "dims": c.DIMS, "batch": c.BATCH}
    names = [n for n, _ in driver.build_model(3, c.DIMS).named_parameters()]
    assert driver.ready_order(inputs) == names[::-1]


@pytest.fixture(scope="module")
def one_grader() -> Iterator[Any]:
    g = Grader(pool_size=2, fork_from_template=template.available())
    yield g
    g.close()


@pytest.mark.parametrize("mutant", mutant_params(LAB))
def test_mutant_loses_its_checks(one_grader: Any, mutant: Mutant) -> None:
    v = one_grader.grade(LAB, mutant.code, world_sizes=sizes(mutant))
    assert_loses(v, mutant)


@pytest.mark.parametrize("code", [TENSOR_HOOKS, NODE_HOOKS], ids=["tensor-hooks-never-over", "node-hooks"])
def test_correct_solutions_written_differently_get_full_marks(one_grader: Any, code: str) -> None:
    v = one_grader.grade(LAB, code)  # every world size: 4, 2 and 6 buckets (6, 2 and 10 never over the cap)
    assert v.score == v.max_score, " | ".join(c.message for c in v.checks)


def test_reference_counts_its_buckets_on_the_wire_and_starter_says_not_implemented(one_grader: Any) -> None:
    v = one_grader.grade(LAB, (FOLDER / "solution.py").read_text())
    assert v.status == "passed" and v.score == v.max_score, v.message
    data = next(c for c in v.checks if c.id == "buckets").data
    for n, buckets in ((2, 4), (3, 2), (4, 6)):
        seen = data[f"world_size_{n}"]
        framing = buckets - 1 + 1 / n  # the last bucket, 16 bytes, is framed as 1/N of a full all-reduce
        assert seen["expected_all_reduces_per_step"][0] == round(framing, 4), data
        assert seen["mean_over_the_ranks"] == pytest.approx(framing, abs=0.002), data
        # The last bucket's framed chunks are not sent by every rank alike: each rank within 0.1, exact on 2 ranks.
        assert all(abs(c - framing) < (0.002 if n == 2 else 0.11) for c in seen["all_reduces_per_step_from_the_wire"])
    overlap = next(c for c in v.checks if c.id == "overlap")
    assert overlap.passed and FEEDBACK in overlap.message
    assert overlap.data["world_size_2"]["ranks"]["0"]["issued_during_backward"] == [4, 4, 4]
    v = one_grader.grade(LAB, (FOLDER / "starter.py").read_text(), world_sizes=[2])
    messages = " ".join(c.message for c in v.checks)
    assert "NotImplementedError" in messages and "NameError" not in messages


def test_only_results_and_the_wire_carry_points() -> None:
    """The overlap is seen only by the driver, inside the ranks, where a submission can rewrite it: no points."""
    lab = Grader.load_checks(FOLDER)[0]
    assert {c.id: c.points for c in lab.spec.checks} == {
        "gradients": 3, "parameters": 2, "ranks-identical": 1, "buckets": 2, "overlap": 0,
    }  # fmt: skip
    assert "Feedback, no points" in lab.spec.check("overlap").title


@pytest.mark.parametrize("name", sorted(NO_OVERLAP))
def test_no_overlap_keeps_every_point_and_the_feedback_says_so(one_grader: Any, name: str) -> None:
    code, seen = NO_OVERLAP[name]
    v = one_grader.grade(LAB, code, world_sizes=[2])
    assert v.score == v.max_score, " | ".join(c.message for c in v.checks)
    assert [c.id for c in v.checks if not c.passed] == ["overlap"], " | ".join(c.message for c in v.checks)
    message = next(c for c in v.checks if c.id == "overlap").message
    assert seen in message and FEEDBACK in message, message
