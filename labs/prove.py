"""Prove a lab before students see it: the reference at full marks, every mutant losing points.

``ringlab lab test LAB_ID`` runs this: it grades the lab's ``solution.py`` and each
realistic wrong solution in ``mutants/`` through the real sandbox, prints a table,
and records the reference's communication picture (who sent how many bytes to
whom, per world size) in ``reference-wire.json`` for the result page.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from labs.grader import REFERENCE_WIRE
from labs.spec import Lab
from labs.verdict import Verdict


class Grades(Protocol):
    def grade(self, lab_id: str, code: str) -> Verdict: ...


@dataclass
class Row:
    name: str
    mutant: bool
    verdict: Verdict
    lost: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """The reference gets full marks; a mutant loses points."""
        full = self.verdict.status == "passed" and self.verdict.score == self.verdict.max_score
        return not full if self.mutant else full


def prove(grader: Grades, lab: Lab) -> list[Row]:
    """Grade the reference and every mutant of ``lab``; one row each, the reference first."""
    rows = []
    for path, mutant in [(lab.solution_path, False), *((p, True) for p in lab.mutants)]:
        verdict = grader.grade(lab.id, path.read_text(encoding="utf-8"))
        lost = [c.id for c in verdict.checks if c.score < c.points]
        rows.append(Row("solution.py" if not mutant else f"mutants/{path.name}", mutant, verdict, lost))
    return rows


def record_reference_wire(lab: Lab, reference: Verdict) -> Path | None:
    """Keep the reference's byte matrices beside the lab's files (only when it got full marks)."""
    wire = reference.data.get("wire")
    if not wire or reference.score != reference.max_score:
        return None
    path = lab.folder / REFERENCE_WIRE
    path.write_text(json.dumps(wire, indent=1, sort_keys=True) + "\n")
    return path


def first_line(path: Path) -> str:
    """A mutant's first line, its author's note on what is wrong with it."""
    line = path.read_text(encoding="utf-8").splitlines()[0] if path.is_file() else ""
    return line.lstrip("# ").strip() if line.startswith("#") else ""


def table(lab: Lab, rows: list[Row]) -> str:
    """The rows as a plain-text table a person reads in a terminal."""
    lines = [f"{'file':34} {'expected':10} {'status':14} {'score':>7} {'time':>7}  {'lost points on / note'}"]
    for row in rows:
        v = row.verdict
        expect = "loses" if row.mutant else "full"
        mark = "ok" if row.ok else "WRONG"
        note = ", ".join(row.lost) if row.mutant else v.message[:60]
        if row.mutant and not row.lost:
            note = "no check lost points: " + first_line(lab.folder / row.name)
        score = f"{v.score:>3}/{v.max_score:<3}"
        lines.append(f"{row.name:34} {expect:10} {v.status:14} {score} {v.elapsed_s:>6.2f}s  {mark}: {note}")
    return "\n".join(lines)


MIN_MUTANTS = 4


def summary(rows: list[Row]) -> dict[str, Any]:
    """Proven: the reference at full marks, at least MIN_MUTANTS mutants, and each of them losing points."""
    mutants = sum(r.mutant for r in rows)
    return {
        "ok": all(r.ok for r in rows) and mutants >= MIN_MUTANTS,
        "mutants": mutants,
        "wrong": [r.name for r in rows if not r.ok],
    }
