"""Trusted checks for zero-1: per-submission inputs, the single-process AdamW reference, the rules.

Never mounted into the sandbox. The reference is ``torch.optim.AdamW`` on one process and
the whole global batch, run here on this lab's own copy of the public driver's model and data.
Whether the state is sharded is judged from what the kernel measured outside the ranks: each
rank's memory high-water in a group of its own (``memory_peak``), where the driver steps one
optimizer per layer on layers large enough for 2P/N and 2P to be told apart.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from labs.authoring import Case, Facts, Outcome, Phase, case_failure, later, load_public, memory_peak, result, training

DIMS = [64, 256, 64, 8]  # 33,608 float64 parameters: 262.6 KiB; full AdamW state is twice that
BATCH = 24  # global batch: equal shards on 2, 3 and 4 ranks
STEPS = 4
HYPER = {"lr": 0.01, "betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 0.1}
TOLERANCE = (1e-9, 1e-11)  # (rtol, atol) in float64
# The memory case: float64 layers of width x width weights and a bias, one ZeroAdamW each, stepped
# in a group of MEMORY_WORLD_SIZE ranks of its own (the kernel's high-water covers that loop alone).
MEMORY = {"width": 544, "layers": 8, "steps": 2}
MEMORY_WORLD_SIZE = 2
TEMPORARIES = 4  # layer-size buffers a step may hold at once: the gradient, flat copies, the all-gather's output
OVERHEAD = 15 << 20  # what a rank's Python, torch and gloo add as they run (measured 6-11 MiB), and slack
DIGEST_TOLERANCE = (1e-9, 1e-9)


def _judge(facts: Facts, check: str, hint: training.Hint) -> Outcome:
    return training.judge(facts, check, hint, success="torch.optim.AdamW on one process")


def ranks_identical(facts: Facts) -> Outcome:
    advice = (
        "Each rank updates only its own slice: send the updated slices to every rank (e.g. "
        "dist.all_gather) and copy them into the parameters after every step."
    )
    return training.ranks_identical(facts, steps=STEPS, first_check="first-step", advice=advice)


def _adamw(params: list[torch.Tensor], inputs: dict[str, Any]) -> torch.optim.AdamW:
    return torch.optim.AdamW(params, **{key: inputs[key] for key in HYPER}, foreach=False)


def reference(inputs: dict[str, Any]) -> dict[str, Any]:
    """``torch.optim.AdamW`` on one process with the whole global batch; then the next batch's gradients."""
    driver = load_public(__file__, "driver")
    dims, batch, steps = list(inputs["dims"]), int(inputs["batch"]), int(inputs["steps"])
    model = driver.build_model(int(inputs["seed"]), dims)
    optimizer = _adamw(list(model.parameters()), inputs)
    trained = training.train_steps(driver, model, optimizer, inputs)
    optimizer.zero_grad()
    x, y = driver.make_batch(int(inputs["seed"]) + 1 + steps, dims, batch)
    driver.loss_fn(model, x, y).backward()
    grads = {name: p.grad.detach().clone() for name, p in model.named_parameters() if p.grad is not None}
    return {**trained, "grads": grads}


def memory_reference(inputs: dict[str, Any]) -> dict[str, Any]:
    """The memory case's layers after ``torch.optim.AdamW`` on one process: the driver's digest."""
    driver = load_public(__file__, "driver")
    layers = driver.memory_layers(int(inputs["seed"]), int(inputs["width"]), int(inputs["layers"]))
    params = [p for pair in layers for p in pair]
    optimizer = _adamw(params, inputs)
    for _ in range(int(inputs["steps"])):
        for p in params:  # each layer's gradient depends on that layer alone: all at once is the same
            p.grad = driver.memory_gradient(p)
        optimizer.step()
    return {"digest": driver.digest(layers)}


def training_case(world_size: int, seed: int) -> Case:
    inputs = {"seed": seed, "dims": DIMS, "batch": BATCH, "steps": STEPS, **HYPER}
    expected = later(reference, inputs)
    label = f"{STEPS} AdamW steps of an MLP {'-'.join(map(str, DIMS))} on a global batch of {BATCH}"
    rows, want = [dict(inputs) for _ in range(world_size)], [expected] * world_size
    parts = {"first-step": ["first"], "parameters": ["params"], "zero-grad": ["grads"]}
    tolerance = dict.fromkeys(("first", "params", "grads"), TOLERANCE)
    return Case(
        "first-step", "ZeroAdamW", label, rows, want, measure=True, driver="train", parts=parts, tolerance=tolerance
    )


def memory_numel() -> int:
    return int(MEMORY["layers"]) * (int(MEMORY["width"]) ** 2 + int(MEMORY["width"]))


def memory_case(world_size: int, seed: int) -> Case:
    inputs = {"seed": seed, **MEMORY, **HYPER}
    expected = later(memory_reference, inputs)
    label = (
        f"{MEMORY['steps']} steps of {MEMORY['layers']} layers of {MEMORY['width']} x {MEMORY['width']}"
        f" ({memory_numel() * 8 / 2**20:.1f} MiB of parameters), one ZeroAdamW per layer"
    )
    rows, want = [dict(inputs) for _ in range(world_size)], [expected] * world_size
    parts, tolerance = {"sharded-state": ["digest"]}, {"digest": DIGEST_TOLERANCE}
    return Case("sharded-state", "ZeroAdamW", label, rows, want, driver="memory", parts=parts, tolerance=tolerance)


def phases(world_sizes: list[int], gen: torch.Generator) -> list[Phase]:
    """Training at every world size (values), then the memory case in a group of its own."""
    out = []
    for n in world_sizes:
        out.append(Phase(None, n, [training_case(n, int(torch.randint(0, 2**31 - 1, (1,), generator=gen)))]))
    seed = int(torch.randint(0, 2**31 - 1, (1,), generator=gen))
    out.append(Phase("memory", MEMORY_WORLD_SIZE, [memory_case(MEMORY_WORLD_SIZE, seed)]))
    return out


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


def allowed_bytes(world_size: int) -> dict[str, int]:
    """What a rank of the memory case may add to its memory, and what it is made of (bytes)."""
    width, layers = int(MEMORY["width"]), int(MEMORY["layers"])
    layer = width * width + width
    parts = {
        "parameters": layers * layer * 8,
        "moments": 2 * layers * math.ceil(layer / world_size) * 8,
        "temporaries": TEMPORARIES * layer * 8,
        "overhead": OVERHEAD,
    }
    return {**parts, "allowed": sum(parts.values()), "full_moments": 2 * layers * layer * 8}


def _mib(n: float) -> str:
    return f"{n / 2**20:.1f} MiB"


def sharded_state(facts: Facts) -> Outcome:
    groups = [g for g in facts.groups if g.phase == "memory"]
    if not groups or not groups[0].cases:
        return Outcome(False, "no cases were run for this check", fraction=0.0)
    g, n = groups[0], groups[0].world_size
    budget = allowed_bytes(n)
    peaks = [memory_peak(g, r) for r in range(n)]
    data: dict[str, Any] = {"peak_bytes_per_rank": peaks, **{f"{k}_bytes": v for k, v in budget.items()}}
    where = f"the memory case ({n} ranks, {g.cases[0].label})"
    wrong = [(r, why) for r in range(n) if (why := case_failure(g, 0, r, part="sharded-state"))]
    known = [p for p in peaks if p is not None]
    if len(known) < n:
        r = peaks.index(None)
        why = case_failure(g, 0, r) or "this grader could not read its memory from the kernel"
        return Outcome(False, f"In {where}, rank {r}'s memory was not measured ({why}).", data, fraction=0.0)
    over = [(r, p) for r, p in enumerate(known) if p > budget["allowed"]]
    problems = []
    if over:
        r, peak = over[0]
        problems.append(
            f"in {where}, rank {r}'s memory rose by {_mib(peak)} while your optimizers ran (measured by the kernel,"
            f" outside your process), more than the {_mib(budget['allowed'])} allowed with N = {n}: the"
            f" {_mib(budget['parameters'])} of parameters, {_mib(budget['moments'])} of moments for a 1/N slice of"
            f" every layer, {TEMPORARIES} layer-size temporaries ({_mib(budget['temporaries'])}) and"
            f" {_mib(OVERHEAD)} for Python and torch. Full AdamW state on every rank adds"
            f" {_mib(budget['full_moments'])}."
            " Keep exp_avg and exp_avg_sq for this rank's contiguous 1/N slice of the flattened parameters only (not"
            " whole parameters: a layer's weight is most of it), and let full-size buffers go at the end of step()"
        )
    if wrong:
        r, why = wrong[0]
        problems.append(
            f"in {where}, the parameters after training are wrong on rank {r} ({why}); the memory counts only for"
            " optimizers that train like AdamW"
        )
    equivalent = first_step(facts).passed and parameters(facts).passed
    if not equivalent and not problems:
        problems.append(
            f"the state is sharded (at most {_mib(max(known))} per rank), but training"
            " is not equivalent to AdamW yet: fix the parameters (see those checks) to earn these points"
        )
    if problems:
        message = "; ".join(problems) + "."
        return Outcome(False, message[0].upper() + message[1:], data, fraction=0.0)
    return Outcome(
        True,
        f"each rank's memory rose by at most {_mib(max(known))} ({', '.join(map(_mib, known))}; allowed"
        f" {_mib(budget['allowed'])}, full AdamW state alone would add {_mib(budget['full_moments'])}), and"
        " training is AdamW's",
        data,
    )


def _zero_grad_hint(g: Any, i: int, case: Case, rank: int) -> str:
    if case_failure(g, i, rank, part="parameters") is not None:
        return "The parameters were already wrong (see that check), so the gradients at them are too: fix those first."
    return (
        "After the last step the driver called zero_grad() and ran one more backward: a gradient that still"
        " holds earlier steps' values was not cleared. zero_grad() must clear the gradients of every parameter,"
        " not only those of this rank's slice (set p.grad = None, or zero it)."
    )


def zero_grad(facts: Facts) -> Outcome:
    return training.judge(facts, "zero-grad", _zero_grad_hint, success="one backward after zero_grad()")


RULES = {
    "first-step": first_step,
    "parameters": parameters,
    "ranks-identical": ranks_identical,
    "sharded-state": sharded_state,
    "zero-grad": zero_grad,
}
