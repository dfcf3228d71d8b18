"""Labs as content: each folder validated, snapshotted and synced as a numbered version.

A lab's version holds every file of its folder except ``mutants/`` (the authors' test
material), so the worker can grade a queued submission against exactly the lab it was
submitted to, whatever was synced since. Nothing here runs lab code: ``checks.py`` and
``solution.py`` are parsed only (they import torch, and they are the worker's).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.content import records as r
from app.content.models import LabContent
from app.content.source import Problem

PARSED = ("starter.py", "solution.py", "checks.py")
MAX_LAB_BYTES = 4 << 20  # a version is stored whole in the database


def lab_files(folder: Path) -> list[Path]:
    """The files a version keeps, in path order: everything but ``mutants/``, caches and dotfiles."""
    found = []
    for path in sorted(folder.rglob("*")):
        parts = path.relative_to(folder).parts
        skipped = parts[0] == "mutants" or "__pycache__" in parts or any(p.startswith(".") for p in parts)
        if not skipped and path.is_file():
            found.append(path)
    return found


def load_lab_content(
    folder: Path, rel: Any, exercise_ids: set[str], card_ids: set[str] | None = None
) -> tuple[LabContent | None, list[Problem]]:
    """Validate one lab folder and snapshot its files; ``rel`` turns a path into the name problems give.

    ``card_ids``: every card of the decks, which the checks' ``cards:`` must name (None: not checked).
    """
    from labs.spec import LabError, card_problems, load_lab  # torch-free

    try:
        lab = load_lab(folder)
    except LabError as exc:
        return None, [Problem(rel(Path(p.path)), p.line, p.message) for p in exc.problems]
    problems: list[Problem] = []
    files: dict[str, str] = {}
    for path in lab_files(folder):
        name = path.relative_to(folder).as_posix()
        try:
            files[name] = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            problems.append(Problem(rel(path), 1, "not UTF-8 text: a lab folder holds text files only"))
            continue
        if name in PARSED or (name.endswith(".py") and "/" not in name):
            try:
                compile(files[name], str(path), "exec", dont_inherit=True)
            except (SyntaxError, ValueError) as exc:
                line = getattr(exc, "lineno", None) or 1
                problems.append(Problem(rel(path), line, f"not valid Python: {getattr(exc, 'msg', exc)}"))
    for path in lab.mutants:  # parsed like the rest, though never synced: `ringlab lab test` grades them
        try:
            compile(path.read_text(encoding="utf-8"), str(path), "exec", dont_inherit=True)
        except (SyntaxError, ValueError, UnicodeDecodeError) as exc:
            line = getattr(exc, "lineno", None) or 1
            problems.append(Problem(rel(path), line, f"not valid Python: {getattr(exc, 'msg', exc)}"))
    size = sum(len(text.encode()) for text in files.values())
    if size > MAX_LAB_BYTES:
        problems.append(
            Problem(rel(folder / "lab.yaml"), 1, f"the lab's files hold {size} bytes; at most {MAX_LAB_BYTES} fit")
        )
    if card_ids is not None:
        where = folder / "lab.yaml"
        found = card_problems(files.get("lab.yaml", ""), str(where), lab.spec, card_ids)
        problems.extend(Problem(rel(where), p.line, p.message) for p in found)
    if lab.spec.exercise not in exercise_ids:
        problems.append(
            Problem(rel(folder / "lab.yaml"), 1, f"exercise '{lab.spec.exercise}' is not in any exercise set")
        )
    spec = lab.spec.model_dump(mode="json")
    content = LabContent(id=lab.id, title=lab.spec.title, exercise=lab.spec.exercise, spec=spec, files=files)
    return (None if problems else content), problems


def sync_labs(labs: list[LabContent], upsert: Any, *, session: Session, now: Any) -> None:
    """Give every changed lab a new version (the files as they are now) and point its row at it.

    ``upsert`` is the content sync's upserter, so labs are added, updated and retired in the
    same transaction and report as everything else.
    """
    for position, lab in enumerate(labs):
        newest = session.execute(
            select(r.LabVersion.version, r.LabVersion.digest)
            .where(r.LabVersion.lab_id == lab.id)
            .order_by(r.LabVersion.version.desc())
            .limit(1)
        ).first()
        digest = lab.digest
        if newest is not None and newest.digest == digest:
            version = newest.version
        else:
            version = 1 if newest is None else newest.version + 1
        values = {"title": lab.title, "exercise_id": lab.exercise, "version": version}
        upsert(r.Lab, "lab", lab.id, position, values)
        if newest is None or newest.digest != digest:
            session.flush()  # the lab row first: its versions refer to it
            session.add(
                r.LabVersion(
                    lab_id=lab.id, version=version, digest=digest, spec=lab.spec, files=lab.files, created_at=now
                )
            )
