"""Prove a lab before students see it: the reference at full marks, the starter failing cleanly, and every
mutant losing exactly the checks its header names.

``ringlab lab test LAB_ID`` runs this: it grades the lab's ``solution.py``, its ``starter.py`` and each
realistic wrong solution in ``mutants/`` (diffs against ``solution.py``, see ``labs.spec.mutants``) through the
real sandbox, prints a table, and records the reference's communication picture (who sent how many bytes
to whom, per world size) in ``reference-wire.json`` for the result page.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from labs.host.judge import Case
from labs.rank.trees import leaves
from labs.spec import Lab
from labs.spec import mutants as mutants_
from labs.spec.mutants import Check, Mutant
from labs.verdict import Status, Verdict

MIN_MUTANTS = 4
NOTE = 100  # characters of a verdict's message in the table; --verbose prints every check's message whole
# The grading time a lab aims at for its reference, all its world sizes together: bench/labs.py's target.
# A script lab runs the whole script twice per world size (killed, then resumed), hence its own.
TIME_TARGET_S = 1.0
SCRIPT_TIME_TARGET_S = 3.0
# A starter that ends in one of these says nothing about the student's first step: the grader failed
# (``internal_error``, ``refused``) or the starter itself cannot be run (``compile_error``, ``not_allowed``).
NOT_CLEAN: tuple[Status, ...] = ("internal_error", "refused", "compile_error", "not_allowed")


class Grades(Protocol):
    def grade(self, lab_id: str, code: str, *, world_sizes: list[int] | None = None) -> Verdict: ...


@dataclass
class Row:
    """One graded file and what is wrong with its result (``problems``; empty when it is as it must be)."""

    name: str
    role: Literal["reference", "starter", "mutant"]
    verdict: Verdict
    problems: list[str] = field(default_factory=list)
    mutant: Mutant | None = None

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def lost(self) -> list[str]:
        """The checks that lost points."""
        return [c.id for c in self.verdict.checks if c.score < c.points]


def full_marks(verdict: Verdict) -> bool:
    return verdict.status == "passed" and verdict.score == verdict.max_score


def reference_problems(verdict: Verdict) -> list[str]:
    if full_marks(verdict):
        return []
    failed = ", ".join(c.id for c in verdict.checks if not c.passed)
    said = f", fails {failed}" if failed else ""
    return [f"the reference must get full marks: {verdict.status}, {_score(verdict)}{said}"]


def starter_problems(verdict: Verdict) -> list[str]:
    """A starter must fail, and fail as a student's first try does: by running, not by our error."""
    if verdict.status in NOT_CLEAN:
        return [f"the starter must run and fail cleanly, not end in {verdict.status}: {verdict.message}"]
    if verdict.score >= verdict.max_score:
        return ["the starter gets full marks: it must be below them"]
    return []


def mutant_problems(mutant: Mutant, verdict: Verdict) -> list[str]:
    checks = [Check(c.id, c.points, c.score, c.passed, c.message) for c in verdict.checks]
    problems = mutants_.mismatches(mutant, checks)
    if verdict.score >= verdict.max_score and not problems:
        problems.append("loses no points")
    return problems


def prove(grader: Grades, lab: Lab, mutants: Sequence[Mutant] | None = None) -> list[Row]:
    """Grade the reference, the starter and every mutant of ``lab``: one row each, in that order.

    ``mutants`` default to the lab's own (``labs.spec.mutants.load``, which raises ``LabError`` for a diff that
    does not apply or a header that is wrong); each is graded at its ``world sizes`` when it names them.
    """
    found = mutants_.load(lab) if mutants is None else mutants
    # The starter first: a fresh grader's first job pays for warming up, and the reference's time is compared
    # with the lab's target (``slow_warning``).
    starter = grader.grade(lab.id, lab.starter)
    reference = grader.grade(lab.id, lab.solution_path.read_text(encoding="utf-8"))
    rows = [
        Row("solution.py", "reference", reference, reference_problems(reference)),
        Row("starter.py", "starter", starter, starter_problems(starter)),
    ]
    for mutant in found:
        sizes = list(mutant.world_sizes) if mutant.world_sizes else None
        verdict = grader.grade(lab.id, mutant.code, world_sizes=sizes)
        rows.append(Row(mutant.label, "mutant", verdict, mutant_problems(mutant, verdict), mutant))
    return rows


REFERENCE_WIRE = "reference-wire.json"


def reference_wire(lab: Lab) -> dict[str, Any] | None:
    """The reference solution's picture, recorded by ``ringlab lab test`` next to the lab's files."""
    path = lab.folder / REFERENCE_WIRE
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def record_reference_wire(lab: Lab, reference: Verdict) -> Path | None:
    """Keep the reference's byte matrices beside the lab's files (only when it got full marks)."""
    wire = reference.data.get("wire")
    if not wire or reference.score != reference.max_score:
        return None
    path = lab.folder / REFERENCE_WIRE
    path.write_text(json.dumps(wire, indent=1, sort_keys=True) + "\n")
    return path


def time_target(lab: Lab) -> float:
    """The seconds the reference's grading aims at, every world size together."""
    return SCRIPT_TIME_TARGET_S if lab.spec.entry == "script" else TIME_TARGET_S


def slow_warning(lab: Lab, rows: list[Row]) -> str | None:
    """A warning when the reference took longer to grade than the lab's target; None within it."""
    reference = next(r for r in rows if r.role == "reference")
    target = time_target(lab)
    if reference.verdict.elapsed_s <= target:
        return None
    sizes = ", ".join(map(str, lab.spec.world_sizes))
    return (
        f"warning: the reference took {reference.verdict.elapsed_s:.2f} s to grade (world sizes {sizes}), past the "
        f"target of {target:.1f} s a lab aims at; time it warm with bench/labs.py --labs {lab.id}"
    )


def _num(x: float) -> str:
    return f"{x:g}"


def _score(v: Verdict) -> str:
    return f"{_num(v.score)}/{_num(v.max_score)}"


def table(lab: Lab, rows: list[Row], *, verbose: bool = False) -> str:
    """The rows as a plain-text table a person reads in a terminal; ``verbose`` adds every check's message, and a
    row that is not as it must be always shows its failed checks' messages."""
    lines = [f"{'file':40} {'expected':9} {'status':14} {'score':>9} {'time':>7}  note"]
    for row in rows:
        v = row.verdict
        expect = {"reference": "full", "starter": "below", "mutant": "loses"}[row.role]
        mark = "ok" if row.ok else "WRONG"
        if row.problems:
            note = "; ".join(row.problems)
        elif row.mutant is not None:
            failed = [c.id for c in v.checks if not c.passed]
            note = "loses " + ", ".join(failed)
        else:
            note = "" if verbose else v.message if len(v.message) <= NOTE else v.message[: NOTE - 3] + "..."
        said = f"{mark}: {note}" if note else mark
        lines.append(f"{row.name:40} {expect:9} {v.status:14} {_score(v):>9} {v.elapsed_s:>6.2f}s  {said}")
        if verbose:
            if row.mutant is not None:
                lines.append(f"    mistake: {row.mutant.mistake}")
            lines += [_check_line(c.id, c.score, c.points, c.passed, c.message) for c in v.checks]
        elif not row.ok:  # what went wrong, in the grader's words: a grading that is not as it must be may not recur
            lines += [_check_line(c.id, c.score, c.points, c.passed, c.message) for c in v.checks if not c.passed]
    return "\n".join(lines)


def _check_line(check_id: str, score: float, points: float, passed: bool, message: str) -> str:
    # The whole message, as the student reads it: an author judges the feedback, not a cut of it.
    head = f"    {'pass' if passed else 'FAIL'} {check_id} {_num(score)}/{_num(points)}: "
    return head + message.replace("\n", "\n" + " " * len(head))


def summary(rows: list[Row]) -> dict[str, Any]:
    """Proven: every row as it must be and at least MIN_MUTANTS mutants."""
    count = sum(r.role == "mutant" for r in rows)
    return {
        "ok": all(r.ok for r in rows) and count >= MIN_MUTANTS,
        "mutants": count,
        "wrong": [r.name for r in rows if not r.ok],
    }


def unmatched_tolerances(tolerance: dict[str, object] | None, expected: object) -> list[str]:
    """The keys of a case's ``tolerance`` that are a prefix of no path of its ``expected`` tree.

    Such a key holds nothing to its tolerance (a misspelt ``"param"`` for ``"params"``): the values keep
    the default for their dtype. Known only once the case is built, so ``ringlab lab test`` asks this.
    """
    paths = [path for path, _ in leaves(expected)]
    return [key for key in tolerance or {} if not any(p == key or p.startswith((key + "[", key + ".")) for p in paths)]


def built_cases(lab: Lab, seed: int = 0) -> list[Case]:
    """Every case of the lab's plan, built from ``checks.py`` as the grader builds them (the references too:
    seconds for some labs, so ``ringlab lab test`` builds them once for the checks below)."""
    from labs.host.grader import Grader
    from labs.host.groups import plan
    from labs.host.judge import settle

    _, checks = Grader.load_checks(lab.folder)
    cases = [case for group in plan(checks, list(lab.spec.world_sizes), seed) for case in group.cases]
    settle(cases)
    return cases


def case_problems(lab: Lab, cases: Sequence[Case] | None = None) -> list[str]:
    """What the content check reads from ``Case(...)`` calls as written, checked on the cases built.

    A check id or ``parts`` key that ``lab.yaml`` does not have, a ``driver`` function ``driver.py`` does not
    define: the content check finds these where they are literals in the call; a lab that builds them
    (a helper function, a dict made beforehand) is held to the same contract here, where ``ringlab lab
    test`` builds its plan as the grader does.
    """
    from labs.spec import UNJUDGED, contract

    ids = {c.id for c in lab.spec.checks}
    defined: set[str] = set()
    if "driver.py" in lab.spec.public_files:
        module = contract.read(lab.public_path("driver.py").read_text(), "driver.py")
        defined = set(module.defined) if isinstance(module, contract.Module) else set()
    found: list[str] = []
    for case in built_cases(lab) if cases is None else cases:
        if case.check not in ids and case.check != UNJUDGED:
            found.append(f"the case {case.label} judges '{case.check}', which is not a check in lab.yaml")
        found += [f"the case {case.label} has parts '{k}', which is not a check in lab.yaml"
                  for k in case.parts or {} if k not in ids]  # fmt: skip
        if case.driver and case.driver not in defined:
            found.append(f"the case {case.label} runs driver.{case.driver}, which driver.py does not define")
    return [f"{lab.checks_path}: {line}" for line in dict.fromkeys(found)]


def tolerance_problems(lab: Lab, cases: Sequence[Case] | None = None) -> list[str]:
    """Each ``Case`` tolerance key that matches no path of any case's expected result, in the lab's plan.

    Such a key holds nothing to its tolerance (``"param"`` for ``"params"``): the values it meant keep
    their dtype's default, and a right answer may lose points. (One tolerance dict shared by cases
    with different results is fine: a key counts as used when it matches some case's result.) Only the
    cases built tell, so this builds them, as the grader does, from ``checks.py``.
    """
    keys: dict[str, str] = {}  # tolerance key -> the label of a case that names it
    trees: list[object] = []
    for case in built_cases(lab) if cases is None else cases:
        trees.extend(case.expected)  # every rank's: a pipeline's last stage alone has the losses
        for key in case.tolerance or {}:
            keys.setdefault(key, case.label)
    unused = set(keys)
    for tree in trees:
        unused &= set(unmatched_tolerances(dict.fromkeys(unused), tree))
    return [
        f"{lab.checks_path}: tolerance key '{key}' (in the case {keys[key]}) is a prefix of no path of any"
        " case's expected result: the values it meant keep their dtype's default tolerance"
        for key in sorted(unused)
    ]
