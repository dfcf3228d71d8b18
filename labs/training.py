"""Rules that training labs share (trusted, outside the sandbox): results judged with a hint,
replicas that must stay identical, and what to say when training did not finish.

A training lab's driver returns, per rank, a tree with the parameters after training
(``params``) and whatever else its checks judge. Its ``checks.py`` builds on these.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from labs.judge import Case, Facts, Outcome, case_failure, result, summarise_failures

Hint = str | Callable[[Any, int, Case, int], str]
UNFINISHED = "training did not finish on every rank ({}), so {}: fix the error that the {} check shows"


def cases_judging(facts: Facts, check: str) -> list[tuple[Any, int, Case]]:
    """(group, case index, case) of every case that judges ``check``."""
    return [(g, i, c) for g in facts.groups for i, c in enumerate(g.cases) if c.judges(check)]


def finished(g: Any, i: int) -> bool:
    """Every rank of the group returned a result tree (training ran to the end everywhere)."""
    return all(isinstance(result(g, i, r), dict) for r in range(g.world_size))


def sizes(names: list[str]) -> str:
    return "world size " + ", ".join(names) if names else ""


def judge(facts: Facts, check: str, hint: Hint, *, success: str) -> Outcome:
    """Every rank's result right at ``check``'s keys; the first failure in full, then ``hint``'s advice.

    ``hint`` is advice as text, or a function of the first failure (group, case index, case, rank);
    it is given only when that rank finished training. Partial credit: the share of right results.
    """
    total = passed = 0
    failures: list[dict[str, Any]] = []
    first: tuple[Any, int, Case, int] | None = None
    for g, i, case in cases_judging(facts, check):
        for r in range(g.world_size):
            total += 1
            why = case_failure(g, i, r, part=check)
            if why is None:
                passed += 1
                continue
            failures.append({"group": g.name, "world_size": g.world_size, "rank": r, "case": case.label, "reason": why})
            first = first or (g, i, case, r)
    data: dict[str, Any] = {"rank_cases": total, "passed": passed}
    if not total:
        return Outcome(False, "no cases were run for this check", data, fraction=0.0)
    if first is None:
        return Outcome(True, f"all {total} rank results equal {success}", data, fraction=1.0)
    g, i, case, r = first
    advice = (hint if isinstance(hint, str) else hint(g, i, case, r)).strip()
    extra = f" {advice}" if isinstance(result(g, i, r), dict) and advice else ""
    data["first_failure"] = failures[0]
    return Outcome(False, f"{summarise_failures(failures, total)}.{extra}", data, fraction=passed / total)


def ranks_identical(facts: Facts, *, steps: int, advice: str, first_check: str) -> Outcome:
    """Every rank ended with the same parameters (``params``), per world size; ``advice`` says how to get there."""
    problems: list[str] = []
    unfinished: list[str] = []
    good = total = 0
    for g, i, _ in cases_judging(facts, "parameters"):
        total += 1
        if not finished(g, i):
            unfinished.append(str(g.world_size))
            continue
        diff = first_difference([result(g, i, r) for r in range(g.world_size)], steps)
        if diff:
            problems.append(f"world size {g.world_size}: {diff}")
        else:
            good += 1
    if not total:
        return Outcome(False, "no cases were run for this check", fraction=0.0)
    message = "; ".join(problems) + f". {advice}" if problems else ""
    if unfinished:
        why = UNFINISHED.format(sizes(unfinished), "the ranks' parameters could not be compared", first_check)
        message += (" " if message else "") + why[0].upper() + why[1:] + "."
    if message:
        return Outcome(False, message, fraction=good / total)
    return Outcome(True, "every rank ended with the same parameters", fraction=1.0)


def first_difference(trees: list[dict[str, Any]], steps: int) -> str | None:
    """Where another rank's ``params`` first differ from rank 0's, or None."""
    import torch

    base = trees[0]["params"]
    for r, tree in enumerate(trees[1:], start=1):
        for name, want in base.items():
            got = tree["params"].get(name)
            if not isinstance(got, torch.Tensor) or got.shape != want.shape:
                return f'rank {r} has no params["{name}"] of shape {tuple(want.shape)}'
            if not torch.allclose(got, want, rtol=1e-12, atol=1e-14):
                delta = (got - want).abs()
                at = tuple(int(k) for k in torch.unravel_index(delta.argmax(), delta.shape))
                return (
                    f'params["{name}"][{", ".join(map(str, at))}] is {float(got[at]):.6g} on rank {r}'
                    f" but {float(want[at]):.6g} on rank 0 after {steps} steps"
                )
    return None
