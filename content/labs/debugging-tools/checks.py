"""Trusted checks for debugging-tools: each grade's calls, the single-process truth, the rules.

Never mounted into the sandbox. The expected norms, losses and collective outputs are
computed here on one process with this lab's own copy of the public driver. Points come from
those results and from the kernel's byte counts; the timing table's durations, read inside the
ranks, are feedback only (``timing.timing_times``).
"""

from __future__ import annotations

from typing import Any

import torch

from labs.authoring import Case, Facts, Outcome, load_public, load_trusted, result, rules, tallies, training

DIMS = [32, 64, 8]  # 2,632 float64 parameters
BATCH = 24  # equal shards on 2, 3 and 4 ranks
TOLERANCE = (1e-9, 1e-12)
NUDGE = 1e-3  # every rank's model in a sync call has one weight scaled by 1 + s, |s| < NUDGE
DRIFT = 1e-6  # a drifted replica's weight: off by this much, relative
OPS = 6  # collectives per timing call: all_reduce, broadcast, all_gather, twice each, in a random order
# Elements per collective, so that gloo's framing does not dominate: all_reduce and broadcast 8-16 Ki
# (float64 or float32); all_gather 16-24 Ki float64, so that its bytes are at least 40% of the wire.
NUMEL = {"all_reduce": (8192, 16385), "broadcast": (8192, 16385), "all_gather": (16384, 24577)}
# Total bytes on the wire over all ranks, as multiples of gloo's algorithms (LABS-FACTS): all_reduce
# 2(N-1)S, broadcast (N-1)S, all_gather N(N-1)S. Measured on the reference: 1.003-1.005; an all_gather
# emulated by an all-reduce of a padded buffer: 1.4 or more (all_gather is 40% of the bytes or more).
HIGH, LOW = 1.15, 0.9
HEADERS = 4096  # bytes per rank and collective on top, for gloo's framing and the driver's barriers
SIZES = {"float64": 8, "float32": 4}
timing = load_trusted(__file__, "timing")  # the rules on the timing table


def _draw(gen: torch.Generator, high: int) -> int:
    return int(torch.randint(0, high, (1,), generator=gen))


def _norm(grads: dict[str, torch.Tensor]) -> torch.Tensor:
    return torch.stack([g.pow(2).sum() for g in grads.values()]).sum().sqrt()


def local_gradients(seed: int, rank: int, world_size: int) -> dict[str, torch.Tensor]:
    """Rank ``rank``'s own gradients after one backward on its shard (what it holds before any averaging)."""
    driver = load_public(__file__, "driver")
    model = driver.build_model(seed, DIMS)
    x, y = driver.make_batch(seed + 1, DIMS, BATCH)
    driver.loss_fn(model, driver.shard(x, rank, world_size), driver.shard(y, rank, world_size)).backward()
    return {name: p.grad.detach().clone() for name, p in model.named_parameters() if p.grad is not None}


def _norms_case(world_size: int, seed: int) -> Case:
    grads = [local_gradients(seed, r, world_size) for r in range(world_size)]
    norms = torch.stack([_norm(g) for g in grads])
    inputs = {"seed": seed, "dims": DIMS, "batch": BATCH}
    return Case(
        check="norms",
        fn="gradient_norms",
        driver="norms",
        label=f"gradient norms after one backward on each rank's {BATCH // world_size} examples",
        inputs=[inputs] * world_size,
        expected=[{"norms": norms, "grads": g} for g in grads],
        parts={"norms": ["norms"], "gradients-untouched": ["grads"]},
        tolerance={"norms": TOLERANCE, "grads": (0.0, 0.0)},
    )


def _nudge(gen: torch.Generator) -> dict[str, Any]:
    """One weight scaled by ``1 + scale``, ``scale`` drawn in [-NUDGE, NUDGE): every rank is given one."""
    k = _draw(gen, len(DIMS) - 1)
    scale = NUDGE * (2 * float(torch.rand((), generator=gen, dtype=torch.float64)) - 1) - DRIFT
    return {"param": f"{2 * k}.weight", "index": _draw(gen, DIMS[k] * DIMS[k + 1]), "scale": scale}


def _inputs(gen: torch.Generator) -> dict[str, Any]:
    """One rank's inputs of a ``sync`` call, every seed drawn on its own."""
    model_seed, batch_seed = _draw(gen, 2**31 - 1), _draw(gen, 2**31 - 1)
    return {"model_seed": model_seed, "batch_seed": batch_seed, "dims": DIMS, "batch": BATCH, "nudge": _nudge(gen)}


def _drift(gen: torch.Generator) -> tuple[dict[str, Any], dict[str, Any]]:
    """The other ranks' inputs and rank 0's, whose nudged weight is off by a relative DRIFT more: its loss
    moves by ~1e-13 to 1e-7 relative. Rank 0's scale is drawn from the same range as everyone's."""
    driver = load_public(__file__, "driver")
    base: dict[str, Any] = {}
    drifted: dict[str, Any] = {}
    for _ in range(20):
        base = _inputs(gen)
        nudge = base["nudge"]
        drifted = {**base, "nudge": {**nudge, "scale": (1 + nudge["scale"]) * (1 + DRIFT) - 1}}
        want, got = float(driver.sync_loss(base)), float(driver.sync_loss(drifted))
        if 1e-13 < abs(got - want) / abs(want) < 1e-7:
            break
    return base, drifted


def difference(case: Case) -> str | None:
    """How the ranks' inputs of a ``sync`` call differ: None (all the same), "batch" or "drift"."""
    first = case.inputs[0]
    if all(inputs == first for inputs in case.inputs):
        return None
    return "batch" if any(inputs["batch_seed"] != first["batch_seed"] for inputs in case.inputs) else "drift"


def _sync_cases(world_size: int, gen: torch.Generator) -> list[Case]:
    """Four calls in an order drawn afresh: each rank is given its own inputs only, so no rank can tell from
    them whether the others were given the same (only their losses can)."""
    n = world_size
    other = 1 + _draw(gen, n - 1)  # never rank 0: comparing with rank 0 alone shows
    same, shared, again = _inputs(gen), _inputs(gen), _inputs(gen)
    moved = {**shared, "batch_seed": _draw(gen, 2**31 - 1)}
    base, drifted = _drift(gen)
    plan = [
        ("in sync: the same model, batch and weights on every rank", [same] * n),
        (f"rank {other} reads another batch", [moved if r == other else shared for r in range(n)]),
        ("one weight of rank 0's replica drifted by a relative 1e-6", [drifted, *[base] * (n - 1)]),
        ("in sync again: another model and batch, the same on every rank", [again] * n),
    ]
    return [
        Case(
            check="sync",
            fn="losses_in_sync",
            driver="sync",
            label=label,
            inputs=[dict(inputs) for inputs in per_rank],
            expected=[{"in_sync": all(inputs == per_rank[0] for inputs in per_rank)} for _ in range(n)],
            parts={"sync": ["in_sync"]},
        )
        for label, per_rank in (plan[k] for k in torch.randperm(len(plan), generator=gen).tolist())
    ]


def _timing_case(world_size: int, gen: torch.Generator) -> Case:
    driver = load_public(__file__, "driver")
    seed = _draw(gen, 2**31 - 1)
    kinds = ["all_reduce", "broadcast", "all_gather"] * (OPS // 3)
    ops = []
    for k in torch.randperm(OPS, generator=gen).tolist():
        kind = kinds[k]
        dtype = "float64" if kind == "all_gather" else ("float64", "float32")[_draw(gen, 2)]
        low, high = NUMEL[kind]
        numel = low + _draw(gen, high - low)
        ops.append({"op": kind, "dtype": dtype, "numel": numel, "src": _draw(gen, world_size)})
    broadcasts = [op for op in ops if op["op"] == "broadcast"]
    if all(op["src"] == 0 for op in broadcasts):  # a broadcast that ignores src must show in every grade
        broadcasts[-1]["src"] = 1 + _draw(gen, world_size - 1)
    reduces = [i for i, op in enumerate(ops) if op["op"] == "all_reduce"]
    delayed, straggler = reduces[_draw(gen, len(reduces))], _draw(gen, world_size)
    rows = [{"op": op["op"], "bytes": op["numel"] * SIZES[op["dtype"]]} for op in ops]
    results = [driver.digest(driver.expected_output(seed, i, op, world_size)) for i, op in enumerate(ops)]
    inputs = {"seed": seed, "ops": ops, "delayed": delayed, "straggler": straggler, "delay": timing.DELAY}
    said = ", ".join(f"{op['op']} ({op['dtype']}, {op['numel']})" for op in ops)
    return Case(
        check="timing-rows",
        fn="CommProfiler",
        driver="timing",
        label=f"{OPS} collectives through CommProfiler: {said}",
        **rules.replicated(world_size, inputs, {"rows": rows, "results": results}),
        measure=True,
        parts={"collective-results": ["results"]},
        tolerance={"results": (0.0, 0.0)},
    )


def cases(world_size: int, gen: torch.Generator) -> list[Case]:
    seed = _draw(gen, 2**31 - 1)
    return [_norms_case(world_size, seed), *_sync_cases(world_size, gen), _timing_case(world_size, gen)]


def _norms_hint(g: Any, i: int, case: Case, rank: int) -> str:
    got = result(g, i, rank)
    if not isinstance(got, dict):
        return ""
    mine = got.get("norms")
    want = case.expected[rank]["norms"]
    n = g.world_size
    if not isinstance(mine, torch.Tensor):
        return f" gradient_norms must return a float tensor of shape ({n},) (got {mine})."
    if mine.shape != want.shape:
        if mine.numel() == 1 and torch.allclose(mine.reshape(()), want[rank]):
            return (
                f" That is this rank's own norm only: gather every rank's norm (dist.all_gather of the"
                f" one-element norm) and return all {n}, in rank order."
            )
        return f" Return one norm per rank: shape ({n},), entry r being rank r's norm."
    close = [bool(torch.isclose(mine[r], want[r], rtol=1e-9)) for r in range(n)]
    if close[rank] and not all(close):
        return (
            f" Entry {rank} (this rank's own norm) is right, the others are not: every rank must hold every"
            " rank's norm. Gather the local norms with dist.all_gather (or all-reduce a vector that is zero"
            " except at your own index)."
        )
    seed = int(case.inputs[rank]["seed"])
    grads = [local_gradients(seed, r, n) for r in range(n)]
    mean = _norm({k: sum(gr[k] for gr in grads) / n for k in grads[0]})  # type: ignore[misc]
    if torch.allclose(mine, mean.expand(n), rtol=1e-9):
        return (
            " Every entry is the norm of the gradient averaged over the ranks. Monitoring per rank means"
            " each rank's own, local gradient (a rank whose gradient explodes shows up only there): take"
            " the norm before any averaging, and gather the norms, not the gradients."
        )
    if torch.allclose(mine, want**2, rtol=1e-9):
        return " These are the squared norms: take the square root of the sum of squares."
    per = torch.stack([torch.stack([gr[k].norm() for k in gr]).sum() for gr in grads])
    if torch.allclose(mine, per, rtol=1e-9):
        return (
            " These are sums of the per-parameter norms: the L2 norm over all parameters is"
            " sqrt(sum over parameters of (p.grad ** 2).sum())."
        )
    return " Entry r must be sqrt(sum over parameters of (p.grad ** 2).sum()) on rank r, before any averaging."


def norms(facts: Facts) -> Outcome:
    return training.judge(facts, "norms", _norms_hint, success="every rank's own gradient norm")


def gradients_untouched(facts: Facts) -> Outcome:
    return training.judge(
        facts,
        "gradients-untouched",
        " gradient_norms changed the gradients it was monitoring (the optimizer step still needs them"
        " as they were): compute the norms from the values, and never all-reduce or scale p.grad in place.",
        success="the gradients as they were before the call",
    )


def _sync_hint(g: Any, i: int, case: Case, got: Any) -> str:
    said = [tallies.said(g, i, r, "in_sync") for r in range(g.world_size)]
    if not all(isinstance(a, bool) for a in said):
        return " losses_in_sync must return a bool (or a one-element bool tensor) on every rank."
    if len(set(said)) > 1:
        return (
            " Some ranks answered right, others not: each rank must learn every other rank's loss"
            " (all_reduce with MAX and with MIN, or all_gather), not only rank 0's (see the agreement check)."
        )
    change = difference(case)
    if change is None:
        return (
            " Every rank computed the same loss, bit for bit, so the answer is True. Compare the exact values;"
            " an all-reduced mean or sum of N equal numbers can round differently from the number itself."
        )
    if change == "drift":
        return (
            " Rank 0's loss differed only around the tenth significant digit: a drifted replica."
            " A tolerance (allclose, isclose) accepts that by design; compare exactly."
        )
    return " One rank's loss differed, so the answer is False everywhere."


sync, agreement = tallies.bool_rules(
    "sync",
    "in_sync",
    _sync_hint,
    advice="A rank that compares its loss with rank 0's alone cannot know about the others: reduce the losses so"
    " that every rank sees the same result (all_reduce with MAX and with MIN, or all_gather) and decide from that",
)


def collective_results(facts: Facts) -> Outcome:
    return training.judge(
        facts,
        "collective-results",
        " (results[k] is [sum, position-weighted sum] of collective k's output on this rank.) The profiler must"
        " run each collective exactly as torch.distributed does, with the caller's arguments (the reduce op,"
        " the broadcast's src, the all_gather's tensor_list), and leave its output as the collective left it:"
        " a profiler only observes.",
        success="what torch.distributed's collectives leave",
    )


def _theory(op: dict[str, Any], n: int) -> int:
    size = op["numel"] * SIZES[op["dtype"]]
    return {"all_reduce": 2 * (n - 1) * size, "broadcast": (n - 1) * size, "all_gather": n * (n - 1) * size}[op["op"]]


def communication(facts: Facts) -> Outcome:
    tally = tallies.Tally(unit="call", empty="no timing call was run")
    data: dict[str, Any] = {}
    for g, i, case in timing.calls(facts):
        n, wire, ops = g.world_size, g.wire.get(i), case.inputs[0]["ops"]
        if wire is None or not training.finished(g, i):
            tally.add(f"{g.name}: the timing call did not finish on every rank, so its bytes say nothing")
            continue
        theory = sum(_theory(op, n) for op in ops)
        sent = sum(sum(peers.values()) for peers in wire["sent"].values())
        data[f"world_size_{n}"] = {"expected_total_bytes": theory, "measured_total_bytes": sent, "sent": wire["sent"]}
        said = f"{g.name}: the ranks sent {sent:,} bytes in all, {sent / theory:.3g}"
        if sent > HIGH * theory + n * (len(ops) + 3) * HEADERS:
            tally.add(
                f"{said} times what the {len(ops)} collectives need with gloo's own algorithms ({theory:,}). Run each"
                " collective once, as itself (an all_gather emulated by an all-reduce of a padded buffer sends twice"
                " as much)"
            )
        elif sent < LOW * theory:
            tally.add(
                f"{said} of what the {len(ops)} collectives need ({theory:,}): the profiler must really run every"
                " collective it records"
            )
        else:
            tally.add(None)
    return tally.outcome("the profiled collectives put their own bytes on the wire, no more", data, shown=2)


RULES = {
    "norms": norms,
    "gradients-untouched": gradients_untouched,
    "sync": sync,
    "agreement": agreement,
    "timing-rows": timing.timing_rows,
    "timing-times": timing.timing_times,
    "collective-results": collective_results,
    "communication": communication,
}
