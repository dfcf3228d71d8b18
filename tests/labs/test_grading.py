"""Grading real submissions end to end: verdicts, partial credit, first mismatch, wire bytes."""

from __future__ import annotations

import pytest

from labs.verdict import Verdict

from .conftest import solution, starter

RING = "ring-allreduce"
P2P = "collectives-p2p"


def test_reference_solutions_pass_every_check(grader) -> None:
    for lab in (P2P, RING):
        v = grader.grade(lab, solution(lab))
        assert v.status == "passed", v.message
        assert v.score == v.max_score == 10
        assert all(c.passed for c in v.checks)
        assert Verdict.from_json(v.to_json()) == v


def test_ring_volume_is_measured_per_rank_next_to_theory(grader) -> None:
    v = grader.grade(RING, solution(RING), world_sizes=[4])
    data = v.check("communication-volume").data["world_size_4"]
    assert data["tensor_bytes"] == 1 << 20
    assert data["theoretical_bytes_per_rank"] == 3 * (1 << 20) // 2
    for sent in data["measured_bytes_per_rank"]:
        assert 1.0 <= sent / data["theoretical_bytes_per_rank"] < 1.01
    # The kernel saw every rank send (almost) only to its right-hand neighbour.
    sent = v.check("ring-neighbours").data["world_size_4"]
    assert all(sent[str(r)][str((r + 1) % 4)] > 1 << 20 for r in range(4))


def test_starter_gets_zero_with_the_students_exception(grader) -> None:
    v = grader.grade(P2P, starter(P2P), world_sizes=[2])
    assert v.status == "runtime_error"
    assert v.score == 0
    assert "NotImplementedError" in v.check("all-reduce").message
    assert "line" in v.check("all-reduce").message


def test_partial_credit_for_the_functions_that_work(grader) -> None:
    code = solution(P2P).replace(
        "def reduce_scatter(tensor: torch.Tensor) -> torch.Tensor:",
        "def reduce_scatter(tensor):\n    raise NotImplementedError\n\n\ndef _unused(tensor):",
    )
    v = grader.grade(P2P, code, world_sizes=[2, 3])
    assert v.check("all-reduce").passed and v.check("all-gather").passed
    assert not v.check("reduce-scatter").passed
    # Holds on its own: only send/recv were used, whatever reduce_scatter got wrong.
    assert v.check("no-builtin-collectives").passed
    assert v.score == 7


def test_wrong_answer_reports_the_first_mismatch(grader) -> None:
    code = (
        solution(RING) + "\n\n_real = ring_all_reduce\n\n\ndef ring_all_reduce(tensor):\n"
        "    _real(tensor)\n    if dist.get_rank() == 1:\n        tensor.view(-1)[2] += 1\n"
    )
    v = grader.grade(RING, code, world_sizes=[3])
    assert v.status == "failed"
    check = v.check("ring-all-reduce")
    first = check.data["first_failure"]
    assert first["rank"] == 1 and first["world_size"] == 3
    assert "element [2]" in first["reason"] and "expected" in first["reason"]


def test_builtin_collective_fails_its_check_even_when_right(grader) -> None:
    code = "import torch.distributed as dist\n\ndef ring_all_reduce(tensor):\n    dist.all_reduce(tensor)\n"
    v = grader.grade(RING, code, world_sizes=[2])
    assert v.check("ring-all-reduce").passed
    assert not v.check("no-builtin-collectives").passed
    assert "all_reduce" in v.check("no-builtin-collectives").message


def test_collective_through_the_process_group_object_is_caught(grader) -> None:
    code = (
        "import torch.distributed as dist\n\ndef ring_all_reduce(tensor):\n"
        "    dist.distributed_c10d._get_default_group().allreduce([tensor]).wait()\n"
    )
    v = grader.grade(RING, code, world_sizes=[2])
    assert v.check("ring-all-reduce").passed
    assert not v.check("no-builtin-collectives").passed


def test_naive_all_to_all_is_correct_but_not_a_ring(grader) -> None:
    code = """
import torch
import torch.distributed as dist


def ring_all_reduce(tensor):
    rank, size = dist.get_rank(), dist.get_world_size()
    total = tensor.clone()
    for peer in range(size):
        if peer == rank:
            continue
        incoming = torch.empty_like(tensor)
        ops = [dist.P2POp(dist.isend, tensor.contiguous(), peer), dist.P2POp(dist.irecv, incoming, peer)]
        for req in dist.batch_isend_irecv(ops):
            req.wait()
        total += incoming
    tensor.copy_(total)
"""
    v = grader.grade(RING, code, world_sizes=[4])
    assert v.check("ring-all-reduce").passed
    assert not v.check("ring-neighbours").passed
    volume = v.check("communication-volume")
    assert not volume.passed
    # 3 full copies per rank against the optimal 1.5.
    assert volume.data["world_size_4"]["ratio_to_theory"][0] == pytest.approx(2.0, rel=0.01)


def test_syntax_error_is_graded_with_its_line(grader) -> None:
    v = grader.grade(RING, "import torch\n\ndef ring_all_reduce(tensor)\n    pass\n")
    assert v.status == "compile_error"
    assert "line 3" in v.message
    assert v.score == 0


def test_a_ring_that_sends_nothing_earns_no_wire_points(grader) -> None:
    code = "import torch.distributed as dist\n\n\ndef ring_all_reduce(tensor):\n    return None\n"
    v = grader.grade(RING, code, world_sizes=[3])
    assert not v.check("communication-volume").passed
    assert "sent only 0 bytes" in v.check("communication-volume").message
    assert not v.check("ring-neighbours").passed and not v.check("no-builtin-collectives").passed
    assert v.score == 0
