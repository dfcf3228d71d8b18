"""A worker's copies of the lab versions it grades: each stored version written out once, by digest.

The folder of a version is ``<cache>/<digest[:24]>/<lab-id>/`` holding every file the version
stored (the engine reads ``lab.yaml`` and ``checks.py`` from it, and later any other file
the lab ships). A version is written to a temporary folder and renamed into place, so a
half-written copy is never used, and two workers on one host can share the cache.
"""

from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path, PurePosixPath

from app.labs.catalog import PublishedLab


class LabUnavailable(Exception):
    """A lab version cannot be written out or loaded; grading against it cannot succeed."""


def version_dir(lab: PublishedLab, cache_dir: Path) -> Path:
    return Path(cache_dir) / lab.digest[:24] / lab.id


def materialise(lab: PublishedLab, cache_dir: Path) -> Path:
    """The folder holding this version's files, written now if this worker has not yet."""
    final = version_dir(lab, cache_dir)
    if final.is_dir():
        return final
    staging = Path(cache_dir) / f".staging-{uuid.uuid4().hex}"
    try:
        target = staging / lab.id
        for name, text in lab.files.items():
            path = PurePosixPath(name)
            if path.is_absolute() or ".." in path.parts or not path.parts:
                raise LabUnavailable(f"the stored lab names a file outside its folder: {name!r}")
            (target / path).parent.mkdir(parents=True, exist_ok=True)
            (target / path).write_text(text, encoding="utf-8")
        final.parent.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.rename(staging, final.parent)
        except OSError:
            if not final.is_dir():  # not another worker that got there first
                raise
    except OSError as exc:
        raise LabUnavailable(f"its files could not be written to {cache_dir}: {exc.strerror or exc}") from exc
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return final
