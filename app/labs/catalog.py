"""The labs in ``content/labs``, read from their ``lab.yaml`` on demand (torch-free, never the checks)."""

from __future__ import annotations

import threading
from pathlib import Path

from app.errors import NotFound
from labs.spec import Lab, load_labs

_lock = threading.Lock()
_cache: dict[Path, tuple[float, dict[str, Lab]]] = {}


def _stamp(root: Path) -> float:
    # Any edited lab.yaml (or an added folder) changes the newest mtime: reload then, else reuse.
    stamps = [root.stat().st_mtime] + [p.stat().st_mtime for p in root.glob("*/lab.yaml")]
    return max(stamps)


def all_labs(content_dir: Path) -> dict[str, Lab]:
    """Every lab under ``content_dir/labs`` by id, in id order; {} if there is no labs folder."""
    root = Path(content_dir) / "labs"
    if not root.is_dir():
        return {}
    stamp = _stamp(root)
    with _lock:
        cached = _cache.get(root)
        if cached is None or cached[0] != stamp:
            cached = (stamp, dict(sorted(load_labs(root).items())))
            _cache[root] = cached
        return cached[1]


def get_lab(content_dir: Path, lab_id: str) -> Lab:
    lab = all_labs(content_dir).get(lab_id)
    if lab is None:
        raise NotFound(f"There is no lab '{lab_id}'. The list of labs is at /labs.")
    return lab


def lab_for_exercise(content_dir: Path, exercise_id: str) -> Lab | None:
    return next((lab for lab in all_labs(content_dir).values() if lab.spec.exercise == exercise_id), None)


def gpus_needed(lab: Lab) -> int:
    """GPUs a worker must have to take this lab's jobs: one per rank for GPU-only labs, else none."""
    return max(lab.spec.world_sizes) if lab.spec.needs_gpu else 0


def choose_backend(lab: Lab, gpu_count: int) -> str:
    """NCCL, one GPU per rank, when the lab allows it and the worker has enough GPUs; gloo otherwise."""
    backends = lab.spec.backends
    if "nccl" in backends and gpu_count >= max(lab.spec.world_sizes):
        return "nccl"
    return "gloo" if "gloo" in backends else "nccl"
