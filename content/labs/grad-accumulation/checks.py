"""Trusted checks for grad-accumulation: per-submission inputs, the big-batch reference, the rules.

Never mounted into the sandbox. The reference is ``driver.reference`` (single-process
training with one backward of the mean loss over the whole global batch), run here,
outside the sandbox, on this lab's own copy of the public driver.
"""

from __future__ import annotations

from typing import Any

import torch

from labs.authoring import Case, Facts, Outcome, load_public, steps, training

DIMS = [256, 16, 16, 8]  # 4,520 float64 parameters: 35.3 KiB of gradients per all-reduce
# The global batch of every optimizer step, on every world size. Each example is 2,112 bytes (256 + 8
# float64), so a rank's shard of a step (102 to 204 examples, 215 to 431 KB) outweighs what any way of
# synchronising the gradients sends, even one all-reduce per micro-batch (K x 2(N-1)/N x 36 KB, at most
# 163 KB): moving the data costs more than the gradients, and a rank that sends as much as its data moved it.
BATCH = 408
MICRO = {2: 4, 3: 2, 4: 3}  # K, micro-batches per rank and step: 51, 68 and 34 examples each
STEPS = 3
LR, MOMENTUM, WEIGHT_DECAY = 0.1, 0.9, 0.01
TOLERANCE = (1e-9, 1e-11)  # (rtol, atol): float64, sums in another order differ by ~1e-16
# Bounds on each rank's bytes over all steps, as multiples of one all-reduce of the gradients per
# optimizer step (2(N-1)/N x S). Measured: a flat buffer 1.00-1.01, one call per parameter 1.01-1.03;
# an all-reduce after every micro-batch is K times that (2-4 here).
# BOUNDS is (high, low, bytes per rank on top for gloo's framing).
BOUNDS = (1.2, 0.9, 16384)
VOID = training.moved_the_data  # a rank that sent as many bytes as its data moved it: nothing it returned counts


def _judge(facts: Facts, check: str, hint: training.Hint) -> Outcome:
    return training.judge(facts, check, hint, success="big-batch single-process training", void=VOID)


def ranks_identical(facts: Facts) -> Outcome:
    advice = (
        "Every rank must end each call with the same, all-reduced gradients, so that the replicas never drift apart."
    )
    return training.ranks_identical(facts, steps=STEPS, first_check="gradients", advice=advice, void=VOID)


def shards(world_size: int, gen: torch.Generator) -> list[dict[str, Any]]:
    """Every rank's inputs: the model's seed (the same everywhere) and only its own shard of each step's batch."""
    settings = {"micro_batches": MICRO.get(world_size, 2), "lr": LR, "momentum": MOMENTUM, "weight_decay": WEIGHT_DECAY}
    return steps.private_shards(world_size, gen, settings, dims=DIMS, batch=BATCH, steps=STEPS)


def cases(world_size: int, gen: torch.Generator) -> list[Case]:
    driver = load_public(__file__, "driver")
    inputs = shards(world_size, gen)
    expected = driver.reference(inputs)
    k = int(inputs[0]["micro_batches"])
    per = BATCH // world_size // k
    label = f"{STEPS} steps, global batch {BATCH} = {world_size} ranks x {k} micro-batches of {per}"
    return [
        Case(check="gradients", fn="accumulate_and_sync", driver="train", label=label, inputs=inputs,
             **training.gradient_parts(world_size, expected, TOLERANCE))
    ]  # fmt: skip


def _first_step_gradients(per_rank: list[dict[str, Any]]) -> dict[str, list[dict[str, torch.Tensor]]]:
    """Per rank, the first step's gradients of each of its micro-batches' mean losses (nothing averaged)."""
    driver = load_public(__file__, "driver")
    inputs = per_rank[0]
    model = driver.build_model(int(inputs["seed"]), list(inputs["dims"]))
    out: dict[str, list[dict[str, torch.Tensor]]] = {}
    for r, mine in enumerate(per_rank):
        for xm, ym in driver.micro_batches(mine["x"][0], mine["y"][0], int(inputs["micro_batches"])):
            model.zero_grad(set_to_none=True)
            driver.loss_fn(model(xm), ym).backward()
            out.setdefault(str(r), []).append({n: p.grad.clone() for n, p in model.named_parameters()})
    return out


def _mean(trees: list[dict[str, torch.Tensor]], names: list[str]) -> torch.Tensor:
    """The mean of gradient trees computed here (float64, so each flattens), summed in their order."""
    total = torch.zeros(())
    for tree in trees:
        flat = training.flat(tree, names)
        assert flat is not None, "the reference's gradients are float64"
        total = total + flat
    return total / len(trees)


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    return torch.allclose(a, b, rtol=1e-6, atol=1e-12)


def _gradient_hint(g: Any, i: int, case: Case, rank: int) -> str:
    found = training.returned(g, i, case, rank, "grads")
    if found is None:
        return ""
    grads, expected = found
    names = list(expected)
    mine, want = training.flat(grads, names), training.flat(expected, names)
    if mine is None or want is None or mine.shape != want.shape or not torch.isfinite(mine).all():
        return " Leave a float64 gradient in every parameter's .grad (the same shape as the parameter)."
    n, k = g.world_size, int(case.inputs[rank]["micro_batches"])
    ratio = float(mine @ want / (want @ want))
    scaled = {
        k: f" Every gradient is K = {k} times too large: the K micro-batch losses were summed. Divide each"
        " micro-batch's loss by K = len(micro_batches) (or the accumulated gradients by K) so that .grad is"
        " the gradient of their mean.",
        n: f" Every gradient is {n} times too large: dist.all_reduce sums over the ranks, so divide by"
        " dist.get_world_size() as well as by K.",
        n * k: f" Every gradient is N x K = {n} x {k} times too large: divide by K (the micro-batches were"
        " summed) and by the world size (all_reduce sums).",
        1 / k: f" Every gradient is K = {k} times too small: divide by K only once.",
        1 / n: f" Every gradient is {n} times too small: divide by the world size only once.",
    }
    for factor, hint in scaled.items():
        if factor != 1 and _same(mine, factor * want):
            return hint
    micro = _first_step_gradients(case.inputs)
    local = _mean(micro[str(rank)], names)
    for factor in (1, k):
        if _same(mine, factor * local):
            return (
                " The gradients are this rank's own accumulated gradients: nothing was averaged across the ranks."
                " After the last micro-batch, all-reduce every gradient once and divide by dist.get_world_size()."
            )
    last = _mean([micro[str(r)][-1] for r in range(n)], names)
    for factor in (1, 1 / k):
        if _same(mine, factor * last):
            return (
                " The gradients come from the last micro-batch only: call backward() on every micro-batch's"
                " loss inside the loop (autograd adds each into .grad), and do not clear .grad between them."
            )
    wrong = [name for name in names if not _same(grads[name], expected[name])]  # each is there: it flattened
    if 0 < len(wrong) < len(names):
        return (
            f" {len(names) - len(wrong)} of {len(names)} parameters are right, but not {', '.join(wrong)}:"
            " accumulate and synchronise every parameter's gradient."
        )
    return (
        f" Each .grad must be (1/N) x sum over ranks of (1/K) x sum over micro-batches of the micro-batch"
        f" loss gradients; here it is {ratio:.4g} times the right one along its direction."
    )


def gradients(facts: Facts) -> Outcome:
    return _judge(facts, "gradients", _gradient_hint)


_parameter_hint = training.later_step_hint(
    ". The driver never clears .grad and optimizer.step() leaves it in place: start each of the"
    f" {STEPS} calls from zero gradients (model.zero_grad() or p.grad = None for every parameter) before"
    " the first backward()."
)


def parameters(facts: Facts) -> Outcome:
    return _judge(facts, "parameters", _parameter_hint)


PER_MICRO_BATCH = (
    "that is about one all-reduce per micro-batch. Do not communicate inside the loop over micro-batches"
    " (what DDP's no_sync() avoids): let backward() accumulate into .grad locally and all-reduce once,"
    " after the last micro-batch"
)
EXTRA = "all-reduce the gradients once per call, with no extra broadcasts, gathers or reductions"
MISSING = "every parameter's full accumulated gradient must be all-reduced once per call, in float64"


def _over(g: Any, case: Case, r: int, s: int, theory: float, size: int) -> tuple[str, str]:
    k = int(case.inputs[0]["micro_batches"])
    what = steps.traffic(g.world_size, r, s, theory, size, STEPS, unit="optimizer steps", extra=f"; K = {k}")
    return what, PER_MICRO_BATCH if 0.8 * k <= s / theory <= 1.3 * k else EXTRA


def _under(g: Any, case: Case, r: int, s: int, theory: float, size: int) -> tuple[str, str]:
    return steps.traffic(g.world_size, r, s, theory, size, STEPS, unit="optimizer steps"), MISSING


def communication(facts: Facts) -> Outcome:
    return training.gradient_bytes(
        facts,
        steps=STEPS,
        bounds=BOUNDS,
        over=_over,
        under=_under,
        success="each rank sent one all-reduce's worth of gradient bytes per optimizer step, not K",
        shown=lambda case: {"micro_batches": int(case.inputs[0]["micro_batches"])},
    )


RULES = {
    "gradients": gradients,
    "parameters": parameters,
    "ranks-identical": ranks_identical,
    "communication": communication,
}
