"""Each lab's mutants as test cases: the expectations come from the mutants' own headers (``labs.spec.mutants``).

A lab's test file grades its own mutants (so the suite's lab gradings stay spread over the xdist workers
file by file) with ``@pytest.mark.parametrize("mutant", mutant_params(LAB))`` and checks each with
``assert_loses`` (a verdict from the sandbox) or ``assert_lost`` (the checks a test judged itself).
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import cache
from typing import Any

import pytest

from labs.spec import DEFAULT_CONTENT, load_lab, mutants
from labs.spec.mutants import Check, Mutant


@cache
def lab_mutants(lab_id: str) -> dict[str, Mutant]:
    """The lab's mutants by name, parsed and applied to its solution.py."""
    return {m.name: m for m in mutants.load(load_lab(DEFAULT_CONTENT / lab_id))}


def mutant(lab_id: str, name: str) -> Mutant:
    return lab_mutants(lab_id)[name]


def mutant_params(lab_id: str) -> list[Any]:
    """One ``pytest.param`` per mutant of the lab, named after it."""
    return [pytest.param(m, id=m.name) for m in lab_mutants(lab_id).values()]


def lab_mutant_params(lab_ids: Iterable[str]) -> list[Any]:
    """One ``pytest.param(lab_id, mutant)`` per mutant of each lab, named ``lab/mutant``."""
    return [
        pytest.param(lab_id, m, id=f"{lab_id}/{m.name}") for lab_id in lab_ids for m in lab_mutants(lab_id).values()
    ]


def sizes(m: Mutant) -> list[int] | None:
    """The world sizes the mutant's header asks to be graded at (None: the lab's)."""
    return list(m.world_sizes) if m.world_sizes else None


def assert_loses(verdict: Any, m: Mutant) -> None:
    """The verdict shows what the header says: exactly its ``loses`` failed (``may lose`` allowed), each with
    points losing some, nothing that passed docked, every ``says`` text in the failed checks' messages."""
    checks = [Check(c.id, c.points, c.score, c.passed, c.message) for c in verdict.checks]
    wrong = mutants.mismatches(m, checks)
    assert not wrong, (m.label, wrong, verdict.status, [(c.id, c.score, c.passed, c.message) for c in checks])
    assert verdict.score < verdict.max_score, (m.label, verdict.message)


def assert_lost(lost: Iterable[str], m: Mutant) -> None:
    """Checks a test judged itself (no sandbox): every ``loses`` check, and nothing but ``may lose`` beside."""
    got = set(lost)
    assert m.loses <= got <= m.loses | m.may_lose, (m.label, sorted(got), sorted(m.loses), sorted(m.may_lose))
