"""debugging-tools graded for real: which checks each mutant loses points on, a differently written solution at
full marks, and the timing feedback (durations read inside the ranks) that tells wrong times without scoring them."""

from __future__ import annotations

import pytest

from labs.spec.mutants import Mutant

from .conftest import labs_dir
from .mutant_cases import assert_loses, mutant_params, sizes

LAB = "debugging-tools"
WORLD_SIZES = [2]  # every mutant shows at two ranks; the reference is graded at 2, 3 and 4
FOLDER = labs_dir() / LAB
FEEDBACK = "This check is feedback: it is measured inside your own process, so it cannot count"
REFERENCE = (FOLDER / "solution.py").read_text()
TOOLS = REFERENCE[: REFERENCE.index("class CommProfiler")]  # the reference's norms and sync check
# Wrong times, right everything else: the timing feedback says so, and no point is lost for it.
LAUNCH_ONLY = (
    TOOLS
    + """
class CommProfiler:  # launched with async_op=True, the clock read before wait(): it times the launch only
    def __init__(self):
        self.rows = []

    def _timed(self, name, tensor, launch):
        start = time.perf_counter()
        work = launch()
        seconds = time.perf_counter() - start
        work.wait()
        self.rows.append({"op": name, "bytes": tensor.numel() * tensor.element_size(), "seconds": seconds})

    def all_reduce(self, tensor, op=dist.ReduceOp.SUM):
        self._timed("all_reduce", tensor, lambda: dist.all_reduce(tensor, op=op, async_op=True))

    def broadcast(self, tensor, src):
        self._timed("broadcast", tensor, lambda: dist.broadcast(tensor, src=src, async_op=True))

    def all_gather(self, tensor_list, tensor):
        self._timed("all_gather", tensor, lambda: dist.all_gather(tensor_list, tensor, async_op=True))

    def table(self):
        return list(self.rows)
"""
)
CUMULATIVE = (
    TOOLS
    + """
class CommProfiler:  # records the time since the profiler was created, not each collective's own duration
    def __init__(self):
        self.rows = []
        self.created = time.perf_counter()

    def _timed(self, name, tensor, run):
        run()
        self.rows.append({"op": name, "bytes": tensor.numel() * tensor.element_size(),
                          "seconds": time.perf_counter() - self.created})

    def all_reduce(self, tensor, op=dist.ReduceOp.SUM):
        self._timed("all_reduce", tensor, lambda: dist.all_reduce(tensor, op=op))

    def broadcast(self, tensor, src):
        self._timed("broadcast", tensor, lambda: dist.broadcast(tensor, src=src))

    def all_gather(self, tensor_list, tensor):
        self._timed("all_gather", tensor, lambda: dist.all_gather(tensor_list, tensor))

    def table(self):
        return list(self.rows)
"""
)
WRONG_TIMES = {
    "launch-only": (LAUNCH_ONLY, "call wait() before reading the clock"),
    "cumulative": (CUMULATIVE, "not the time since the profiler started"),
}

# Written differently from solution.py: norms by an all-reduce of a one-hot vector, the losses
# all-gathered and compared on every rank, collectives launched asynchronously and waited for
# inside the timed window, rows that carry an extra key, time.monotonic instead of perf_counter.
ALTERNATIVE = """
import time

import torch
import torch.distributed as dist


def gradient_norms(model):
    flat = torch.cat([p.grad.reshape(-1) for p in model.parameters() if p.grad is not None])
    out = torch.zeros(dist.get_world_size(), dtype=torch.float64)
    out[dist.get_rank()] = torch.linalg.vector_norm(flat)
    dist.all_reduce(out)
    return out


def losses_in_sync(loss):
    mine = loss.detach().reshape(1)
    every = [torch.empty_like(mine) for _ in range(dist.get_world_size())]
    dist.all_gather(every, mine)
    return all(bool((t == every[0]).all()) for t in every)


class CommProfiler:
    def __init__(self):
        self._rows = []

    def _run(self, name, tensor, launch):
        t0 = time.monotonic()
        launch().wait()
        self._rows.append({"op": name, "bytes": tensor.nelement() * tensor.element_size(),
                           "seconds": time.monotonic() - t0, "rank": dist.get_rank()})

    def all_reduce(self, tensor, op=dist.ReduceOp.SUM):
        self._run("all_reduce", tensor, lambda: dist.all_reduce(tensor, op=op, async_op=True))

    def broadcast(self, tensor, src):
        self._run("broadcast", tensor, lambda: dist.broadcast(tensor, src, async_op=True))

    def all_gather(self, tensor_list, tensor):
        self._run("all_gather", tensor, lambda: dist.all_gather(tensor_list, tensor, async_op=True))

    def table(self):
        return self._rows
"""


@pytest.mark.parametrize("mutant", mutant_params(LAB))
def test_mutant_loses_its_checks(one_grader, mutant: Mutant) -> None:
    v = one_grader.grade(LAB, mutant.code, world_sizes=sizes(mutant))
    assert_loses(v, mutant)
    assert {c.id for c in v.checks if c.score < c.points} == mutant.loses, v.message  # and the times are fine


def test_the_timing_times_are_feedback_worth_no_points() -> None:
    from labs.host.grader import Grader

    lab = Grader.load_checks(FOLDER)[0]
    assert lab.spec.check("timing-times").points == 0 and "Feedback, no points" in lab.spec.check("timing-times").title
    assert lab.spec.max_score == 13


@pytest.mark.parametrize("name", sorted(WRONG_TIMES))
def test_wrong_times_lose_no_points_and_the_feedback_says_what_is_wrong(one_grader, name: str) -> None:
    code, advice = WRONG_TIMES[name]
    v = one_grader.grade(LAB, code, world_sizes=WORLD_SIZES)
    assert v.score == v.max_score, [(c.id, c.message) for c in v.checks if not c.passed]
    assert [c.id for c in v.checks if not c.passed] == ["timing-times"], v.message
    message = next(c for c in v.checks if c.id == "timing-times").message
    assert advice in message and FEEDBACK in message, message


def test_a_differently_written_solution_gets_full_marks(one_grader) -> None:
    v = one_grader.grade(LAB, ALTERNATIVE, world_sizes=[2, 3, 4])
    assert v.score == v.max_score, [(c.id, c.message) for c in v.checks if not c.passed]


def test_reference_shows_the_straggler_and_starter_says_not_implemented(one_grader) -> None:
    v = one_grader.grade(LAB, REFERENCE, world_sizes=[3])
    assert v.status == "passed" and v.score == v.max_score, v.message
    feedback = next(c for c in v.checks if c.id == "timing-times")
    assert feedback.passed and FEEDBACK in feedback.message
    times = feedback.data["world_size_3"]
    assert {f"rank_{r}" for r in range(3)} == set(times)
    # The ranks that waited for the straggler (50 ms) show it in one of their rows.
    assert any(max(t["seconds"]) >= 0.025 for t in times.values()), times
    assert all(max(t["seconds"]) >= t["driver_delayed_call"] / 2 for t in times.values()), times
    wire = next(c for c in v.checks if c.id == "communication").data["world_size_3"]
    assert 1.0 <= wire["measured_total_bytes"] / wire["expected_total_bytes"] < 1.05, wire
    v = one_grader.grade(LAB, (FOLDER / "starter.py").read_text(), world_sizes=WORLD_SIZES)
    messages = " ".join(c.message for c in v.checks)
    assert v.score == 0 and "NotImplementedError" in messages and "NameError" not in messages, messages
