"""Trusted checks for lr-warmup: per-submission inputs, the single-process reference, the rules.

Never mounted into the sandbox. The right schedule lives here (``target_lr`` and
``right_lr``), not in the public driver; the reference training is ``driver.reference``
run here on this lab's own copy of the public driver, with the right learning rates.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch

from labs.authoring import Case, Facts, Outcome, case_failure, load_public, off_by, result, rules, tallies, training

DIMS = [8, 32, 32, 4]
PER_RANK_BATCH = 4  # the global batch grows with the ranks: 4 x N examples
MOMENTUM, WEIGHT_DECAY = 0.9, 1e-4
AFTER_WARMUP = 3  # training steps after the warmup
LR_TOLERANCE = (1e-12, 1e-15)  # (rtol, atol): the same formula in another order differs by an ulp
PARAM_TOLERANCE = (1e-9, 1e-12)
TABLE_WARMUPS = [1, 3, 8]  # the schedule on its own: steps 0 .. warmup + 2 for each warmup
NO_WARMUP_STEPS = 4


def right_lr(step: int, base_lr: float, world_size: int, warmup_steps: int) -> float:
    """The schedule the statement asks for."""
    target = base_lr * world_size
    return target * (step + 1) / warmup_steps if step < warmup_steps else target


def _train_inputs(gen: torch.Generator) -> dict[str, Any]:
    draw = torch.rand(2, generator=gen, dtype=torch.float64)
    warmup = 3 + int(torch.randint(0, 3, (1,), generator=gen))
    return {
        "seed": int(torch.randint(0, 2**31 - 1, (1,), generator=gen)),
        "dims": DIMS,
        "per_rank_batch": PER_RANK_BATCH,
        "steps": warmup + AFTER_WARMUP,
        "warmup_steps": warmup,
        "base_lr": round(0.01 + 0.03 * float(draw[0]), 6),
        "momentum": MOMENTUM,
        "weight_decay": WEIGHT_DECAY,
    }


def cases(world_size: int, gen: torch.Generator) -> list[Case]:
    driver = load_public(__file__, "driver")
    inputs = _train_inputs(gen)
    base, warmup, steps = inputs["base_lr"], inputs["warmup_steps"], inputs["steps"]
    ref = driver.reference(inputs, world_size, [right_lr(s, base, world_size, warmup) for s in range(steps)])
    tol = {"lrs": LR_TOLERANCE, "params": PARAM_TOLERANCE}

    def query_case(label: str, queries: list[tuple[int, int]]) -> Case:
        lrs = torch.tensor([right_lr(s, base, world_size, w) for s, w in queries], dtype=torch.float64)
        calls = rules.replicated(world_size, {"base_lr": base, "queries": queries}, {"lrs": lrs})
        parts = {"schedule": ["lrs"], "scaling": ["lrs"]}
        return Case("schedule", "scaled_lr", label, driver="schedule", parts=parts, tolerance=tol, **calls)

    label = f"{steps} steps of SGD with momentum, warmup_steps={warmup}, base_lr={base:g}"
    run = rules.replicated(world_size, inputs, {"lrs": ref["lrs"], "params": ref["params"]})
    parts = {"schedule": ["lrs"], "scaling": ["lrs"], "parameters": ["params"]}
    table = [(s, w) for w in TABLE_WARMUPS for s in range(w + 3)]
    return [
        # measured: the loop's gradient all-reduces, for the result page's communication picture
        Case("schedule", "scaled_lr", label, driver="train", measure=True, parts=parts, tolerance=tol, **run),
        query_case(f"scaled_lr alone, warmup_steps in {TABLE_WARMUPS}, base_lr={base:g}", table),
        query_case(
            f"scaled_lr alone, warmup_steps=0 (no warmup), base_lr={base:g}", [(s, 0) for s in range(NO_WARMUP_STEPS)]
        ),
    ]


# --- reading the results ---------------------------------------------------------------------


def _queries(case: Case) -> list[tuple[int, int]]:
    """The (step, warmup_steps) of each learning rate a case returns."""
    inputs = case.inputs[0]
    if case.driver == "train":
        return [(s, int(inputs["warmup_steps"])) for s in range(int(inputs["steps"]))]
    return [(int(s), int(w)) for s, w in inputs["queries"]]


def _lrs(g: Any, i: int, r: int) -> list[float] | None:
    got = result(g, i, r)
    lrs = got.get("lrs") if isinstance(got, dict) else None
    if not isinstance(lrs, torch.Tensor) or lrs.dim() != 1 or lrs.numel() != len(_queries(g.cases[i])):
        return None
    return [float(v) for v in lrs]


def _same(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=LR_TOLERANCE[0], abs_tol=LR_TOLERANCE[1])


# Recognised mistakes: (schedule, advice). Each is tried on all of a wrong result's values.
Schedule = Callable[[int, float, int, int], float]


def _warm(target: float, s: int, w: int) -> float:
    return target * (s + 1) / w if s < w else target


MISTAKES: list[tuple[Schedule, str]] = [
    (
        lambda s, b, n, w: _warm(b, s, w),
        "The rate never goes above base_lr: the linear scaling rule multiplies it by the world size"
        " (target = base_lr * world_size), because the global batch is world_size times larger.",
    ),
    (
        lambda s, b, n, w: _warm(b * math.sqrt(n), s, w),
        "The target is base_lr * sqrt(world_size): that is the square-root rule. This exercise uses the"
        " linear scaling rule, target = base_lr * world_size.",
    ),
    (
        lambda s, b, n, w: _warm(b * n * n, s, w),
        "The target is base_lr * world_size**2: the world size is applied twice. Multiply base_lr by world_size once.",
    ),
    (
        lambda s, b, n, w: b * n * s / w if s < w else b * n,
        "Step s gets target * s / warmup_steps, one step behind: step 0 must already get"
        " target / warmup_steps (not 0), and step warmup_steps - 1 the target itself. Use (s + 1).",
    ),
    (
        lambda s, b, n, w: b + (b * n - b) * (s + 1) / w if s < w else b * n,
        "The warmup starts from base_lr: in this lab it climbs from 0, step s < warmup_steps getting"
        " target * (s + 1) / warmup_steps with target = base_lr * world_size.",
    ),
    (
        lambda s, b, n, w: b * n * (s + 1) / max(w, 1),
        "The rate keeps growing after the warmup: from step warmup_steps on it must stay at the target"
        " base_lr * world_size.",
    ),
    (
        lambda s, b, n, w: b * n,
        "There is no warmup: the first warmup_steps steps must climb linearly to the target,"
        " step s getting target * (s + 1) / warmup_steps.",
    ),
]


def _advice(case: Case, got: list[float], world_size: int) -> str:
    base = float(case.inputs[0]["base_lr"])
    for schedule, advice in MISTAKES:
        try:
            if all(_same(schedule(s, base, world_size, w), v) for (s, w), v in zip(_queries(case), got, strict=True)):
                return " " + advice
        except ZeroDivisionError:
            continue
    return (
        " Step s < warmup_steps must get base_lr * world_size * (s + 1) / warmup_steps, every later step"
        " base_lr * world_size."
    )


def _where(g: Any, case: Case, r: int, s: int, w: int, size: bool = True) -> str:
    phase = "training step" if case.driver == "train" else "step"
    where = f"rank {r}, {phase} {s} (warmup_steps={w}, base_lr={case.inputs[0]['base_lr']:g})"
    return f"world size {g.world_size}, {where}" if size else where


# --- the rules -------------------------------------------------------------------------------


def schedule(facts: Facts) -> Outcome:
    """Every learning rate of every case on every rank; partial credit per learning rate."""
    total = right = 0
    first = ""
    errors: list[str] = []
    for g, i, case in training.cases_judging(facts, "schedule"):
        queries, want = _queries(case), [float(v) for v in case.expected[0]["lrs"]]
        for r in range(g.world_size):
            total += len(queries)
            got = _lrs(g, i, r)
            if got is None:
                why = case_failure(g, i, r, part="schedule") or "no learning rates came back"
                errors.append(f"world size {g.world_size}, rank {r}, {case.label}: {why}")
                continue
            ok = [_same(a, b) for a, b in zip(want, got, strict=True)]
            right += sum(ok)
            if not first and not all(ok):
                k = ok.index(False)
                first = (
                    f"{_where(g, case, r, *queries[k])}: the rate {off_by(float(got[k]), float(want[k]))}."
                    f"{_advice(case, got, g.world_size)}"
                )
    data = {"learning_rates": total, "right": right}
    if not total:
        return Outcome(False, "no cases were run for this check", data, fraction=0.0)
    if right == total:
        return Outcome(True, f"all {total} learning rates follow the scaled, warmed-up schedule", data, fraction=1.0)
    parts = [f"{right} of {total} learning rates right"] + ([f"first wrong: {first}"] if first else [])
    if errors:
        parts.append(f"{len(errors)} call{'s' if len(errors) > 1 else ''} failed: {errors[0]}")
    return Outcome(False, ". ".join(parts), data, fraction=right / total)


def _off_target(g: Any, data: dict[str, Any]) -> str | None:
    """The first rate of world size ``g`` after the warmup that is not base_lr x N, or None."""
    n = g.world_size
    for i, case in enumerate(g.cases):
        if not case.judges("scaling"):
            continue
        base = float(case.inputs[0]["base_lr"])
        for r in range(n):
            got = _lrs(g, i, r)
            if got is None:
                why = case_failure(g, i, r, part="scaling") or "no learning rates came back"
                return f"world size {n}, rank {r}, {case.label}: {why}"
            late = [(s, w, v) for (s, w), v in zip(_queries(case), got, strict=True) if s >= w]
            if case.driver == "train" and late:
                data[f"world_size_{n}"] = {"base_lr": base, "target": base * n, "after_warmup": late[0][2]}
            for s, w, v in late:
                if not _same(v, base * n):
                    return (
                        f"world size {n}: after the warmup, at {_where(g, case, r, s, w, size=False)}, the rate is"
                        f" {v:.6g}, {v / base:.4g} x base_lr; the linear scaling rule wants base_lr x {n} ="
                        f" {base * n:.6g}"
                    )
    return None


def scaling(facts: Facts) -> Outcome:
    """After the warmup, the rate is exactly base_lr x N, at every world size."""
    tally = tallies.Tally(unit="world size")
    data: dict[str, Any] = {}
    for g in facts.groups:
        tally.add(_off_target(g, data))
    advice = (
        "Once the warmup is over the rate must be base_lr * world_size at every world size"
        " (N times the batch, N times the rate), and stay there."
    )
    return tally.outcome("after the warmup the rate is base_lr x N at every world size", data, shown=2, advice=advice)


def _comparison(facts: Facts) -> tuple[str, dict[str, Any]]:
    """The exercise's comparison, at the largest world size: the loss with and without the scaling rule."""
    driver = load_public(__file__, "driver")
    for g in sorted(facts.groups, key=lambda g: -g.world_size):
        for case in g.cases:
            if case.driver != "train":
                continue
            inputs, n = case.inputs[0], g.world_size
            base, warmup, steps = float(inputs["base_lr"]), int(inputs["warmup_steps"]), int(inputs["steps"])
            scaled = driver.reference(inputs, n, [right_lr(s, base, n, warmup) for s in range(steps)])["held_out"]
            unscaled = driver.reference(inputs, n, [right_lr(s, base, 1, warmup) for s in range(steps)])["held_out"]
            text = (
                f" The exercise's comparison, at world size {n} ({n} times one rank's batch): in {steps} steps"
                f" the loss on a held-out batch went from {scaled[0]:.4g} to {scaled[-1]:.4g} with the scaled"
                f" schedule, and to {unscaled[-1]:.4g} with base_lr left unscaled (the same warmup)."
            )
            data = {"world_size": n, "steps": steps, "held_out_loss_before": scaled[0]}
            return text, data | {"held_out_loss_scaled": scaled[-1], "held_out_loss_unscaled": unscaled[-1]}
    return "", {}


def _parameters_hint(g: Any, i: int, case: Case, r: int) -> str:
    if case_failure(g, i, r, part="schedule") is None:
        return "The rates were right, so something else changed the training: scaled_lr must only compute a number."
    return "The parameters follow from the learning rates, which were wrong: fix the schedule (see that check)."


def parameters(facts: Facts) -> Outcome:
    text, comparison = _comparison(facts)
    outcome = training.judge(facts, "parameters", _parameters_hint, success=f"single-process training.{text}")
    outcome.data["comparison"] = comparison
    return outcome


RULES = {"schedule": schedule, "scaling": scaling, "parameters": parameters}
