"""Trusted checks for local-sgd: per-submission shards, the single-process references, the rules.

Never mounted into the sandbox. For each world size the ranks train the same model three times, with
H = 1, 2 and 4, each a measured call whose bytes the kernel counts. The references are computed here
(``simulate.run``, float64, one thread), every rank's replica trained side by side on its own shards:
for H = 1 synchronous data parallelism (the replicas' gradients averaged before every step: the whole
global batch's gradient), for H = 2 and 4 local SGD (the replicas averaged after every H-th step).
"""

from __future__ import annotations

from typing import Any

import torch

from labs.authoring import Case, Facts, Outcome, case_failure, load_public, load_trusted, result, training, wire

simulate = load_trusted(__file__, "simulate")

DIMS = [256, 8, 8, 8]  # 2,200 float64 parameters: 17,600 bytes per average
# The global batch of every step: 48 examples a rank on 2 ranks, 32 on 3. Each example is 2,112 bytes
# (256 + 8 float64), so a rank's shard of one step (68 to 101 KB) outweighs what averaging the parameters
# sends (18 to 24 KB): moving the data costs more than the parameters, and a rank that sends as much as
# its data moved it.
BATCH = 96
STEPS = 8  # a multiple of every H: training ends with an average
EVERY = (1, 2, 4)  # H, the steps between two averages
LR, MOMENTUM, WEIGHT_DECAY = 0.1, 0.9, 0.01
TOLERANCE = (1e-9, 1e-11)  # (rtol, atol): float64; sums in another order differ by ~1e-15 after 8 steps
# Each rank's bytes in one training run against STEPS / H all-reduces of the parameters, 2(N-1)/N x S each:
# at most HIGH x that + FRAME bytes per collective (one per parameter tensor at most) + SETUP, at least LOW x
# it. gloo frames each all-reduce with its own bytes: measured 576 a collective on 2 ranks, 1,000-1,160 on 3,
# so a flat buffer sends 1.03-1.05 times the payload and one all-reduce per parameter 1.20-1.26 (NOTES.md).
HIGH, LOW, FRAME, SETUP = 1.1, 0.9, 1536, 4096
VOID = training.moved_the_data  # a rank that sent as many bytes as its data moved it: nothing it returned counts
SAME = (1e-6, 1e-12)  # a replayed mistake explains a result within this (rtol, atol)


def shards(world_size: int, gen: torch.Generator) -> list[dict[str, Any]]:
    """Every rank's inputs: the model's seed (the same everywhere) and only its own shard of each step's batch.

    Targets come from a fixed teacher, ``tanh(2 x W) + 0.1 noise``, so that the loss falls as training goes.
    Each shard is drawn from its rank's own generator: no rank can work out another rank's examples.
    """
    shared, *own = training.secret_generators(gen, world_size + 1)
    seed = int(torch.randint(0, 2**31 - 1, (1,), generator=shared))
    teacher = torch.randn(DIMS[0], DIMS[-1], generator=shared, dtype=torch.float64) / DIMS[0] ** 0.5
    per = BATCH // world_size
    settings = {"lr": LR, "momentum": MOMENTUM, "weight_decay": WEIGHT_DECAY}
    out = []
    for r in range(world_size):
        # One tensor per rank, steps x examples x features (a tensor each, not a list: quicker to send and load).
        xs = torch.randn(STEPS, per, DIMS[0], generator=own[r], dtype=torch.float64)
        noise = torch.randn(STEPS, per, DIMS[-1], generator=own[r], dtype=torch.float64)
        ys = torch.tanh(2 * xs @ teacher) + 0.1 * noise
        out.append({"seed": seed, "dims": DIMS, "steps": STEPS, **settings, "x": xs, "y": ys})
    return out


def replay(
    per_rank: list[dict[str, Any]], runs: list[tuple[Any, str]], steps: int | None = None
) -> list[list[dict[str, torch.Tensor]]]:
    """Per run ``(sync, mode)`` (``simulate.run``), every rank's parameters after ``steps`` steps (default: all)."""
    driver = load_public(__file__, "driver")
    first = per_rank[0]
    start = dict(driver.build_model(int(first["seed"]), list(first["dims"])).named_parameters())
    params, _ = simulate.run(
        start,
        [(inputs["x"], inputs["y"]) for inputs in per_rank],
        runs,
        steps=int(first["steps"]) if steps is None else steps,
        lr=float(first["lr"]),
        momentum=float(first["momentum"]),
        weight_decay=float(first["weight_decay"]),
    )
    return params


def after_every(h: int) -> Any:
    """The right schedule: an average after steps H-1, 2H-1, ... (0-based), i.e. after every H-th step."""
    return lambda step: (step + 1) % h == 0


def never(step: int) -> bool:
    return False


# Synchronous data parallelism: the ranks' gradients averaged before every step (the whole batch's gradient).
SYNCHRONOUS = (after_every(1), "gradients")


def cases(world_size: int, gen: torch.Generator) -> list[Case]:
    base = shards(world_size, gen)
    # One stacked simulation: synchronous data parallelism (the reference for H = 1), local SGD at each other H.
    runs = replay(base, [SYNCHRONOUS, *((after_every(h), "mean") for h in EVERY[1:])])
    out = []
    for h, params in zip(EVERY, runs, strict=True):
        inputs = [{**mine, "H": h} for mine in base]
        check = "synchronous" if h == 1 else "local-steps"
        label = f"H = {h}: {STEPS} steps, an average after every " + ("step" if h == 1 else f"{h}")
        expected = [{"params": mine} for mine in params]
        out.append(
            Case(check=check, fn="local_sgd_step", driver="train", label=label, inputs=inputs, expected=expected,
                 measure=True, parts={check: ["params"]}, tolerance={"params": TOLERANCE})
        )  # fmt: skip
    return out


# ---- advice: which mistake explains a wrong result ---------------------------------------------------------


def _close(got: Any, want: dict[str, torch.Tensor]) -> bool:
    if not isinstance(got, dict):
        return False
    for name, w in want.items():
        g = got.get(name)
        if not isinstance(g, torch.Tensor) or g.shape != w.shape or g.dtype != w.dtype:
            return False
        if not torch.allclose(g, w, rtol=SAME[0], atol=SAME[1]):
            return False
    return True


def _tree(g: Any, i: int, r: int, key: str) -> Any:
    tree = result(g, i, r)
    return tree.get(key) if isinstance(tree, dict) else None


def _ranks(ranks: list[int]) -> str:
    if len(ranks) == 1:
        return f"Rank {ranks[0]} ends with the parameters of training alone on its own shards: it never received"
    listed = ", ".join(map(str, ranks))
    return f"Ranks {listed} end with the parameters of training alone on their own shards: they never received"


SUM = (
    "After the first average every rank held the sum of the {n} replicas, not their mean: dist.all_reduce"
    " sums, so divide by dist.get_world_size() ({n}) after it."
)
BEFORE = (
    "The parameters equal averaging before optimizer.step() on the sync steps: each rank then applies its"
    " own last update after the average, and the replicas end apart. Take the optimizer step first, then"
    " average the parameters it produced."
)
EARLY = (
    "The parameters equal averaging after steps 0, {h}, {h2}, ... (counting from 0), one step early, so"
    " training ends {late} after the last average: average after the H-th, 2H-th, ... step, i.e."
    " when (step + 1) % H == 0."
)


def _hint(g: Any, i: int, case: Case, rank: int) -> str:
    n, h = g.world_size, int(case.inputs[0]["H"])
    got = [_tree(g, i, r, "params") for r in range(n)]
    if not all(isinstance(p, dict) for p in got):
        return ""
    first = case.inputs[0]
    model = load_public(__file__, "driver").build_model(int(first["seed"]), list(first["dims"]))
    start = {name: p.detach() for name, p in model.named_parameters()}
    if all(_close(mine, start) for mine in got):
        return (
            "The parameters never changed: local_sgd_step must take the optimizer step itself"
            " (optimizer.step()); the driver only computes the loss and its gradients."
        )
    # A sum over the ranks grows at every average, and 8 steps of it amplify rounding past any
    # tolerance: it is told at the first average (after step H - 1), which the driver returns.
    summed = replay(case.inputs, [(after_every(h), "sum")], steps=h)[0][rank]
    if _close({"flat": _tree(g, i, rank, "first")}, {"flat": torch.cat([t.reshape(-1) for t in summed.values()])}):
        return SUM.format(n=n)
    alone, dp, early, before = replay(
        case.inputs, [(never, "mean"), SYNCHRONOUS, (lambda step: step % h == 0, "mean"), (after_every(h), "before")]
    )
    lonely = [r for r in range(n) if _close(got[r], alone[r])]
    if len(lonely) == n:
        return (
            "Nothing was averaged: every rank ends with the parameters of training alone on its own shards."
            " After every H-th optimizer step, all-reduce every parameter and divide by the world size."
        )
    if lonely:
        return (
            f"{_ranks(lonely)} an average, while the others did. Every rank must end each sync with the mean:"
            " a dist.reduce leaves the sum on its destination only, dist.all_reduce leaves it on every rank."
        )
    if h > 1 and _close(got[rank], dp[rank]):
        return (
            f"With H = {h} the parameters equal synchronous data parallelism (what H = 1 gives): the ranks"
            " were averaged at every step (their gradients or their parameters). Local SGD leaves the"
            " gradients alone and averages the parameters only after every H-th step."
        )
    if h > 1 and _close(got[rank], early[rank]):
        return EARLY.format(h=h, h2=2 * h, late="1 step" if h == 2 else f"{h - 1} steps")
    if _close(got[rank], before[rank]):
        return BEFORE
    names = list(case.expected[rank]["params"])
    apart = [name for name in names if not _identical([p.get(name) for p in got])]
    if 0 < len(apart) < len(names):
        return (
            f"After the last average the ranks still hold different {', '.join(apart)}, while the other"
            " parameters agree: average every parameter, biases included."
        )
    return (
        "Each rank must end with local SGD's parameters: after every H-th optimizer step, every parameter"
        " replaced by its mean over the ranks; each rank keeps its own momentum buffers."
    )


def _identical(tensors: list[Any]) -> bool:
    first = tensors[0]
    if not all(isinstance(t, torch.Tensor) and t.shape == first.shape for t in tensors):
        return False
    return all(torch.allclose(t, first, rtol=1e-12, atol=1e-14) for t in tensors[1:])


def synchronous_rule(facts: Facts) -> Outcome:
    success = "synchronous data-parallel training on the whole batch"
    return training.judge(facts, "synchronous", _hint, success=success, void=VOID)


def local_steps(facts: Facts) -> Outcome:
    return training.judge(facts, "local-steps", _hint, success="the single-process simulation of local SGD", void=VOID)


def ranks_identical(facts: Facts) -> Outcome:
    """Every rank ended each run with the same parameters (8 steps is a multiple of H: training ends averaged)."""
    advice = (
        f"{STEPS} steps is a multiple of every H, so the last step ends with an average: every rank must receive the"
        " same mean of every parameter."
    )
    return training.ranks_identical(
        facts, steps=STEPS, advice=advice, first_check="synchronous", void=VOID, checks=("synchronous", "local-steps"),
        label=lambda g, case: f"world size {g.world_size}, H = {case.inputs[0]['H']}", at_most=1,
    )  # fmt: skip


# ---- communication ------------------------------------------------------------------------------------------


def _theory(case: Case, world_size: int) -> tuple[float, int, int, int]:
    """(payload bytes one rank sends in the run, the parameters' bytes, the averages, the parameter tensors)."""
    params = case.expected[0]["params"]
    size = sum(t.numel() * t.element_size() for t in params.values())
    syncs = STEPS // int(case.inputs[0]["H"])
    return syncs * 2 * (world_size - 1) / world_size * size, size, syncs, len(params)


def _bytes_verdict(g: Any, i: int, case: Case, sent: list[int]) -> str | None:
    n, h = g.world_size, int(case.inputs[0]["H"])
    if not training.finished(g, i):
        return "training did not finish on every rank (see the other checks), so its bytes say nothing"
    theory, size, syncs, tensors = _theory(case, n)
    off = wire.outside(sent, theory, (HIGH, LOW, syncs * tensors * FRAME + SETUP))
    if off is None:
        return None
    r, s = off
    what = (
        f"{syncs} all-reduces of the {size:,}-byte parameters send ({syncs} x 2(N-1)/N x {size:,} ="
        f" {round(theory):,} bytes, before gloo's framing)"
    )
    said = wire.compared(r, s, theory, what, during=f" in {STEPS} steps")
    if s < theory:
        return (
            f"{said}: fewer bytes than an all-reduce of every parameter after every H-th step. Some parameters"
            " may be left out, sent in a smaller dtype, or the mean may not go back to every rank (a reduce"
            " where an all-reduce is needed)"
        )
    if h > 1 and s >= 0.8 * h * theory:
        return (
            f"{said}: about one all-reduce of the model at every step, what H = 1 sends. Communicate only"
            f" after every H-th step ({syncs} times in {STEPS} steps), and then the parameters, not the gradients"
        )
    return (
        f"{said}: send each parameter once per average, and nothing else (no gradients, momentum buffers,"
        " losses or extra collectives)"
    )


def _right(g: Any, i: int) -> bool:
    check = g.cases[i].check
    return VOID(g, i) is None and all(case_failure(g, i, r, part=check) is None for r in range(g.world_size))


def _runs(facts: Facts) -> list[tuple[Any, int, Case]]:
    return [
        (g, i, case)
        for check in ("synchronous", "local-steps")
        for g, i, case in training.cases_judging(facts, check)
        if case.measure
    ]


def _chart(facts: Facts) -> dict[str, Any] | None:
    """Each H's training loss (the ranks' mean, at every step) against the bytes a rank had sent before that step.

    The kernel counts a whole run's bytes; they are spread evenly over its steps here.
    """
    for g in sorted(facts.groups, key=lambda g: -g.world_size):
        series = []
        for i, case in enumerate(g.cases):
            counts = g.wire.get(i)
            found = [(result(g, i, r) or {}).get("losses") for r in range(g.world_size)]
            losses = [t for t in found if isinstance(t, torch.Tensor) and t.shape == (STEPS,)]
            if counts is None or len(losses) != g.world_size:
                continue
            per_rank = sum(wire.sent(counts, g.world_size)) / g.world_size
            mean = torch.stack(losses).double().mean(dim=0).tolist()
            points = [[round(per_rank * s / STEPS / 1024, 3), round(v, 5)] for s, v in enumerate(mean)]
            series.append({"name": f"H = {case.inputs[0]['H']}", "points": points})
        if series:
            return {
                "title": f"Training loss against the bytes each rank had sent, world size {g.world_size}",
                "x_label": "KiB sent per rank (kernel count, spread evenly over the steps)",
                "y_label": "training loss (mean over the ranks' shards)",
                "series": series,
            }
    return None


def communication(facts: Facts) -> Outcome:
    data: dict[str, Any] = {}
    per_step: dict[int, dict[int, float]] = {}
    ratios: list[float] = []
    for g, i, case in _runs(facts):
        counts = g.wire.get(i)
        if counts is None:
            continue
        n, h = g.world_size, int(case.inputs[0]["H"])
        theory, size, syncs, _ = _theory(case, n)
        sent = wire.sent(counts, n)
        data.setdefault(f"world_size_{n}", {})[f"H={h}"] = {
            "parameter_bytes": size,
            "averages": syncs,
            "theory_bytes_per_rank": round(theory),
            "measured_bytes_per_rank": sent,
            "bytes_per_step_per_rank": round(max(sent) / STEPS),
        }
        per_step.setdefault(n, {})[h] = max(sent) / STEPS
        ratios.extend(s / theory for s in sent)
    chart = _chart(facts)
    if chart:
        data["chart"] = chart
    shares = []
    for n, by_h in sorted(per_step.items()):
        if by_h.get(1):
            rest = " and ".join(f"{by_h[h] / by_h[1]:.2f} (H = {h})" for h in EVERY[1:] if h in by_h)
            shares.append(f"{rest} of H = 1's at world size {n}")
    low, high = (f"{min(ratios):.2f}", f"{max(ratios):.2f}") if ratios else ("", "")
    spread = low if low == high else f"{low} to {high}"
    success = (
        f"every rank sent {spread} times one all-reduce of the parameters per H steps (gloo's framing"
        " included): per step, " + "; ".join(shares) + " (the chart below draws the loss against these bytes)"
    )
    return wire.judge(
        _runs(facts),
        _bytes_verdict,
        success=success,
        call="training run",
        where=lambda g, case: f"world size {g.world_size}, H = {case.inputs[0]['H']}",
        right=_right,
        wrong="the parameters are wrong (see the other checks)",
        data=data,
    )


RULES = {
    "synchronous": synchronous_rule,
    "local-steps": local_steps,
    "ranks-identical": ranks_identical,
    "communication": communication,
}
