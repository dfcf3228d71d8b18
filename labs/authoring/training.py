"""Rules that training labs share (trusted, outside the sandbox): results judged with a hint,
replicas that must stay identical, what to say when training did not finish, and the
generators that draw the data each rank may see.

A training lab's driver returns, per rank, a tree with the parameters after training
(``params``) and whatever else its checks judge. Its ``checks.py`` builds on these.

Each rank is given its own data as tensors in its inputs, never a seed that would let it
draw the other ranks' data too: a rank that could compute the whole batch's gradient alone
could send any bytes it likes and still pass the wire checks. ``secret_generators`` draws
those tensors.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

from labs.host.judge import Case, Facts, Outcome, case_failure, counted, result, summarise_failures
from labs.rank.trees import fmt_apart

Hint = str | Callable[[Any, int, Case, int], str]
# Why no result of case i of group g counts (every rank's), or None: a trusted fact about the whole call.
Void = Callable[[Any, int], str | None]
UNFINISHED = "training did not finish on every rank ({}), so {}: fix the error that the {} check shows"


def secret_generators(gen: Any, count: int) -> list[Any]:
    """``count`` fresh ``torch.Generator``s, none of whose draws tell anything about another's.

    Draw what every rank may see from one and each rank's own data from another. One draw from
    ``gen`` (the grader's, seeded per submission) is hashed with each generator's index into its
    seed, so a rank that reconstructs its own generator from the values it was given (torch's
    Mersenne Twister is not a cryptographic generator) learns nothing about the others' seeds,
    nor about ``gen``.
    """
    import torch

    secret = int(torch.randint(0, 2**62, (1,), generator=gen))
    out = []
    for k in range(count):
        digest = hashlib.sha256(f"ringlab:{secret}:{k}".encode()).digest()
        out.append(torch.Generator().manual_seed(int.from_bytes(digest[:8], "little") >> 1))
    return out


def cases_judging(facts: Facts, check: str) -> list[tuple[Any, int, Case]]:
    """(group, case index, case) of every case that judges ``check``."""
    return [(g, i, c) for g in facts.groups for i, c in enumerate(g.cases) if c.judges(check)]


def finished(g: Any, i: int) -> bool:
    """Every rank of the group returned a result tree (training ran to the end everywhere)."""
    return all(isinstance(result(g, i, r), dict) for r in range(g.world_size))


def sizes(names: list[str]) -> str:
    return "world size " + ", ".join(names) if names else ""


def judge(
    facts: Facts, check: str, hint: Hint, *, success: str, void: Void | None = None, unit: str | None = None
) -> Outcome:
    """Every rank's result right at ``check``'s keys; the first failure in full, then ``hint``'s advice.

    ``hint`` is advice as text, or a function of the first failure (group, case index, case, rank);
    it is given only when that rank finished training. ``void`` says why no result of a case counts
    (e.g. ``moved_the_data``). ``unit`` names what the results are (``judge.counted``). Partial credit:
    the share of right results.
    """
    total = passed = 0
    failures: list[dict[str, Any]] = []
    first: tuple[Any, int, Case, int] | None = None
    for g, i, case in cases_judging(facts, check):
        voided = void(g, i) if void else None
        for r in range(g.world_size):
            total += 1
            why = case_failure(g, i, r, part=check) or voided
            if why is None:
                passed += 1
                continue
            failures.append({"group": g.name, "world_size": g.world_size, "rank": r, "case": case.label, "reason": why})
            first = first or ((g, i, case, r) if not voided or why != voided else None)
    data: dict[str, Any] = {"rank_cases": total, "passed": passed}
    if not total:
        return Outcome(False, "no cases were run for this check", data, fraction=0.0)
    if not failures:
        return Outcome(True, f"all {counted(total, facts.groups, unit)} equal {success}", data, fraction=1.0)
    extra = ""
    if first is not None:  # a wrong value (not only voided ones): advice about it
        g, i, case, r = first
        advice = (hint if isinstance(hint, str) else hint(g, i, case, r)).strip()
        extra = f" {advice}" if isinstance(result(g, i, r), dict) and advice else ""
    data["first_failure"] = failures[0]
    return Outcome(False, f"{summarise_failures(failures, total)}.{extra}", data, fraction=passed / total)


def ranks_identical(facts: Facts, *, steps: int, advice: str, first_check: str, void: Void | None = None) -> Outcome:
    """Every rank ended with the same parameters (``params``), per world size; ``advice`` says how to get there."""
    problems: list[str] = []
    unfinished: list[str] = []
    good = total = 0
    for g, i, _ in cases_judging(facts, "parameters"):
        total += 1
        if not finished(g, i):
            unfinished.append(str(g.world_size))
            continue
        voided = void(g, i) if void else None
        if voided:
            problems.append(f"world size {g.world_size}: {voided}")
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


def moved_the_data(g: Any, i: int) -> str | None:
    """Why no result of the measured training call ``i`` counts, or None: a rank sent as many bytes as its data.

    Each rank is given only its own examples (``inputs["x"]``, ``inputs["y"]``), sized so that they
    outweigh many times what synchronising the gradients sends. A rank that sent at least as many
    bytes as its examples moved the data itself, to compute the others' share where it is not
    (the values are right and prove nothing). Read from the kernel's counts, outside the ranks.
    """
    wire = g.wire.get(i)
    if wire is None:  # not measured, or the call did not finish: the results say so themselves
        return None
    for r, inputs in enumerate(g.cases[i].inputs):
        own = sum(t.numel() * t.element_size() for t in (*inputs["x"], *inputs["y"]))
        sent = sum(wire["sent"].get(str(r), {}).values())
        if sent >= own:
            return (
                f"rank {r} sent {sent:,} bytes, as many as all its examples ({own:,} bytes): moving the data to"
                " compute the other ranks' share earns nothing; synchronise the gradients instead"
            )
    return None


def values_right(g: Any, i: int, checks: tuple[str, ...]) -> bool:
    """Every rank's result of case ``i`` is right at the keys of each of ``checks``."""
    return all(case_failure(g, i, r, part=c) is None for r in range(g.world_size) for c in checks)


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
                mine, theirs = fmt_apart(float(got[at]), float(want[at]))  # told apart, however close
                return (
                    f'params["{name}"][{", ".join(map(str, at))}] is {mine} on rank {r}'
                    f" but {theirs} on rank 0 after {steps} steps"
                )
    return None
