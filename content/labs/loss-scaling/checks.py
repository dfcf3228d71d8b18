"""Trusted checks for loss-scaling: each grade's overflows, the GradScaler reference, the rules.

Never mounted into the sandbox. The reference is ``driver.reference``: the same training on
one process with ``torch.amp.GradScaler("cpu")`` itself, every rank's injected overflows in
its gradients at once. The scale sequences the hints compare with are ``simulate``, the rule
of ``torch._amp_update_scale_`` written out (and its usual mistakes).
"""

from __future__ import annotations

from typing import Any

import torch

from labs.authoring import Case, Facts, Outcome, case_failure, load_public, summarise_failures, tallies, training

DIMS = [16, 32, 32, 4]  # six parameter tensors, shared out round-robin: every rank owns one or more
BATCH = 16
STEPS = 10
LR, MOMENTUM = 0.05, 0.9
OVERFLOWS = 3  # steps with an inf or nan injected into some rank's gradients (never the first)
TOLERANCE = (1e-9, 1e-12)
DRIVER = load_public(__file__, "driver")  # the reference, and what a rank owns and skipped


def simulate(
    overflow: list[bool],
    init_scale: float,
    growth_factor: float,
    backoff_factor: float,
    growth_interval: int,
    *,
    reset: bool = True,
    every_step: bool = False,
) -> list[float]:
    """The scale after each step's update, by ``torch._amp_update_scale_``'s rule.

    On an overflow: scale x backoff_factor and the growth tracker back to 0. Otherwise the
    tracker counts the step; when it reaches growth_interval: scale x growth_factor, tracker 0.
    ``reset=False`` keeps the tracker on an overflow; ``every_step`` grows after every clean step.
    """
    scale, tracker, out = float(init_scale), 0, []
    for bad in overflow:
        if bad:
            scale *= backoff_factor
            tracker = 0 if reset else tracker
        elif every_step:
            scale *= growth_factor
        else:
            tracker += 1
            if tracker >= growth_interval:
                scale, tracker = scale * growth_factor, 0
        out.append(scale)
    return out


def _draw(gen: torch.Generator, high: int) -> int:
    return int(torch.randint(0, high, (1,), generator=gen))


def _schedule(gen: torch.Generator, world_size: int, settings: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """Which ranks overflow at which steps: redrawn until each usual mistake changes the scales."""
    shapes = {n: t.numel() for n, t in DRIVER.init_params(0, DIMS).items()}
    names = list(shapes)
    args = [settings[k] for k in ("init_scale", "growth_factor", "backoff_factor", "growth_interval")]
    plan: dict[str, list[dict[str, Any]]] = {}
    for _ in range(200):
        steps = sorted(1 + int(s) for s in torch.randperm(STEPS - 1, generator=gen)[:OVERFLOWS])
        kinds = ["inf", "nan", ("inf", "nan")[_draw(gen, 2)]]
        plan = {}
        for step, kind in zip(steps, kinds, strict=True):
            ranks = [_draw(gen, world_size)]
            if world_size > 2 and _draw(gen, 3) == 0:  # sometimes two ranks overflow at once
                ranks.append((ranks[0] + 1 + _draw(gen, world_size - 1)) % world_size)
            for r in ranks:
                own = _own(names, r, world_size)
                param = own[_draw(gen, len(own))]
                plan.setdefault(str(step), []).append(
                    {"rank": r, "param": param, "index": _draw(gen, shapes[param]), "kind": kind}
                )
        overflow = [str(s) in plan for s in range(STEPS)]
        right = simulate(overflow, *args)
        grows = any(b > a for a, b in zip([args[0], *right], right, strict=False))
        if grows and right != simulate(overflow, *args, reset=False) and 0 not in steps:
            break
    return plan


def own_injections(plan: dict[str, list[dict[str, Any]]], rank: int) -> dict[str, list[dict[str, Any]]]:
    """The overflows of ``plan`` that rank ``rank`` injects: all it is told (never another rank's)."""
    mine = {s: [i for i in items if i["rank"] == rank] for s, items in plan.items()}
    return {s: items for s, items in mine.items() if items}


def cases(world_size: int, gen: torch.Generator) -> list[Case]:
    seed = _draw(gen, 2**31 - 1)
    settings = {
        "init_scale": 2.0 ** (6 + _draw(gen, 7)),
        "growth_factor": (2.0, 4.0)[_draw(gen, 2)],
        "backoff_factor": (0.5, 0.25)[_draw(gen, 2)],
        "growth_interval": 2 + _draw(gen, 2),
    }
    common = {"seed": seed, "dims": DIMS, "batch": BATCH, "steps": STEPS, "lr": LR, "momentum": MOMENTUM, **settings}
    plan = _schedule(gen, world_size, settings)
    ref = DRIVER.reference({**common, "injections": plan})
    expected = [
        {**ref, "grads": {n: ref["grads"][n] for n in _own(list(ref["params"]), r, world_size)}}
        for r in range(world_size)
    ]
    said = ", ".join(f"{k}={v:g}" for k, v in settings.items())
    where = "; ".join(
        f"step {s}: " + ", ".join(f"{i['kind']} on rank {i['rank']}" for i in items)
        for s, items in sorted(plan.items(), key=lambda kv: int(kv[0]))
    )
    return [
        Case(
            check="scales",
            fn="DistributedLossScaler",
            driver="train",
            label=f"{STEPS} steps, {said}; overflows at {where}",
            # Each rank is told only about its own overflows: the others' it must learn from them.
            inputs=[{**common, "injections": own_injections(plan, r)} for r in range(world_size)],
            expected=expected,
            measure=True,  # not judged: the result page draws who sent what to whom
            parts={"scales": ["scales"], "gradients": ["grads"], "parameters": ["params"]},
            tolerance={"scales": (0.0, 0.0), "grads": TOLERANCE, "params": TOLERANCE},
        )
    ]


def _own(names: list[str], rank: int, world_size: int) -> list[str]:
    """The parameter tensors (of ``names``, in ``init_params`` order) that rank ``rank`` owns."""
    return [n for j, n in enumerate(names) if DRIVER.owner(j, world_size) == rank]


def plan_of(case: Case) -> dict[str, list[dict[str, Any]]]:
    """Every rank's overflows together (trusted side: each rank's inputs hold only its own)."""
    plan: dict[str, list[dict[str, Any]]] = {}
    for inputs in case.inputs:
        for s, items in inputs["injections"].items():
            plan.setdefault(s, []).extend(items)
    return plan


def _overflow(case: Case) -> list[bool]:
    plan = plan_of(case)
    return [str(s) in plan for s in range(STEPS)]


def _inf_only(case: Case) -> list[bool]:
    """The overflow steps a check that looks for inf alone (not nan) would see."""
    items = plan_of(case)
    return [any(x["kind"] == "inf" for x in items.get(str(s), [])) for s in range(STEPS)]


NAN_MISSED = (
    " A nan in the gradients went unnoticed: torch.isinf is False for nan. Check with torch.isfinite"
    " (False for inf, -inf and nan), as GradScaler does."
)


def _settings(case: Case) -> list[Any]:
    return [case.inputs[0][k] for k in ("init_scale", "growth_factor", "backoff_factor", "growth_interval")]


def _local(case: Case, rank: int) -> list[bool]:
    """The overflow steps rank ``rank`` was told about: its own, where no flag was shared."""
    injected = {int(s) for s in case.inputs[rank]["injections"]}
    return [s in injected for s in range(STEPS)]


def _scales(g: Any, i: int, rank: int) -> list[float] | None:
    said = tallies.said(g, i, rank, "scales")
    return [float(v) for v in said] if isinstance(said, torch.Tensor) else None


def _own_overflows_only(g: Any, i: int, case: Case) -> bool:
    """Every rank's scales follow its own overflows alone (and some rank missed another's)."""
    args = _settings(case)
    if all(_local(case, r) == _overflow(case) for r in range(g.world_size)):
        return False
    return all(_scales(g, i, r) == simulate(_local(case, r), *args) for r in range(g.world_size))


def _scales_hint(g: Any, i: int, case: Case, rank: int) -> str:
    mine = _scales(g, i, rank)
    if mine is None:
        return ""
    overflow = _overflow(case)
    args = _settings(case)
    # On one rank two mistakes can give the same scales (its own overflows may be exactly the inf ones):
    # the one that explains every rank's scales is the one the code made.
    if _own_overflows_only(g, i, case):
        return (
            f" These are the scales of rank {rank}'s own overflows only: an overflow on another rank went"
            " unnoticed here. Agree on the overflow before deciding: all-reduce a found-inf flag (MAX, or SUM)"
            " so that every rank skips the step and backs off together."
        )
    if _inf_only(case) != overflow and mine == simulate(_inf_only(case), *args):
        return NAN_MISSED
    if mine == simulate(overflow, *args, reset=False):
        return (
            " An overflow must also reset the growth tracker to 0 (GradScaler counts *consecutive* clean steps):"
            " here the clean steps before an overflow still counted towards the next growth."
        )
    if mine == simulate(overflow, *args, every_step=True):
        return (
            f" The scale grew after every clean step: it grows by growth_factor only after growth_interval"
            f" = {args[3]} consecutive clean steps (count them; reset the count when it grows or overflows)."
        )
    if mine == simulate([False] * STEPS, *args):
        return " No overflow was ever seen: check every gradient for inf and nan (torch.isfinite), after backward."
    return (
        " After each update: on an overflow, scale x backoff_factor and the tracker to 0; otherwise tracker + 1,"
        " and when it reaches growth_interval, scale x growth_factor and the tracker to 0."
    )


def scales(facts: Facts) -> Outcome:
    return training.judge(facts, "scales", _scales_hint, success="torch.amp.GradScaler's scale after every step")


def skipped_by(g: Any, i: int, rank: int) -> list[bool | None] | None:
    """Per step, whether rank ``rank`` skipped it, read from its recorded tensors; None if unreadable.

    A step that called ``optimizer.step()`` moved the rank's tensors; a skipped one left them
    exactly as they were (None for a step whose tensors hold inf or nan: it cannot be told). Read
    from results, outside the rank: nothing the rank says about itself.
    """
    history = tallies.said(g, i, rank, "history")
    inputs = g.cases[i].inputs[rank]
    initial = DRIVER.init_params(int(inputs["seed"]), list(inputs["dims"]))
    own = _own(list(initial), rank, g.world_size)
    if not isinstance(history, list) or len(history) != STEPS:
        return None
    if not all(
        isinstance(step, dict)
        and set(step) == set(own)
        and all(isinstance(step[n], torch.Tensor) and step[n].dtype == torch.float64 for n in own)
        for step in history
    ) or any(history[0][n].shape != initial[n].shape for n in own):
        return None
    return DRIVER.skipped_steps({n: initial[n] for n in own}, history)


def _skipped_hint(g: Any, i: int, case: Case, rank: int) -> str:
    read = skipped_by(g, i, rank)
    if read is None:
        return ""
    overflow = _overflow(case)
    # A step whose tensors hold inf or nan before or after (None) tells nothing: only the readable
    # steps are compared. The first such step, if an overflow, is where a step was taken on it.
    readable = [s for s, m in enumerate(read) if m is not None and s < len(overflow)]
    broken = next((s for s, m in enumerate(read) if m is None and s < len(overflow)), None)
    taken = broken if broken is not None and overflow[broken] else None
    skips_seen = any(read[s] for s in readable)
    nan_only = {int(s) for s, items in plan_of(case).items() if all(x["kind"] == "nan" for x in items)}
    if taken is not None and taken in nan_only:
        if skips_seen and all(read[s] == _inf_only(case)[s] for s in readable):
            return NAN_MISSED  # the inf steps were skipped; the step with only a nan went through
        return (
            f" A step was taken at step {taken}, where a gradient held a nan: scaler.step(optimizer) must not"
            " call optimizer.step() when any rank's gradients hold an inf or nan (torch.isfinite is False for"
            " all three; torch.isinf misses nan)."
        )
    if not skips_seen and (taken is not None or any(overflow[s] for s in readable)):
        return (
            " No step was skipped: when any rank's gradients hold an inf or nan, scaler.step(optimizer) must not"
            " call optimizer.step() (on any rank), or the parameters take in the overflow."
        )
    if taken is None and all(bool(read[s]) <= overflow[s] for s in readable):
        return (
            " Some overflows skipped the step only where they happened: every rank must skip when any rank"
            " overflowed (all-reduce the found-inf flag before deciding)."
        )
    if taken is not None:
        return (
            f" A step was taken at step {taken}, where some rank's gradients were not finite: from there the"
            " parameters hold inf or nan. Skip optimizer.step() on every rank when any rank's gradients overflow."
        )
    return " Skip optimizer.step() exactly at the steps where some rank's gradients are not finite."


def _skips_wrong(g: Any, i: int, case: Case, r: int) -> str | None:
    """Why the steps rank ``r`` skipped (read from its recorded tensors) are not GradScaler's, or None."""
    want = [bool(v) for v in case.expected[0]["skipped"]]
    mine = skipped_by(g, i, r)
    if mine is None:
        return case_failure(g, i, r) or "its record of its own tensors after each step is missing or malformed"
    seen = {True: "skipped", False: "taken", None: "unreadable (inf or nan in its tensors)"}
    said = ", ".join(f"step {s} {seen[mine[s]]}" for s in [s for s in range(STEPS) if mine[s] != want[s]][:3])
    expected = [s for s in range(STEPS) if want[s]]
    return f"{said} (expected skipped at steps {expected}, read from how this rank's tensors changed)" if said else None


def skipped(facts: Facts) -> Outcome:
    """The steps each rank skipped (read from its recorded tensors) are GradScaler's; partial credit per rank."""
    runs = [(g, i, case, r) for g, i, case in training.cases_judging(facts, "scales") for r in range(g.world_size)]
    failures: list[dict[str, Any]] = []
    first: tuple[Any, int, Case, int] | None = None
    for g, i, case, r in runs:
        if why := _skips_wrong(g, i, case, r):
            failures.append({"group": g.name, "world_size": g.world_size, "rank": r, "case": case.label, "reason": why})
            first = first or (g, i, case, r)
    data: dict[str, Any] = {"rank_cases": len(runs), "passed": len(runs) - len(failures)}
    if not runs:
        return Outcome(False, "no cases were run for this check", data, fraction=0.0)
    if first is None:
        return Outcome(True, f"all {len(runs)} ranks skipped exactly the steps GradScaler skips", data, fraction=1.0)
    data["first_failure"] = failures[0]
    hint = _skipped_hint(*first).strip()
    message = summarise_failures(failures, len(runs)) + "." + (f" {hint}" if hint else "")
    return Outcome(False, message, data, fraction=data["passed"] / len(runs))


def _gradients_hint(g: Any, i: int, case: Case, rank: int) -> str:
    found = training.returned(g, i, case, rank, "grads")
    if found is None:
        return ""
    grads, want = found
    scale = float(case.inputs[0]["init_scale"])
    if all(
        isinstance(grads.get(n), torch.Tensor) and torch.allclose(grads[n], scale * w, rtol=1e-9)
        for n, w in want.items()
    ):
        return (
            f" The gradients are still scaled by {scale:g}: scaler.step must unscale them (divide every .grad by"
            " the scale, in place) before checking them and before optimizer.step()."
        )
    return " After scaler.step, every .grad must hold the unscaled gradient (the scaled one divided by the scale)."


def gradients(facts: Facts) -> Outcome:
    return training.judge(facts, "gradients", _gradients_hint, success="the unscaled gradients")


def _parameters_hint(g: Any, i: int, case: Case, rank: int) -> str:
    params = tallies.said(g, i, rank, "params")
    if isinstance(params, dict) and any(
        isinstance(p, torch.Tensor) and not bool(torch.isfinite(p).all()) for p in params.values()
    ):
        return (
            " Some parameters are inf or nan: a step was taken with overflowed gradients. Skip optimizer.step()"
            " on every rank when any rank's gradients are not finite."
        )
    if case_failure(g, i, rank, part="gradients") is not None:
        return " The first step's gradients were already wrong (see the gradients check): unscale before stepping."
    if case_failure(g, i, rank, part="skipped") is not None:
        return " The skipped steps are wrong (see that check): every rank must skip exactly the overflow steps."
    return " Step with the unscaled gradients, and skip exactly the steps where some rank overflowed."


def parameters(facts: Facts) -> Outcome:
    return training.judge(facts, "parameters", _parameters_hint, success="training with torch.amp.GradScaler")


def _disagreement(g: Any, i: int) -> str | None:
    """Where another rank first disagrees with rank 0: its scales, its skipped steps, its parameters; or None."""
    scales = [tallies.said(g, i, r, "scales") for r in range(g.world_size)]
    skips = [skipped_by(g, i, r) for r in range(g.world_size)]
    for r in range(1, g.world_size):
        a, b = scales[0], scales[r]
        if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and torch.equal(a, b)):
            step = _first_difference(a, b)
            return f"rank {r}'s scales differ from rank 0's" + (f" from step {step}" if step is not None else "")
        if (step := _skips_differ(skips[0], skips[r])) is not None:
            return f"rank {r} skipped other steps than rank 0" + (f" (step {step})" if step >= 0 else "")
    return _params_difference([tallies.said(g, i, r, "params") or {} for r in range(g.world_size)])


def ranks_agree(facts: Facts) -> Outcome:
    problems: list[str] = []
    unfinished: list[str] = []
    good = total = 0
    for g, i, _case in training.cases_judging(facts, "scales"):
        total += 1
        if not training.finished(g, i):
            unfinished.append(str(g.world_size))
        elif why := _disagreement(g, i):
            problems.append(f"world size {g.world_size}: {why}")
        else:
            good += 1
    if not total:
        return Outcome(False, "no cases were run for this check", fraction=0.0)
    message = (
        "; ".join(problems) + ". An overflow on one rank must make every rank skip the step and back off"
        " the scale: decide from an all-reduced found-inf flag, never from the local gradients alone."
        if problems
        else ""
    )
    if unfinished:
        why = training.UNFINISHED.format(training.sizes(unfinished), "the ranks could not be compared", "scales")
        message += (" " if message else "") + why[0].upper() + why[1:] + "."
    if message:
        return Outcome(False, message, fraction=good / total)
    return Outcome(True, "every rank had the same scales, skipped the same steps and ended with the same parameters")


def _skips_differ(a: list[bool | None] | None, b: list[bool | None] | None) -> int | None:
    """The first step two ranks' skips differ at (-1: one record unreadable), or None if they agree.

    Steps whose tensors hold inf or nan on either rank are left out: there, nothing tells.
    """
    if a is None or b is None:
        return -1
    return next((s for s, (x, y) in enumerate(zip(a, b, strict=True)) if None not in (x, y) and x != y), None)


def _params_difference(params: list[dict[str, Any]]) -> str | None:
    """Where another rank's parameters first differ from rank 0's (nan equal to nan), or None."""
    for r, mine in enumerate(params[1:], start=1):
        for name, want in params[0].items():
            got = mine.get(name)
            if not isinstance(got, torch.Tensor) or got.shape != want.shape:
                return f'rank {r} has no params["{name}"] of shape {tuple(want.shape)}'
            if not torch.allclose(got, want, rtol=1e-12, atol=1e-14, equal_nan=True):
                return f"rank {r}'s params[\"{name}\"] differ from rank 0's after {STEPS} steps"
    return None


def _first_difference(a: Any, b: Any) -> int | None:
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.shape == b.shape:
        differ = (a != b).nonzero()
        return int(differ[0][0]) if len(differ) else None
    return None


RULES = {
    "gradients": gradients,
    "scales": scales,
    "skipped": skipped,
    "parameters": parameters,
    "ranks-agree": ranks_agree,
}
