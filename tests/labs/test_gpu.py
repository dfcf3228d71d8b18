"""NCCL on a GPU worker: world size 1 on one GPU, through the same warm sandbox design."""

from __future__ import annotations

import pytest

from .conftest import solution

torch = pytest.importorskip("torch")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU on this machine: the nccl path needs one")
def test_collectives_on_one_gpu_with_nccl() -> None:
    from labs.grader import Grader

    with Grader(pool_size=0, gpus=True) as grader:
        v = grader.grade("collectives-p2p", solution("collectives-p2p"), world_sizes=[1], backend="nccl")
    assert v.status == "passed", v.message
    assert v.score == v.max_score


def test_nccl_is_refused_without_gpu_access(grader) -> None:
    v = grader.grade("collectives-p2p", solution("collectives-p2p"), world_sizes=[1], backend="nccl")
    assert v.status == "refused"
    assert "nccl needs 1 GPU" in v.message


def test_a_backend_the_lab_does_not_list_is_refused(grader) -> None:
    v = grader.grade("ring-allreduce", solution("ring-allreduce"), backend="nccl")
    assert v.status == "refused"
