"""Trusted checks for gpu-memory-profile: per-submission sizes, the grader's own measurement, the rules.

Never mounted into the sandbox. The expected figures are measured here, in the worker, on the
worker's GPU, with this lab's copy of the driver's ``measure`` (``torch.cuda.memory_allocated``
before and after each stage of one AdamW step); the chapter's formula is counted here too:
$4P$ bytes of parameters, $4P_t$ of gradients and $8P_t$ of AdamW moments for $P$ float32
parameters of which $P_t$ train. Every parameter's size is a multiple of 512 bytes and at most 1 MiB
(the caching allocator's block size and its small pool), so the measurement can equal the formula
exactly. The grader only calls ``cases`` on a worker with a GPU.

Points come only from the student's figures and formula, compared here with that measurement and
count: they are results, like any returned value. Nothing the rank measures is taken as the truth.
"""

from __future__ import annotations

from typing import Any

import torch

from labs.authoring import Case, Facts, Outcome, case_failure, load_public, result

FIGURES = ("parameters", "gradients", "optimizer_states", "activations")
TOLERANCE = {"parameters": 0.01, "gradients": 0.01, "optimizer_states": 0.01, "activations": 0.05}
HINTS = {
    "parameters": "Read torch.cuda.memory_allocated() before make_model() and after moving the model to the GPU.",
    "gradients": (
        "The gradients are what stays after loss.backward() beyond the model itself: memory after backward (loss "
        "deleted) minus memory after the model was on the GPU. The backward pass frees the activations, so the "
        "change across backward alone is not the gradients."
    ),
    "optimizer_states": (
        "AdamW makes exp_avg and exp_avg_sq at its first step(): the change across optimizer.step(), with the "
        "gradients still there (do not zero them before reading the memory)."
    ),
    "activations": (
        "The activations are what the forward pass leaves allocated for backward: memory right after "
        "loss = model(tokens, targets) minus memory before it, before loss.backward() frees them."
    ),
    "formula": (
        "In float32 every parameter takes 4 bytes; every trainable one also a 4-byte gradient and AdamW's two "
        "4-byte moments."
    ),
}


def configs(gen: torch.Generator) -> list[dict[str, Any]]:
    def pick(options: list[int]) -> int:
        return options[int(torch.randint(0, len(options), (1,), generator=gen))]

    seed = int(torch.randint(0, 2**31 - 1, (1,), generator=gen))
    base = {
        "seed": seed, "vocab": pick([512, 1024]), "dim": pick([128, 256]), "heads": 4, "layers": pick([2, 3]),
        "context": 128, "batch": pick([4, 8]), "tokens": pick([64, 128]),
    }  # fmt: skip
    return [{**base, "frozen": False}, {**base, "seed": seed + 7, "frozen": True}]


def formula(config: dict[str, Any]) -> dict[str, float]:
    """The chapter's formula for this model: 4P, 4P_t, 8P_t bytes."""
    driver = load_public(__file__, "driver")
    p, trainable = driver.counts(config)
    return {"parameters": 4.0 * p, "gradients": 4.0 * trainable, "optimizer_states": 8.0 * trainable}


def expected(config: dict[str, Any]) -> dict[str, Any]:
    """The grader's measurement, on this process's GPU, and the formula."""
    driver = load_public(__file__, "driver")
    where = driver.device()
    driver.warm_up(config, where)
    tokens, targets = driver.make_batch(config, where)
    measured = {k: float(v) for k, v in driver.measure(lambda: driver.build_model(config), tokens, targets).items()}
    del tokens, targets
    torch.cuda.empty_cache()
    return {"figures": measured, "formula": formula(config)}


def label(config: dict[str, Any]) -> str:
    frozen = ", embeddings frozen" if config["frozen"] else ""
    return (
        f"transformer ({config['layers']} blocks, dim {config['dim']}, vocab {config['vocab']}{frozen};"
        f" batch {config['batch']} x {config['tokens']} tokens)"
    )


def cases(world_size: int, gen: torch.Generator) -> list[Case]:
    return [
        Case(
            check="parameters",
            fn="profile_memory",
            driver="profile",
            label=label(config),
            inputs=[config for _ in range(world_size)],
            expected=[expected(config) for _ in range(world_size)],
        )
        for config in configs(gen)
    ]


def _mib(n: float) -> str:
    return f"{n:,.0f} bytes ({n / (1 << 20):.2f} MiB)"


def figure_rule(key: str, source: str) -> Any:
    """Your ``source`` ("figures" or "formula") at ``key`` within its tolerance of the grader's, on every case."""
    tolerance = TOLERANCE.get(key, 0.001) if source == "figures" else 0.001

    def rule(facts: Facts) -> Outcome:
        total = right = 0
        problems: list[str] = []
        for g in facts.groups:
            for i, case in enumerate(g.cases):
                for r in range(g.world_size):
                    total += 1
                    tree = result(g, i, r)
                    want = case.expected[r][source][key]
                    if not isinstance(tree, dict):
                        problems.append(f"{case.label}: no result ({case_failure(g, i, r)})")
                        continue
                    got = tree.get(source, {}).get(key)
                    if not isinstance(got, int | float):
                        problems.append(f"{case.label}: {source} has no number at {key!r} (got {got!r})")
                    elif abs(got - want) > tolerance * abs(want) + 1024:
                        what = "your measured" if source == "figures" else "your formula's"
                        problems.append(
                            f"{case.label}: {what} {key} is {_mib(got)}, the grader measured {_mib(want)}"
                            if source == "figures"
                            else f"{case.label}: {what} {key} is {_mib(got)}, the formula gives {_mib(want)}"
                        )
                    else:
                        right += 1
        if not total:
            return Outcome(False, "no cases were run for this check", fraction=0.0)
        if not problems:
            return Outcome(True, f"{key} right in all {total} cases (within {tolerance:.0%})")
        advice = HINTS["formula" if source == "formula" else key]
        message = f"{problems[0]}" + (f"; {len(problems) - 1} more wrong" if len(problems) > 1 else "")
        return Outcome(False, f"{message} [{right} of {total} right]. {advice}", fraction=right / total)

    return rule


def formula_rule(facts: Facts) -> Outcome:
    """Your chapter_formula equals 4P / 4P_t / 8P_t on both models, and says how the measurement compares."""
    outcomes = [figure_rule(key, "formula")(facts) for key in FIGURES[:3]]
    fraction = sum(o.fraction if o.fraction is not None else float(o.passed) for o in outcomes) / len(outcomes)
    wrong = [o.message for o in outcomes if not o.passed]
    if wrong:
        return Outcome(False, wrong[0], fraction=fraction)
    verdicts = []
    for g in facts.groups:
        for case in g.cases:
            e = case.expected[0]
            gap = max(abs(e["figures"][k] - e["formula"][k]) / e["formula"][k] for k in FIGURES[:3])
            verdicts.append(f"{case.label}: the measurement is within {gap:.2%} of 4P / 4P_t / 8P_t")
    return Outcome(True, "your formula is the chapter's; " + "; ".join(verdicts), fraction=1.0)


RULES = {
    "parameters": figure_rule("parameters", "figures"),
    "gradients": figure_rule("gradients", "figures"),
    "optimizer-states": figure_rule("optimizer_states", "figures"),
    "activations": figure_rule("activations", "figures"),
    "formula": formula_rule,
}
