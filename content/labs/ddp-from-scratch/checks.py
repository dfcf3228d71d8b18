"""Trusted checks for ddp-from-scratch: per-submission inputs, the single-process reference, the rules.

Never mounted into the sandbox. The reference is ``driver.reference`` (single-process
training on the whole global batch), run here, outside the sandbox, on this lab's own
copy of the public driver.
"""

from __future__ import annotations

from typing import Any

import torch

from labs.authoring import Case, Facts, Outcome, load_public, steps, training

DIMS = [256, 16, 16, 8]  # 4,520 float64 parameters: 35.3 KiB of gradients per all-reduce
# The global batch: equal shards on 2, 3 and 4 ranks. Each example is 2,112 bytes (256 + 8 float64), so
# a rank's shard of a step (72 to 144 examples, 152 to 304 KB) outweighs what any way of synchronising
# the gradients sends (an all-gather on 4 ranks: 3 x 36 KB): moving the data costs more than the
# gradients, as in real data parallelism, and a rank that sends as much as its data moved it.
BATCH = 288
STEPS = 4
LR, WEIGHT_DECAY = 0.1, 0.01
TOLERANCE = (1e-9, 1e-11)  # (rtol, atol): float64, sums in another order differ by ~1e-16
# Bounds on each rank's bytes over all steps, as multiples of one all-reduce of the gradients per
# step (2(N-1)/N x S). Measured: a flat buffer 1.002-1.005, one call per parameter 1.01-1.03;
# reduce+broadcast 1.51 (N = 2), an all-gather 1.51 (N = 3); float32 gradients would be 0.5.
# BOUNDS is (high, low, bytes per rank on top for gloo's framing).
BOUNDS = (1.2, 0.9, 16384)
VOID = training.moved_the_data  # a rank that sent as many bytes as its data moved it: nothing it returned counts


def shards(world_size: int, gen: torch.Generator) -> list[dict[str, Any]]:
    """Every rank's inputs: the model's seed (the same everywhere) and only its own shard of each step's batch."""
    settings = {"lr": LR, "weight_decay": WEIGHT_DECAY}
    return steps.private_shards(world_size, gen, settings, dims=DIMS, batch=BATCH, steps=STEPS)


def cases(world_size: int, gen: torch.Generator) -> list[Case]:
    driver = load_public(__file__, "driver")
    inputs = shards(world_size, gen)
    label = f"{STEPS} SGD steps of an MLP {'-'.join(map(str, DIMS))} on a global batch of {BATCH}"
    ref = driver.reference(inputs)
    return [
        Case(check="gradients", fn="sync_gradients", driver="train", label=label, inputs=inputs,
             **training.gradient_parts(world_size, ref, TOLERANCE))
    ]  # fmt: skip


def _close(a: Any, b: torch.Tensor) -> bool:
    if not isinstance(a, torch.Tensor) or a.shape != b.shape or a.dtype != b.dtype:
        return False
    return torch.allclose(a, b, rtol=TOLERANCE[0], atol=TOLERANCE[1])


def _local_gradients(inputs: dict[str, Any]) -> dict[str, torch.Tensor]:
    """A rank's own shard gradients in the first step (what it has before any averaging)."""
    driver = load_public(__file__, "driver")
    model = driver.build_model(int(inputs["seed"]), list(inputs["dims"]))
    driver.loss_fn(model, inputs["x"][0], inputs["y"][0]).backward()
    return {name: p.grad for name, p in model.named_parameters() if p.grad is not None}


def _gradient_hint(g: Any, i: int, case: Case, rank: int) -> str:
    found = training.returned(g, i, case, rank, "grads")
    if found is None:
        return ""
    grads, expected = found
    wrong = [n for n in expected if not _close(grads.get(n), expected[n])]
    n = g.world_size
    if wrong and all(_close(grads.get(k), n * expected[k]) for k in expected):
        return (
            f" Every gradient is {n} times too large: dist.all_reduce sums, so divide by"
            " dist.get_world_size() to get the average."
        )
    local = _local_gradients(case.inputs[rank])
    if all(_close(grads.get(k), local[k]) for k in expected):
        return (
            " The gradients are still this rank's own shard gradients: nothing was averaged into .grad."
            " All-reduce the gradients themselves (p.grad, not p or p.data), or copy the reduced flat"
            " buffer back into every p.grad."
        )
    if len(wrong) < len(expected):
        return (
            f" {len(expected) - len(wrong)} of {len(expected)} parameters are right, but not"
            f" {', '.join(wrong)}: average every parameter's gradient."
        )
    return " Each .grad must be the mean over ranks of the ranks' shard gradients (all-reduce, then divide)."


def gradients(facts: Facts) -> Outcome:
    return training.judge(facts, "gradients", _gradient_hint, success="single-process training", void=VOID)


_parameter_hint = training.later_step_hint(
    f": every one of the {STEPS} calls must average the gradients that loss.backward() just produced."
)


def parameters(facts: Facts) -> Outcome:
    return training.judge(facts, "parameters", _parameter_hint, success="single-process training", void=VOID)


def ranks_identical(facts: Facts) -> Outcome:
    advice = "Every rank must apply the same averaged gradients, so that the replicas never drift apart."
    return training.ranks_identical(facts, steps=STEPS, first_check="gradients", advice=advice, void=VOID)


def _over(g: Any, case: Case, r: int, s: int, theory: float, size: int) -> tuple[str, str]:
    advice = "send each gradient once per step with dist.all_reduce: no extra broadcasts, gathers or second reductions"
    return steps.traffic(g.world_size, r, s, theory, size, STEPS), advice


def _under(g: Any, case: Case, r: int, s: int, theory: float, size: int) -> tuple[str, str]:
    advice = "every parameter's full gradient must be all-reduced at every step"
    return steps.traffic(g.world_size, r, s, theory, size, STEPS), advice


def communication(facts: Facts) -> Outcome:
    success = "each rank sent one all-reduce's worth of gradient bytes per step"
    return training.gradient_bytes(facts, steps=STEPS, bounds=BOUNDS, over=_over, under=_under, success=success)


RULES = {
    "gradients": gradients,
    "parameters": parameters,
    "ranks-identical": ranks_identical,
    "communication": communication,
}
