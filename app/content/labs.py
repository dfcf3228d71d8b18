"""Labs as content: each folder validated, snapshotted and synced as a numbered version.

A lab's version holds every file of its folder except the authors' material (``mutants/``, their
test material, and ``NOTES.md``, the design notes the docs' lab catalogue shows), and a copy of each
shared public file it names (``content/labs/_common/``), so the worker can grade a queued submission
against exactly the lab it was submitted to, whatever was synced since. Nothing here runs lab code:
``checks.py`` and ``solution.py`` are parsed only (they import torch, and they are the worker's).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.content.check_cache import CheckCache
from app.content.models import LabContent
from app.content.source import Problem

if TYPE_CHECKING:
    from labs.spec import Lab

PARSED = ("starter.py", "solution.py", "checks.py")
# Parsed into syntax trees and checked against lab.yaml (labs.spec.contract): the checks' protocol, the driver's
# functions a case names, the functions the student's module must define.
CONTRACT = (*PARSED, "driver.py")
MAX_LAB_BYTES = 4 << 20  # a version is stored whole in the database


NOTES = "NOTES.md"  # a lab's design notes, for authors and the docs: never part of a version


def lab_files(folder: Path) -> list[Path]:
    """The files a version keeps, in path order: everything but ``mutants/``, ``NOTES.md``, caches and dotfiles
    (so notes can change without making a new version of the lab)."""
    found = []
    for path in sorted(folder.rglob("*")):
        parts = path.relative_to(folder).parts
        authors = parts[0] == "mutants" or parts == (NOTES,)
        skipped = authors or "__pycache__" in parts or any(p.startswith(".") for p in parts)
        if not skipped and path.is_file():
            found.append(path)
    return found


def version_files(lab: Lab) -> dict[str, Path]:
    """Every file a version keeps, by its name there: the lab folder's, then each shared public file it names.

    A shared helper (``content/labs/_common/mlp.py``) is stored under its plain name (``mlp.py``), as
    the ranks get it, so a version holds every file its ranks need, whatever the shared folder holds later.
    """
    files = {path.relative_to(lab.folder).as_posix(): path for path in lab_files(lab.folder)}
    for name in lab.spec.public_files:
        files.setdefault(name, lab.public_path(name))
    return files


def load_lab_content(
    folder: Path,
    rel: Any,
    exercise_ids: set[str],
    card_ids: set[str] | None = None,
    cache: CheckCache | None = None,
) -> tuple[LabContent | None, list[Problem]]:
    """Validate one lab folder and snapshot its files; ``rel`` turns a path into the name problems give.

    ``card_ids``: every card of the decks, which the checks' ``cards:`` must name (None: not checked).
    ``cache``: where the slow, pure part (the Python parsed, the checks contract, the mutants) may find
    what it found last time for the same files.
    """
    from labs.spec import LabError, card_problems, load_lab  # torch-free

    try:
        lab = load_lab(folder)
    except LabError as exc:
        return None, [Problem(rel(Path(p.path)), p.line, p.message) for p in exc.problems]
    problems: list[Problem] = []
    files: dict[str, str] = {}
    paths = version_files(lab)
    for name, path in paths.items():
        try:
            files[name] = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            problems.append(Problem(rel(path), 1, "not UTF-8 text: a lab folder holds text files only"))
    listed = sorted(p for p in (folder / "mutants").glob("*") if p.is_file())  # what labs.spec.mutants reads
    mutant_texts = [f"{p.name}\0{p.read_bytes().decode('utf-8', 'replace')}" for p in listed]
    key = CheckCache.key("lab", *(f"{n}\0{t}" for n, t in sorted(files.items())), *mutant_texts) if cache else ""
    slow = cache.get(key) if cache else None
    if slow is None:
        slow = _slow_problems(lab, files)
        if cache:
            cache.put(key, slow)
    for kind, name, line, message in slow:  # a file of the version by its name, or a mutant under the folder
        problems.append(Problem(rel(paths[name] if kind == "file" else folder / name), line, message))
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


def _slow_problems(lab: Any, files: dict[str, str]) -> list[tuple[str, str, int, str]]:
    """The parse, contract and mutant problems of a lab's files: ``(kind, name, line, message)``, where kind
    "file" names a file of the version and "mutant" a path under the lab folder. Pure in the texts read."""
    from labs.spec import contract, yaml_lines  # torch-free, as labs.spec

    found: list[tuple[str, str, int, str]] = []
    for name, text in files.items():
        if name not in CONTRACT and (name in PARSED or (name.endswith(".py") and "/" not in name)):
            try:
                compile(text, name, "exec", dont_inherit=True)
            except (SyntaxError, ValueError) as exc:
                line = getattr(exc, "lineno", None) or 1
                found.append(("file", name, line, f"not valid Python: {getattr(exc, 'msg', exc)}"))
    in_folder = lambda p: p.relative_to(lab.folder).as_posix()  # noqa: E731
    found += [("mutant", p.path, p.line, p.message) for p in _mutant_problems(lab, in_folder)]
    lines = yaml_lines(files.get("lab.yaml", ""))
    texts = {n: t for n, t in files.items() if n in CONTRACT}
    found += [("file", p.path, p.line, p.message) for p in contract.check(lab.spec, lambda n: n, lines, texts)]
    return found


def _mutant_problems(lab: Any, rel: Any) -> list[Problem]:
    """Each mutant diff's header and fit (``labs.spec.mutants``), and the mutant it makes parsed as Python: never
    synced, but `ringlab lab test` grades them, so an author hears of a diff that no longer applies here."""
    from labs.spec import (
        LabError,
        mutants,  # torch-free, as labs.spec
    )

    try:
        found = mutants.load(lab)
    except LabError as exc:
        return [Problem(rel(Path(p.path)), p.line, p.message) for p in exc.problems]
    problems = []
    for mutant in found:
        try:
            compile(mutant.code, str(mutant.path), "exec", dont_inherit=True)
        except (SyntaxError, ValueError) as exc:
            line = getattr(exc, "lineno", None) or 1
            message = f"the mutant this diff makes is not valid Python (line {line} of it): {getattr(exc, 'msg', exc)}"
            problems.append(Problem(rel(mutant.path), 1, message))
    return problems
