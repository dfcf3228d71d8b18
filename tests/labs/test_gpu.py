"""NCCL on a GPU worker: world size 1 on one GPU, through the same warm sandbox design."""

from __future__ import annotations

import pytest

from .conftest import solution

torch = pytest.importorskip("torch")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU on this machine: the nccl path needs one")
def test_collectives_on_one_gpu_with_nccl() -> None:
    from labs.host.grader import Grader

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


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU on this machine: the nccl path needs one")
def test_driver_lab_gpu_memory_cap_and_cpu_memory_limit_on_nccl(tmp_path) -> None:
    """A v2 lab (public driver, trees) on one GPU; a GPU memory hog and a CPU memory bomb are memory limits."""
    import shutil
    from pathlib import Path

    from labs.host.grader import Grader

    fixture = Path(__file__).parent / "fixtures" / "tree-lab"
    lab = tmp_path / "tree-lab"
    shutil.copytree(fixture, lab)
    text = (lab / "lab.yaml").read_text()
    text = text.replace("backends: [gloo]", "backends: [gloo, nccl]\ngpu_memory_mb: 512")
    text = text.replace('  - {id: handoff, title: "The second phase reads what the first wrote", points: 2}\n', "")
    (lab / "lab.yaml").write_text(text)
    # One GPU: no two-rank save phase here.
    (lab / "checks.py").write_text((lab / "checks.py").read_text().replace("def phases(", "def _phases("))
    code = (fixture / "solution.py").read_text()
    grab = "torch.empty(64 << 20, dtype=torch.uint8, device='cuda')"
    gpu_hog = code + f"\nimport torch\n_blocks = []\nwhile True:\n    _blocks.append({grab})\n"
    cpu_bomb = code + "\n_blocks = []\nwhile True:\n    _blocks.append(bytearray(64 << 20))\n"
    with Grader(tmp_path, pool_size=0, gpus=True) as grader:
        v = grader.grade("tree-lab", code, world_sizes=[1], backend="nccl")
        assert v.status == "passed" and v.score == v.max_score, v.message
        v = grader.grade("tree-lab", gpu_hog, world_sizes=[1], backend="nccl")
        assert v.status == "memory_limit" and "GPU memory" in v.message, v.message
        v = grader.grade("tree-lab", cpu_bomb, world_sizes=[1], backend="nccl")
        assert v.status == "memory_limit" and "GPU memory" not in v.message, v.message
