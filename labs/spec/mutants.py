"""Mutants: a lab's realistic wrong solutions, each stored as ``solution.py`` with one mistake.

``content/labs/<id>/mutants/<name>.diff`` is a header of ``# key: value`` lines, then a unified
diff against ``solution.py``::

    # mistake: splits with torch.chunk, which returns fewer than N chunks for 9 elements on 4 ranks
    # loses: ring-all-reduce, ring-neighbours, communication-volume
    # says: torch.chunk
    # world sizes: 4
    --- solution.py
    +++ solution.py
    @@ -20,7 +20,7 @@
    ...

Storing the mistake rather than a copy keeps a mutant in step with its reference: a change to
``solution.py`` that a diff no longer fits is an authoring error at the diff's line, not a copy
that silently drifts. The header says what grading the mutant must show, so the expectation lives
with the lab (``ringlab lab test`` and the lab tests read it) instead of in a table in ``tests/``.

Torch-free and pure apart from reading the files: ``ringlab content check`` parses every diff.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import whatthepatch
from whatthepatch.exceptions import WhatThePatchException

from labs.spec import Lab, LabError, LabProblem, LabSpec

SUFFIX = ".diff"
TARGET = "solution.py"  # the file every diff changes, named on its ---/+++ lines
# Header keys, in the order a written header lists them.
MISTAKE, LOSES, MAY_LOSE, SAYS, WORLD_SIZES = "mistake", "loses", "may lose", "says", "world sizes"
KEYS = (MISTAKE, LOSES, MAY_LOSE, SAYS, WORLD_SIZES)
REQUIRED = (MISTAKE, LOSES)
REPEATABLE = (SAYS,)
Fields = dict[str, list[tuple[int, str]]]  # a header's values by key, each with its line


@dataclass(frozen=True)
class Mutant:
    """One parsed mutant: what is wrong, what grading must show, and the code to grade.

    ``loses`` are exactly the checks that must not pass (0-point feedback checks included), each
    check there with points losing some of them; ``may_lose`` are checks a racy mistake may or may
    not fail; each ``says`` text is in the failed checks' messages; ``world_sizes`` (when set) are
    the only sizes the mutant is graded at, a subset of the lab's.
    """

    name: str
    path: Path
    mistake: str
    loses: frozenset[str]
    may_lose: frozenset[str]
    says: tuple[str, ...]
    world_sizes: tuple[int, ...] | None
    code: str

    @property
    def label(self) -> str:
        return f"mutants/{self.path.name}"


@dataclass(frozen=True)
class Check:
    """What a mutant's grading showed for one check (a ``CheckResult`` has these fields)."""

    id: str
    points: float
    score: float
    passed: bool
    message: str


def _split(text: str) -> tuple[list[tuple[int, str]], str, int]:
    """The header's lines (with their line numbers), the diff's text, and the line the diff starts on."""
    lines = text.splitlines(keepends=True)
    header = []
    n = 0
    while n < len(lines) and lines[n].startswith("#"):
        header.append((n + 1, lines[n].rstrip("\n")))
        n += 1
    return header, "".join(lines[n:]), n + 1


def _ids(value: str) -> list[str]:
    return [part.strip() for part in value.split(",") if part.strip()]


def _hunk_line(diff_text: str, first_line: int, hunk: int | None) -> int:
    """The file line of hunk number ``hunk`` (from 1): where an author looks when it does not apply."""
    starts = [i for i, line in enumerate(diff_text.splitlines()) if line.startswith("@@")]
    if hunk is None or not 1 <= hunk <= len(starts):
        return first_line
    return first_line + starts[hunk - 1]


def apply(solution: str, diff_text: str) -> str:
    """``solution`` with a unified diff applied, exactly: no fuzz, no offsets (``whatthepatch``).

    Raises ``WhatThePatchException`` (``hunk`` set when a hunk does not fit) or ``ValueError``.
    """
    diffs = list(whatthepatch.parse_patch(diff_text))
    if len(diffs) != 1 or diffs[0].header is None:
        raise ValueError(f"expected one unified diff of {TARGET} (--- {TARGET} / +++ {TARGET} / @@ hunks)")
    diff = diffs[0]
    if (diff.header.old_path, diff.header.new_path) != (TARGET, TARGET):
        raise ValueError(f"the diff must change {TARGET} (--- {TARGET} / +++ {TARGET})")
    if not diff.changes:
        raise ValueError("the diff changes nothing: a mutant is the solution with one mistake")
    lines = whatthepatch.apply_diff(diff, solution)
    return "\n".join(lines) + "\n"


def _fields(header: list[tuple[int, str]], where: str) -> tuple[Fields, list[LabProblem]]:
    """The header's values by key, each with its line; an unknown, repeated or empty key is a problem."""
    problems: list[LabProblem] = []
    fields: Fields = {}
    for line_no, line in header:
        key, colon, value = line.lstrip("#").partition(":")
        key = key.strip().lower()
        if not colon or key not in KEYS:
            known = ", ".join(f"'{k}:'" for k in KEYS)
            problems.append(LabProblem(where, line_no, f"unknown header line {line!r}: the keys are {known}"))
        elif key in fields and key not in REPEATABLE:
            problems.append(LabProblem(where, line_no, f"'{key}:' given twice: give it once"))
        elif not value.strip():
            problems.append(LabProblem(where, line_no, f"'{key}:' is empty"))
        else:
            fields.setdefault(key, []).append((line_no, value.strip()))
    for key in REQUIRED:
        if key not in fields and not any(p.message.startswith(f"'{key}:'") for p in problems):
            problems.append(LabProblem(where, 1, f"missing header line '# {key}: ...' before the diff"))
    return fields, problems


def _checks(fields: Fields, spec: LabSpec, where: str) -> tuple[dict[str, frozenset[str]], list[LabProblem]]:
    """``loses`` and ``may lose`` as sets of check ids of ``lab.yaml``, with what is wrong with them."""
    ids = {c.id: c for c in spec.checks}
    problems, sets = [], {}
    for key in (LOSES, MAY_LOSE):
        for line_no, value in fields.get(key, []):
            sets[key] = frozenset(_ids(value))
            if unknown := [i for i in _ids(value) if i not in ids]:
                problems.append(
                    LabProblem(where, line_no, f"'{key}:' names {', '.join(unknown)}, not a check of lab.yaml "
                               f"(its checks: {', '.join(ids)})")
                )  # fmt: skip
    loses, may_lose = sets.get(LOSES, frozenset()), sets.get(MAY_LOSE, frozenset())
    if LOSES in fields and loses <= ids.keys() and not any(ids[c].points > 0 for c in loses):
        message = "'loses:' names no check with points: a mutant must lose points"
        problems.append(LabProblem(where, fields[LOSES][0][0], message))
    if both := sorted(loses & may_lose):
        message = f"{', '.join(both)} in both 'loses:' and 'may lose:': a check is either lost for certain or may be"
        problems.append(LabProblem(where, fields[MAY_LOSE][0][0], message))
    return sets, problems


def _world_sizes(fields: Fields, spec: LabSpec, where: str) -> tuple[tuple[int, ...] | None, list[LabProblem]]:
    for line_no, value in fields.get(WORLD_SIZES, []):
        try:
            sizes = tuple(int(v) for v in _ids(value))
        except ValueError:
            return None, [LabProblem(where, line_no, f"'{WORLD_SIZES}:' must be whole numbers, e.g. '2, 4'")]
        if not sizes or any(n not in spec.world_sizes for n in sizes):
            allowed = ", ".join(map(str, spec.world_sizes))
            message = f"'{WORLD_SIZES}:' must be some of the lab's world sizes ({allowed})"
            return None, [LabProblem(where, line_no, message)]
        return sizes, []
    return None, []


def parse(path: Path, text: str, solution: str, spec: LabSpec) -> tuple[Mutant | None, list[LabProblem]]:
    """One mutant file's text, checked against the lab; problems say ``path:line: message``."""
    where = str(path)
    header, diff_text, first = _split(text)
    fields, problems = _fields(header, where)
    sets, wrong = _checks(fields, spec, where)
    world_sizes, wrong_sizes = _world_sizes(fields, spec, where)
    problems += wrong + wrong_sizes
    code = ""
    try:
        code = apply(solution, diff_text)
    except WhatThePatchException as exc:
        at = _hunk_line(diff_text, first, getattr(exc, "hunk", None))
        problems.append(LabProblem(where, at, f"the diff no longer applies to {TARGET}: {exc}"))
    except ValueError as exc:
        problems.append(LabProblem(where, first, str(exc)))
    if problems:
        return None, problems
    return Mutant(
        name=path.stem,
        path=path,
        mistake=fields[MISTAKE][0][1],
        loses=sets.get(LOSES, frozenset()),
        may_lose=sets.get(MAY_LOSE, frozenset()),
        says=tuple(value for _, value in fields.get(SAYS, [])),
        world_sizes=world_sizes,
        code=code,
    ), []


def load(lab: Lab) -> list[Mutant]:
    """Every mutant of ``lab``, parsed and applied; a ``LabError`` lists every problem of every file."""
    solution = lab.solution_path.read_text(encoding="utf-8")
    found, problems = [], []
    listed = sorted((lab.folder / "mutants").glob("*"))
    strays = [p for p in listed if p.is_file() and p.suffix != SUFFIX and not p.name.startswith(".")]
    problems += [LabProblem(str(p), 1, f"not a mutant: mutants/ holds {SUFFIX} files only") for p in strays]
    for path in lab.mutants:
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            problems.append(LabProblem(str(path), 1, "not UTF-8 text"))
            continue
        mutant, wrong = parse(path, text, solution, lab.spec)
        problems += wrong
        if mutant is not None:
            found.append(mutant)
    if problems:
        raise LabError(problems)
    return found


def write(mistake: str, solution: str, code: str, *, loses: Iterable[str], may_lose: Iterable[str] = (),
          says: Iterable[str] = (), world_sizes: Iterable[int] = ()) -> str:  # fmt: skip
    """A mutant file's text: the header, then ``code`` as a unified diff against ``solution``."""
    header = [f"# {MISTAKE}: {mistake}", f"# {LOSES}: {', '.join(loses)}"]
    if may := list(may_lose):
        header.append(f"# {MAY_LOSE}: {', '.join(may)}")
    header += [f"# {SAYS}: {text}" for text in says]
    if sizes := list(world_sizes):
        header.append(f"# {WORLD_SIZES}: {', '.join(map(str, sizes))}")
    diff = difflib.unified_diff(solution.splitlines(keepends=True), code.splitlines(keepends=True), TARGET, TARGET)
    return "\n".join(header) + "\n" + "".join(diff)


def mismatches(mutant: Mutant, checks: Iterable[Check]) -> list[str]:
    """What is wrong with a mutant's grading against its header, in words; empty when it showed exactly that.

    Not passed must be every ``loses`` check and nothing but ``may_lose`` beside them; each check with
    points among them must have lost some; each ``says`` text must be in the failed checks' messages.
    """
    checks = list(checks)
    failed = {c.id for c in checks if not c.passed}
    wrong = []
    if kept := sorted(mutant.loses - failed):
        wrong.append(f"passes {', '.join(kept)}, which it should lose")
    if extra := sorted(failed - mutant.loses - mutant.may_lose):
        wrong.append(f"also loses {', '.join(extra)}, not in its 'loses:'")
    full = sorted(c.id for c in checks if not c.passed and c.points > 0 and c.score >= c.points)
    if full:
        wrong.append(f"fails {', '.join(full)} but keeps all its points")
    if docked := sorted(c.id for c in checks if c.passed and c.score < c.points):
        wrong.append(f"passes {', '.join(docked)} but loses points on it")
    said = " ".join(c.message for c in checks if not c.passed)
    wrong += [f"its failed checks' messages do not say {text!r}" for text in mutant.says if text not in said]
    return wrong
