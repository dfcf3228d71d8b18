"""Trusted checks for zero-1: per-submission inputs, the single-process AdamW reference, the rules.

Never mounted into the sandbox. The reference is ``torch.optim.AdamW`` on one process and
the whole global batch, run here on this lab's own copy of the public driver's model and data.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from labs import training
from labs.judge import Case, Facts, Outcome, result
from labs.public import load_public

DIMS = [64, 256, 64, 8]  # 33,608 float64 parameters: 262.6 KiB; full AdamW state is twice that
BATCH = 24  # global batch: equal shards on 2, 3 and 4 ranks
STEPS = 4
HYPER = {"lr": 0.01, "betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 0.1}
TOLERANCE = (1e-9, 1e-11)  # (rtol, atol) in float64
SHARD_COPIES = 3  # tensors of one shard's size a rank may hold: two moments and a copy of its parameters
SLACK = 16384  # bytes on top (step counters, small bookkeeping)
FOUND = 0.9  # a rank's measured state must hold at least this fraction of its two moments


def _judge(facts: Facts, check: str, hint: training.Hint) -> Outcome:
    return training.judge(facts, check, hint, success="torch.optim.AdamW on one process")


def ranks_identical(facts: Facts) -> Outcome:
    return training.ranks_identical(
        facts,
        steps=STEPS,
        first_check="first-step",
        advice=(
            "Each rank updates only its own slice: send the updated slices to every rank (e.g. "
            "dist.all_gather) and copy them into the parameters after every step."
        ),
    )


def reference(inputs: dict[str, Any]) -> dict[str, Any]:
    """``torch.optim.AdamW`` on one process with the whole global batch."""
    driver = load_public(__file__, "driver")
    dims, batch = list(inputs["dims"]), int(inputs["batch"])
    model = driver.build_model(int(inputs["seed"]), dims)
    optimizer = torch.optim.AdamW(
        model.parameters(),
        lr=inputs["lr"],
        betas=tuple(inputs["betas"]),
        eps=inputs["eps"],
        weight_decay=inputs["weight_decay"],
        foreach=False,
    )
    first: dict[str, torch.Tensor] = {}
    for step in range(int(inputs["steps"])):
        optimizer.zero_grad()
        x, y = driver.make_batch(int(inputs["seed"]) + 1 + step, dims, batch)
        driver.loss_fn(model, x, y).backward()
        optimizer.step()
        if step == 0:
            first = {name: p.detach().clone() for name, p in model.named_parameters()}
    return {"first": first, "params": {name: p.detach().clone() for name, p in model.named_parameters()}}


def cases(world_size: int, gen: torch.Generator) -> list[Case]:
    seed = int(torch.randint(0, 2**31 - 1, (1,), generator=gen))
    inputs = {"seed": seed, "dims": DIMS, "batch": BATCH, "steps": STEPS, **HYPER}
    expected = reference(inputs)
    return [
        Case(
            check="first-step",
            fn="ZeroAdamW",
            driver="train",
            label=f"{STEPS} AdamW steps of an MLP {'-'.join(map(str, DIMS))} on a global batch of {BATCH}",
            inputs=[dict(inputs) for _ in range(world_size)],
            expected=[expected for _ in range(world_size)],
            inplace=False,
            measure=True,
            parts={"first-step": ["first"], "parameters": ["params"]},
            tolerance={"first": TOLERANCE, "params": TOLERANCE},
        )
    ]


UNFINISHED = training.UNFINISHED.replace("{} check", "first-step check")


FIRST_STEP = (
    "After one step every parameter must equal torch.optim.AdamW's: decay the parameter first,"
    " p <- p (1 - lr wd), then p <- p - lr m_hat / (sqrt(v_hat) + eps) with bias-corrected moments,"
    " and share each rank's updated slice with all the others."
)


def _flat(tree: Any) -> torch.Tensor | None:
    if not isinstance(tree, dict) or not all(isinstance(t, torch.Tensor) for t in tree.values()):
        return None
    return torch.cat([t.reshape(-1).to(torch.float64) for t in tree.values()])


def _first_step_variants(inputs: dict[str, Any]) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """The initial parameters, flat, and the first step as common mistakes compute it."""
    driver = load_public(__file__, "driver")
    dims = list(inputs["dims"])
    model = driver.build_model(int(inputs["seed"]), dims)
    x, y = driver.make_batch(int(inputs["seed"]) + 1, dims, int(inputs["batch"]))
    driver.loss_fn(model, x, y).backward()
    p = torch.cat([q.detach().reshape(-1) for q in model.parameters()])
    g = torch.cat([q.grad.reshape(-1) for q in model.parameters() if q.grad is not None])
    lr, wd, eps = float(inputs["lr"]), float(inputs["weight_decay"]), float(inputs["eps"])
    beta1, beta2 = (float(b) for b in inputs["betas"])
    l2 = g + wd * p
    return p, {
        "Adam's moments are used without bias correction: divide m by 1 - beta1^t and v by 1 - beta2^t,"
        " with t counting steps from 1": p * (1 - lr * wd)
        - lr * ((1 - beta1) * g) / (((1 - beta2) * g * g).sqrt() + eps),
        "the weight decay went into the gradient (L2 regularisation, as Adam does); AdamW decays the"
        " parameter itself, p <- p (1 - lr wd), and leaves the gradient alone": p - lr * l2 / (l2.abs() + eps),
        "no weight decay was applied: AdamW first multiplies the parameter by 1 - lr wd": p - lr * g / (g.abs() + eps),
    }


def _first_step_hint(g: Any, i: int, case: Case, rank: int) -> str:
    got = _flat((result(g, i, rank) or {}).get("first"))
    want = _flat(case.expected[rank]["first"])
    if got is None or want is None or got.shape != want.shape:
        return FIRST_STEP
    init, variants = _first_step_variants(case.inputs[rank])
    for advice, variant in variants.items():
        if torch.allclose(got, variant, rtol=1e-7, atol=1e-10):
            return f"The parameters are what you get when {advice}."
    right = torch.isclose(got, want, rtol=1e-7, atol=1e-10)
    stale = torch.isclose(got, init, rtol=1e-7, atol=1e-10) & ~right
    if bool((right | stale).all()) and bool(stale.any()):
        share = float(right.double().mean())
        return (
            f"Only {share:.0%} of the parameters took the step on rank {rank}; the rest still hold their initial"
            " values: after updating its slice every rank must send it to all the others (dist.all_gather) and"
            " copy what it receives into the parameters."
        )
    return FIRST_STEP


def first_step(facts: Facts) -> Outcome:
    return _judge(facts, "first-step", _first_step_hint)


def parameters(facts: Facts) -> Outcome:
    hint = "Later steps must keep each moment across steps, count t = 1, 2, ... for the bias corrections,"
    hint += " and start from cleared gradients (zero_grad)."
    if not first_step(facts).passed:
        hint = "The first step was already wrong: fix that first (see its check)."
    return _judge(facts, "parameters", hint)


def _held(tree: dict[str, Any]) -> str:
    tensors = tree.get("state_tensors") or []
    return ", ".join(f"{path} ({size} B)" for path, size in tensors[:3]) or "none"


def sharded_state(facts: Facts) -> Outcome:
    problems: list[str] = []
    data: dict[str, Any] = {}
    sharded: list[str] = []
    unfinished: list[str] = []
    total = 0
    for g, i, case in training.cases_judging(facts, "parameters"):
        total += 1
        n = g.world_size
        numel = sum(t.numel() for t in case.expected[0]["params"].values())
        element = 8  # float64
        allowed, full = SHARD_COPIES * math.ceil(numel / n) * element + SLACK, 2 * numel * element
        needed = FOUND * 2 * (numel // n) * element
        trees = [result(g, i, r) for r in range(n)]
        held = [t.get("state_bytes") if isinstance(t, dict) else None for t in trees]
        data[f"world_size_{n}"] = {"state_bytes_per_rank": held, "allowed_per_rank": allowed, "full_adamw_state": full}
        if any(not isinstance(h, int) for h in held):
            unfinished.append(str(n))
        elif over := [r for r in range(n) if held[r] > allowed]:
            r = over[0]
            problems.append(
                f"world size {n}: rank {r}'s optimizer holds {held[r]} bytes of tensors (largest: {_held(trees[r])});"
                f" ZeRO-1 keeps Adam's two moments only for its own 1/N slice of the {numel} parameters, at most"
                f" {SHARD_COPIES} x ceil({numel}/{n}) x 8 + {SLACK} = {allowed} bytes (full AdamW state would be"
                f" {full}). Split the flattened parameters into {n} near-equal slices, keep moments for yours only,"
                " and do not keep full-size buffers between steps"
            )
        elif under := [r for r in range(n) if held[r] < needed]:
            r = under[0]
            problems.append(
                f"world size {n}: rank {r}'s optimizer holds only {held[r]} bytes of tensors, less than two moments"
                f" for a 1/N slice ({round(needed / FOUND)} bytes): split the parameters evenly and keep exp_avg and"
                " exp_avg_sq as tensors in attributes of your ZeroAdamW"
            )
        else:
            sharded.append(f"world size {n}: {held}")
    if not total:
        return Outcome(False, "no cases were run for this check", data, fraction=0.0)
    equivalent = first_step(facts).passed and parameters(facts).passed
    if not equivalent and sharded:
        problems.append(
            f"the state is sharded (bytes per rank, {'; '.join(sharded)}), but training is not equivalent to AdamW"
            " yet: fix the parameters (see those checks) to earn these points"
        )
    if unfinished:
        problems.append(UNFINISHED.format(training.sizes(unfinished), "the state could not be measured"))
    good = len(sharded) if equivalent else 0
    if problems:
        message = "; ".join(problems[:3]) + "."
        return Outcome(False, message[0].upper() + message[1:], data, fraction=good / total)
    return Outcome(True, "each rank holds Adam state for about 1/N of the parameters, and training is AdamW's", data)


def zero_grad(facts: Facts) -> Outcome:
    total = good = 0
    bad: list[str] = []
    unfinished: list[str] = []
    for g, i, _ in training.cases_judging(facts, "parameters"):
        if not training.finished(g, i):
            total += g.world_size
            unfinished.append(str(g.world_size))
            continue
        for r in range(g.world_size):
            total += 1
            if result(g, i, r).get("zero_grad_cleared") is True:
                good += 1
            elif not bad:
                bad.append(f"world size {g.world_size}, rank {r}")
    if not total:
        return Outcome(False, "no cases were run for this check", fraction=0.0)
    problems = []
    if bad:
        problems.append(
            f"{bad[0]}: after zero_grad() some parameter's .grad was still nonzero. zero_grad() must clear the"
            " gradients of every parameter, not only those of this rank's slice (set p.grad = None, or zero it)"
        )
    if unfinished:
        problems.append(UNFINISHED.format(training.sizes(unfinished), "zero_grad() was not tried"))
    if problems:
        message = "; ".join(problems)
        return Outcome(False, message[0].upper() + message[1:] + ".", fraction=good / total)
    return Outcome(True, "zero_grad() cleared every gradient on every rank", fraction=1.0)


RULES = {
    "first-step": first_step,
    "parameters": parameters,
    "ranks-identical": ranks_identical,
    "sharded-state": sharded_state,
    "zero-grad": zero_grad,
}
