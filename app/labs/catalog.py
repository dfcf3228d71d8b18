"""The labs students see, as last synced into the database (``ringlab content sync``).

Torch-free, and it never runs lab code. Pages and the API read the current version of
each lab; a submission's page and the worker read the version it was submitted to. A lab
folder broken on disk is refused by the sync, so the last good version keeps serving.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.content import records as r
from app.errors import NotFound
from labs.spec import LabSpec

_lock = threading.Lock()
_versions: OrderedDict[tuple[str, int], PublishedLab] = OrderedDict()  # a version never changes once stored
CACHED_VERSIONS = 64


@dataclass(frozen=True)
class PublishedLab:
    """One stored version of a lab. ``files`` holds the trusted ones too: never render them."""

    spec: LabSpec
    version: int
    digest: str
    files: Mapping[str, str]

    @property
    def id(self) -> str:
        return self.spec.id

    @property
    def statement(self) -> str:
        return self.files.get("statement.md", "")

    @property
    def starter(self) -> str:
        return self.files.get("starter.py", "")


def lab_version(session: Session, lab_id: str, version: int) -> PublishedLab | None:
    """That version of the lab, retired or not; None if it was never synced."""
    key = (lab_id, version)
    with _lock:
        if key in _versions:
            _versions.move_to_end(key)
            return _versions[key]
    row = session.scalars(
        select(r.LabVersion).where(r.LabVersion.lab_id == lab_id, r.LabVersion.version == version)
    ).first()
    if row is None:
        return None
    lab = PublishedLab(LabSpec.model_validate(row.spec), row.version, row.digest, dict(row.files))
    with _lock:
        _versions[key] = lab
        while len(_versions) > CACHED_VERSIONS:
            _versions.popitem(last=False)
    return lab


def forget_versions() -> None:
    """Empty the cache of stored versions: for tests, whose rolled-back transactions reuse version numbers."""
    with _lock:
        _versions.clear()


def current_versions(session: Session) -> dict[str, int]:
    """Each live lab's current version, in id order."""
    query = select(r.Lab.id, r.Lab.version).where(r.Lab.retired_at.is_(None)).order_by(r.Lab.id)
    return {lab_id: version for lab_id, version in session.execute(query)}


def all_labs(session: Session) -> dict[str, PublishedLab]:
    """Every live lab by id, in id order, at its current version."""
    labs = {}
    for lab_id, version in current_versions(session).items():
        lab = lab_version(session, lab_id, version)
        if lab is not None:
            labs[lab_id] = lab
    return labs


def get_lab(session: Session, lab_id: str) -> PublishedLab:
    """The live lab's current version, or NotFound."""
    version = session.scalar(select(r.Lab.version).where(r.Lab.id == lab_id, r.Lab.retired_at.is_(None)))
    lab = lab_version(session, lab_id, version) if version is not None else None
    if lab is None:
        raise NotFound(f"There is no lab '{lab_id}'. The list of labs is at /labs.")
    return lab


def submitted_lab(session: Session, lab_id: str, version: int | None) -> PublishedLab:
    """The lab a submission was made to: its version if recorded, else the current one."""
    lab = lab_version(session, lab_id, version) if version is not None else None
    return lab if lab is not None else get_lab(session, lab_id)


def gpus_needed(lab: PublishedLab) -> int:
    """GPUs a worker must have to take this lab's jobs: one per rank for GPU-only labs, else none."""
    return max(lab.spec.world_sizes) if lab.spec.needs_gpu else 0


def choose_backend(lab: PublishedLab, gpu_count: int) -> str:
    """NCCL, one GPU per rank, when the lab allows it and the worker has enough GPUs; gloo otherwise."""
    backends = lab.spec.backends
    if "nccl" in backends and gpu_count >= max(lab.spec.world_sizes):
        return "nccl"
    return "gloo" if "gloo" in backends else "nccl"
