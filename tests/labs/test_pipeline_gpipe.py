"""pipeline-gpipe: the replayed bubble and the wire bounds, then real grades of the mutants and of other solutions.

Each mutant is graded in the sandbox here; this checks that it loses the checks its header names, that the
messages say what to do, that correct solutions written differently get full marks, and that the
schedule (recorded inside the ranks) is feedback: torch.distributed.pipelining's ScheduleGPipe and
a schedule without overlap fail that check and lose no points.
"""

from __future__ import annotations

from typing import Any

import pytest

from labs.spec.mutants import Mutant

from . import tp_ranks
from .conftest import labs_dir
from .mutant_cases import assert_loses, mutant_params, sizes

LAB = "pipeline-gpipe"
WORLD_SIZES = [4]  # a broadcast reaches stages that are not neighbours only beyond 2 stages

# Written differently from solution.py: isend/irecv, backwards in forward order, the undivided loss
# backpropagated and the gradients divided by M at the end, the losses returned as one tensor.
ALTERNATIVE = """
import torch
import torch.distributed as dist


def gpipe_step(stage, inputs, targets, num_micro_batches, activation_shape, loss_fn):
    rank, n = dist.get_rank(), dist.get_world_size()
    prev = rank - 1 if rank > 0 else None
    nxt = rank + 1 if rank < n - 1 else None
    xs = list(inputs.chunk(num_micro_batches)) if prev is None else None
    ys = list(targets.chunk(num_micro_batches)) if nxt is None else None
    saved, losses, pending = [], [], []
    for m in range(num_micro_batches):
        if prev is None:
            x = xs[m]
        else:
            x = torch.zeros(activation_shape, dtype=torch.float64)
            dist.irecv(x, src=prev).wait()
            x.requires_grad = True
        y = stage(x)
        if nxt is None:
            y = loss_fn(y, ys[m])
            losses.append(y.detach())
        else:
            pending.append(dist.isend(y.detach().clone(), dst=nxt))
        saved.append((x, y))
    for x, y in saved:
        if nxt is None:
            torch.autograd.backward(y)
        else:
            g = torch.zeros(activation_shape, dtype=torch.float64)
            dist.irecv(g, src=nxt).wait()
            torch.autograd.backward(y, grad_tensors=g)
        if prev is not None:
            pending.append(dist.isend(x.grad, dst=prev))
    for work in pending:
        work.wait()
    for p in stage.parameters():
        p.grad.div_(num_micro_batches)
    return torch.stack(losses) if nxt is None else None
"""

# Each micro-batch forward and backward before the next: right values and bytes, no overlap.
SEQUENTIAL = """
import torch
import torch.distributed as dist


def gpipe_step(stage, inputs, targets, num_micro_batches, activation_shape, loss_fn):
    rank, world_size = dist.get_rank(), dist.get_world_size()
    first, last = rank == 0, rank == world_size - 1
    m = num_micro_batches
    xs = inputs.chunk(m) if first else [None] * m
    ys = targets.chunk(m) if last else [None] * m
    losses = []
    for j in range(m):
        if first:
            x = xs[j]
        else:
            x = torch.empty(activation_shape, dtype=torch.float64)
            dist.recv(x, src=rank - 1)
            x.requires_grad_()
        out = stage(x)
        if last:
            loss = loss_fn(out, ys[j])
            losses.append(loss.item())
            (loss / m).backward()
        else:
            dist.send(out.detach(), dst=rank + 1)
            grad = torch.empty(activation_shape, dtype=torch.float64)
            dist.recv(grad, src=rank + 1)
            out.backward(grad)
        if not first:
            dist.send(x.grad, dst=rank - 1)
    return losses if last else None
"""

SCHEDULE_GPIPE = """
import torch
import torch.distributed as dist
from torch.distributed.pipelining import PipelineStage, ScheduleGPipe


def gpipe_step(stage, inputs, targets, num_micro_batches, activation_shape, loss_fn):
    rank, world_size = dist.get_rank(), dist.get_world_size()
    pipe = PipelineStage(stage, rank, world_size, torch.device("cpu"))
    schedule = ScheduleGPipe(pipe, n_microbatches=num_micro_batches, loss_fn=loss_fn)
    if rank == 0:
        schedule.step(inputs)
    elif rank == world_size - 1:
        losses = []
        schedule.step(target=targets, losses=losses)
        return [loss.item() for loss in losses]
    else:
        schedule.step()
    return None
"""


def checks() -> Any:
    return tp_ranks.load_module(labs_dir() / LAB / "checks.py", "pipeline_gpipe_checks")


def gpipe_order(n: int, m: int) -> list[list[tuple[str, int]]]:
    return [[("F", 64 // m)] * m + [("B", 64 // m)] * m for _ in range(n)]


@pytest.mark.parametrize("n", [2, 3, 4])
@pytest.mark.parametrize("m", [1, 2, 4, 8])
def test_a_gpipe_order_replays_to_the_formula(n: int, m: int) -> None:
    c = checks()
    assert c.schedule.replay(gpipe_order(n, m), 64) == pytest.approx((n - 1) / (m + n - 1), abs=1e-12)
    assert c.schedule.theory(n, m) == pytest.approx((n - 1) / (m + n - 1))


def test_no_overlap_and_no_micro_batches_replay_to_n_minus_1_over_n() -> None:
    c = checks()
    sequential = [[("F", 16), ("B", 16)] * 4 for _ in range(4)]
    assert c.schedule.replay(sequential, 64) == pytest.approx(3 / 4)
    assert c.schedule.replay(gpipe_order(4, 1), 64) == pytest.approx(3 / 4)
    # A stage whose backward waits for a forward that never comes cannot run.
    assert c.schedule.replay([[("B", 64)], [("F", 64)]], 64) is None
    assert c.schedule.parse(["F32", "B32"]) == [("F", 32), ("B", 32)]
    assert c.schedule.parse(["F32", "X1"]) is None and c.schedule.parse("F32") is None


def test_schedule_problems_name_what_ran() -> None:
    c = checks()
    assert c.schedule.shape_problem(gpipe_order(1, 4)[0], 4, 64) is None
    assert "1 forward of 64 rows" in c.schedule.shape_problem([("F", 64), ("B", 64)], 4, 64)
    assert "backward before its last forward" in c.schedule.shape_problem([("F", 16), ("B", 16)] * 4, 4, 64)


def test_wire_bounds() -> None:
    c = checks()
    s = 128 * 256 * 8
    good = [[0, s + 576, 0, 0], [s + 576, 0, s + 576, 0], [0, s + 576, 0, s + 576], [0, 0, s + 576, 0]]
    assert c.wire_verdict(4, s, good) == []
    stray = [row[:] for row in good]
    stray[0][2] = s
    assert "not its neighbour" in c.wire_verdict(4, s, stray)[0]
    silent = [[0] * 4 for _ in range(4)]
    assert "sent only 0 bytes to rank 1" in c.wire_verdict(4, s, silent)[0]
    double = [row[:] for row in good]
    double[1][0] = 2 * s
    assert "more than the gradients" in c.wire_verdict(4, s, double)[0]


def test_each_rank_is_given_only_its_own_stage_and_data() -> None:
    import torch

    c = checks()
    (case,) = c.cases(4, torch.Generator().manual_seed(2))
    names = [sorted(i["params"]) for i in case.inputs]
    assert names[1] == ["4.bias", "4.weight", "6.bias", "6.weight"]  # linear layers 2 and 3 of 8
    assert all(not set(a) & set(b) for k, a in enumerate(names) for b in names[k + 1 :])
    assert case.inputs[0]["x"] is not None and all(i["x"] is None for i in case.inputs[1:])
    assert case.inputs[-1]["y"] is not None and all(i["y"] is None for i in case.inputs[:-1])
    assert all("seed" not in i for i in case.inputs)


@pytest.mark.parametrize("mutant", mutant_params(LAB))
def test_mutant_loses_its_checks(one_grader, mutant: Mutant) -> None:
    v = one_grader.grade(LAB, mutant.code, world_sizes=sizes(mutant))
    assert_loses(v, mutant)
    assert {c.id for c in v.checks if c.score < c.points} - {"bubble"}, "loses points on a check judged outside"


def test_reference_draws_the_bubble_chart_and_starter_says_not_implemented(one_grader) -> None:
    v = one_grader.grade(LAB, (labs_dir() / LAB / "solution.py").read_text())
    assert v.score == v.max_score, v.message
    bubble = next(c for c in v.checks if c.id == "bubble")
    chart = bubble.data["chart"]
    # The replayed schedule, then the theory drawn over it, for 2 and 4 stages; never the wall clock.
    assert [s["name"] for s in chart["series"]] == [
        "N = 2: your schedule, replayed", "N = 2: theory (N-1)/(M+N-1)",
        "N = 4: your schedule, replayed", "N = 4: theory (N-1)/(M+N-1)",
    ]  # fmt: skip
    theory = next(s for s in chart["series"] if s["name"] == "N = 4: theory (N-1)/(M+N-1)")
    assert theory["points"] == [[1, 0.75], [2, 0.6], [4, 0.4286], [8, 0.2727]] and theory["style"] == "theory"
    replayed = next(s for s in chart["series"] if s["name"] == "N = 2: your schedule, replayed")
    assert replayed["points"] == [[1, 0.5], [2, 0.3333], [4, 0.2], [8, 0.1111]]
    # The wall clock, where the runs are timed (2 stages), only in its own table, labelled noisy.
    table = bubble.data["table"]
    assert table["caption"].startswith("Measured wall clock (noisy, not judged)")
    assert [r[0] for r in table["rows"]] == ["N = 2, M = 1", "N = 2, M = 2", "N = 2, M = 4", "N = 2, M = 8"]
    assert all(0 <= float(r[1]) <= 1 for r in table["rows"])
    wire = next(c for c in v.checks if c.id == "communication").data["world_size_4"]
    s = wire["activation_bytes"]
    assert all(s <= wire["sent"][r][r + 1] < 1.05 * s for r in range(3)), wire
    v = one_grader.grade(LAB, (labs_dir() / LAB / "starter.py").read_text(), world_sizes=[2])
    messages = " ".join(c.message for c in v.checks)
    assert "NotImplementedError" in messages and "NameError" not in messages


def test_a_differently_written_solution_gets_full_marks(one_grader) -> None:
    v = one_grader.grade(LAB, ALTERNATIVE)
    assert v.score == v.max_score, v.message


def test_schedule_gpipe_gets_the_values_right_and_only_feedback_on_the_schedule(one_grader) -> None:
    v = one_grader.grade(LAB, SCHEDULE_GPIPE, world_sizes=[2])
    assert {c.id for c in v.checks if not c.passed} == {"bubble"}, v.message
    assert "torch.distributed.pipelining" in v.check("bubble").message
    assert v.score == v.max_score  # the record comes from inside the ranks: it earns nothing either way


def test_a_schedule_without_overlap_is_told_so_and_loses_no_points(one_grader) -> None:
    v = one_grader.grade(LAB, SEQUENTIAL, world_sizes=[2])
    assert {c.id for c in v.checks if not c.passed} == {"bubble"}, v.message
    assert "backward before its last forward" in v.check("bubble").message
    assert "Feedback, no points" in v.check("bubble").message and v.score == v.max_score
