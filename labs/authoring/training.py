"""Rules that training labs share (trusted, outside the sandbox): results judged with a hint,
replicas that must stay identical, what to say when training did not finish, the
generators that draw the data each rank may see, and a data-parallel lab's measured training
call (``gradient_parts``) with its communication rule (``gradient_bytes``: one all-reduce of the
gradients per step, in the lab's words).

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
from types import ModuleType
from typing import TYPE_CHECKING, Any, Protocol

from labs.host.judge import Case, Facts, Outcome, case_failure, counted, result, summarise_failures
from labs.rank.trees import Tolerance, fmt_apart

if TYPE_CHECKING:  # torch is imported where it is used, so that loading a checks module stays fast
    import torch

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


def ranks_identical(
    facts: Facts,
    *,
    steps: int,
    advice: str,
    first_check: str,
    void: Void | None = None,
    checks: tuple[str, ...] = ("parameters",),
    label: Callable[[Any, Case], str] | None = None,
    at_most: int | None = None,
) -> Outcome:
    """Every rank ended with the same parameters (``params``) in every case judging one of ``checks``.

    ``advice`` says how to get there; ``first_check`` is the check whose message shows why training did
    not finish. ``label(group, case)`` names a run (default: its world size), and ``at_most`` shows only
    that many differing runs, then how many more (default: all).
    """
    problems: list[str] = []
    unfinished: list[str] = []
    good = total = 0
    for check in checks:
        for g, i, case in cases_judging(facts, check):
            total += 1
            where = label(g, case) if label else f"world size {g.world_size}"
            if not finished(g, i):
                unfinished.append(where)
                continue
            voided = void(g, i) if void else None
            diff = voided or first_difference([result(g, i, r) for r in range(g.world_size)], steps)
            if diff:
                problems.append(f"{where}: {diff}")
            else:
                good += 1
    if not total:
        return Outcome(False, "no cases were run for this check", fraction=0.0)
    message = ""
    if problems:
        shown = problems[:at_most] if at_most else problems
        more = len(problems) - len(shown)
        tail = f" ({more} more {'runs' if more > 1 else 'run'} like it)" if more else ""
        message = "; ".join(shown) + f"{tail}. {advice}"
    if unfinished:
        where = "; ".join(unfinished) if label else sizes([u.removeprefix("world size ") for u in unfinished])
        why = UNFINISHED.format(where, "the ranks' parameters could not be compared", first_check)
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


def gradient_parts(world_size: int, expected: Any, tolerance: Tolerance) -> dict[str, Any]:
    """The rest of a data-parallel lab's measured training ``Case`` (``Case(check=..., fn=..., driver=...,
    label=..., inputs=..., **gradient_parts(...))``): the case names its check and driver itself, so
    the content check sees them.

    Every rank must end with the reference's ``expected`` tree: its first step's gradients
    (``grads``, judged by "gradients") and its parameters after training (``params``, judged by
    "parameters"), both within ``tolerance``.
    """
    return {
        "expected": [expected for _ in range(world_size)],
        "inplace": False,
        "measure": True,
        "parts": {"gradients": ["grads"], "parameters": ["params"]},
        "tolerance": {"grads": tolerance, "params": tolerance},
    }


def later_step_hint(advice: str) -> Hint:
    """The parameters' hint of a lab whose "gradients" check judges the first step: ``advice`` follows
    "a later step went wrong" when the first step's gradients were right, and starts with its own
    punctuation (": every call must ...", ". The driver ...")."""

    def hint(g: Any, i: int, case: Case, rank: int) -> str:
        if case_failure(g, i, rank, part="gradients") is None:
            return f" The first step's gradients were right, so a later step went wrong{advice}"
        return " The gradients were already wrong after the first step: fix those first (see that check)."

    return hint


# What one rank's bytes mean, as (what was wrong, advice or ""): (group, case, rank, bytes it sent,
# one all-reduce of the gradients per step in bytes, the gradients' bytes).
Bytes = Callable[[Any, Case, int, int, float, int], tuple[str, str]]


def gradient_bytes(
    facts: Facts,
    *,
    steps: int,
    bounds: tuple[float, float, int],
    over: Bytes,
    under: Bytes,
    success: str,
    shown: Callable[[Case], dict[str, Any]] | None = None,
) -> Outcome:
    """Each rank of every measured "gradients" call sent one all-reduce of the gradients per step.

    ``bounds`` is (high, low, headers): a rank may send at most high x theory + headers bytes and at
    least low x theory, theory being ``steps`` all-reduces of the gradients, 2(N-1)/N x their bytes.
    ``over`` and ``under`` say, in the lab's words, what too many or too few bytes mean; ``shown``
    adds the lab's own figures to what the student sees. Bytes count only for training whose values
    are right. Partial credit: the share of measured calls whose bytes and values are right.
    """
    high, low, headers = bounds
    problems: list[tuple[str, str]] = []
    unfinished: list[str] = []
    data: dict[str, Any] = {}
    good = total = 0
    for g, i, case in cases_judging(facts, "gradients"):
        if not case.measure:
            continue
        total += 1
        n = g.world_size
        wire = g.wire.get(i)
        if wire is None or not finished(g, i):
            unfinished.append(str(n))
            continue
        size = sum(t.numel() * t.element_size() for t in case.expected[0]["params"].values())
        theory = steps * 2 * (n - 1) * size / n
        sent = [sum(wire["sent"].get(str(r), {}).values()) for r in range(n)]
        data[f"world_size_{n}"] = {
            "gradient_bytes": size,
            "steps": steps,
            **(shown(case) if shown else {}),
            "one_allreduce_per_step_bytes_per_rank": round(theory),
            "measured_bytes_per_rank": sent,
            "ratio": [round(s / theory, 4) for s in sent],
            "sent": wire["sent"],
        }
        more = [(r, s) for r, s in enumerate(sent) if s > high * theory + headers]
        fewer = [(r, s) for r, s in enumerate(sent) if s < low * theory]
        if more:
            problems.append(over(g, case, *more[0], theory, size))
        elif fewer:
            problems.append(under(g, case, *fewer[0], theory, size))
        elif not values_right(g, i, ("gradients", "parameters")):
            what = (
                f"world size {n}: the bytes look right, but the gradients or parameters are wrong (see those"
                " checks), and bytes count only for training whose values are right"
            )
            problems.append((what, ""))
        else:
            good += 1
    if not total:
        return Outcome(False, "no measured training run", data, fraction=0.0)
    if unfinished:
        problems.append((UNFINISHED.format(sizes(unfinished), "its traffic says nothing", "gradients"), ""))
    if problems:
        advice = [a for a in dict.fromkeys(a for _, a in problems) if a]
        message = "; ".join(w for w, _ in problems[:3]) + "." + "".join(f" {a[0].upper()}{a[1:]}." for a in advice)
        return Outcome(False, message[0].upper() + message[1:], data, fraction=good / total)
    return Outcome(True, success, data, fraction=1.0)


def returned(g: Any, i: int, case: Case, rank: int, key: str) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """(what ``rank`` returned at ``key`` in case ``i``, what it should have), or None if it returned no dict there."""
    got = result(g, i, rank)
    if not isinstance(got, dict) or not isinstance(got.get(key), dict):
        return None
    return got[key], case.expected[rank][key]


def flat(tree: Any, names: list[str]) -> torch.Tensor | None:
    """The float64 tensors ``tree[name]`` of ``names``, flattened into one, or None if one is missing or not float64."""
    import torch

    if not isinstance(tree, dict):
        return None
    parts = []
    for name in names:
        t = tree.get(name)
        if not isinstance(t, torch.Tensor) or t.dtype != torch.float64:
            return None
        parts.append(t.reshape(-1))
    return torch.cat(parts)


class Optimizer(Protocol):
    """What ``train_steps`` needs of an optimizer: ``torch.optim``'s, or a lab's own reference."""

    def zero_grad(self) -> None: ...

    def step(self) -> Any: ...


def train_steps(
    driver: ModuleType, model: torch.nn.Module, optimizer: Optimizer, inputs: dict[str, Any]
) -> dict[str, dict[str, torch.Tensor]]:
    """``inputs["steps"]`` steps of ``optimizer`` on the public driver's batches (seed + 1 + step); the
    parameters after the first step (``first``) and after the last (``params``)."""
    dims, batch, seed = list(inputs["dims"]), int(inputs["batch"]), int(inputs["seed"])
    first: dict[str, torch.Tensor] = {}
    for step in range(int(inputs["steps"])):
        optimizer.zero_grad()
        x, y = driver.make_batch(seed + 1 + step, dims, batch)
        driver.loss_fn(model, x, y).backward()
        optimizer.step()
        if step == 0:
            first = {name: p.detach().clone() for name, p in model.named_parameters()}
    return {"first": first, "params": {name: p.detach().clone() for name, p in model.named_parameters()}}
