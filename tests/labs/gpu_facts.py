"""Judging a GPU-only lab's results without a GPU: the lab's real ``checks.py`` over result trees built here.

A GPU lab's ranks cannot run on a CPU-only machine, but its judge is plain code: these helpers
file result trees the way the grader does (``torch.save`` of the plain tree, one per rank) and
run every check of the lab over them, so the rules are tested everywhere; the real grading on a
GPU is in each lab's ``test_on_a_gpu_*`` tests.
"""

from __future__ import annotations

import io
from types import ModuleType
from typing import Any

import pytest

from labs.host.grader import Grader
from labs.host.judge import Case, Facts, GroupRun, Outcome, RankRun
from labs.rank.trees import plain
from labs.spec import Lab

from .conftest import labs_dir

torch = pytest.importorskip("torch")
NEEDS_GPU = "needs a CUDA GPU: a GPU-only lab's ranks run on NCCL, one GPU per rank"


def has_gpu() -> bool:
    return torch.cuda.is_available()


def load(lab_id: str) -> tuple[Lab, ModuleType]:
    """The lab and its trusted checks module, as the grader loads them."""
    return Grader.load_checks(labs_dir() / lab_id)


def rank(*results: Any) -> RankRun:
    """One rank that returned ``results[i]`` for call i; a ``str`` there is an exception the student's code raised."""
    run = RankRun()
    for i, tree in enumerate(results):
        if isinstance(tree, str):
            run.errors.append({"call": i, "error": "RuntimeError", "message": tree, "line": 7})
            continue
        buffer = io.BytesIO()
        torch.save(plain(tree), buffer)
        run.results[i] = buffer.getvalue()
    return run


def judge(lab: Lab, checks: ModuleType, cases: list[Case], run: RankRun) -> dict[str, Outcome]:
    """Every check of ``lab`` over one group of world size 1 that ran ``cases``, by check id."""
    from labs.host import judge as engine

    facts = Facts([GroupRun(1, cases, [run], status="ok")])
    rules = checks.RULES
    return {c.id: rules[c.id](facts) if c.id in rules else engine.correctness(facts, c.id) for c in lab.spec.checks}


def lost(outcomes: dict[str, Outcome]) -> set[str]:
    return {check for check, o in outcomes.items() if not o.passed}
