"""Trusted checks for activation-checkpointing: per-submission inputs, plain backpropagation, the rules.

Never mounted into the sandbox. The values are judged against plain backpropagation
(``driver.reference``) run here, outside the sandbox, on this lab's own copy of the public
driver. The memory bound at each segment count is the peak that this lab's reference
checkpointing (``solution.py``, one ``torch.utils.checkpoint`` per segment) reaches under the
same measurement, plus an allowance: bytes depend on the shapes only, never on the seed, so
they are measured once per shape and kept.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import torch

from labs import training
from labs.judge import Case, Facts, Outcome, case_failure, result
from labs.public import load_public

LAYERS, DIM, HEADS, BATCH, TOKENS, DROPOUT = 12, 32, 2, 2, 16, 0.1
SEGMENTS = (2, 3, 4, 6)  # every one divides the 12 blocks; 3 and 4 are the nearest to sqrt(12)
TOLERANCE = (1e-9, 1e-11)  # float64; another order of the same sums differs by ~1e-16
ALLOWANCE = 1.15  # a peak up to 15% above the reference checkpointing's passes
INPUT_BYTES = BATCH * TOKENS * DIM * 8  # one block input (float64)


def _inputs(seed: int, segments: int) -> dict[str, Any]:
    return {
        "seed": seed, "layers": LAYERS, "dim": DIM, "heads": HEADS, "dropout": DROPOUT,
        "batch": BATCH, "tokens": TOKENS, "segments": segments,
    }  # fmt: skip


@functools.cache
def bounds() -> dict[str, Any]:
    """Plain backpropagation's bytes and the reference checkpointing's peak at every segment count."""
    driver = load_public(__file__, "driver")
    solution = load_public(__file__, "solution")
    plain = driver.reference(_inputs(1, 1), measure=True)
    peaks = {k: driver.run(solution.checkpointed_forward, _inputs(1, k), k)["peak_bytes"] for k in SEGMENTS}
    return {"plain_kept": plain["kept_bytes"], "plain_peak": plain["peak_bytes"], "peaks": peaks}


def cases(world_size: int, gen: torch.Generator) -> list[Case]:
    driver = load_public(__file__, "driver")
    seed = int(torch.randint(0, 2**31 - 1, (1,), generator=gen))
    plain = driver.reference(_inputs(seed, 1))
    expected = {"output": plain["output"], "grads": plain["grads"]}
    return [
        Case(
            check="output",
            fn="checkpointed_forward",
            driver="checkpointing",
            label=f"{LAYERS} blocks in {k} segments of {LAYERS // k}",
            inputs=[_inputs(seed, k)],
            expected=[expected],
            parts={"output": ["output"], "gradients": ["grads"]},
            tolerance={"output": TOLERANCE, "grads": TOLERANCE},
        )
        for k in SEGMENTS
    ]


def _runs(facts: Facts) -> list[tuple[int, dict[str, Any] | None, str | None]]:
    """(segments, the result tree or None, why there is none) for every case."""
    out: list[tuple[int, dict[str, Any] | None, str | None]] = []
    for g in facts.groups:
        for i, case in enumerate(g.cases):
            k = int(case.inputs[0]["segments"])
            tree = result(g, i, 0)
            if isinstance(tree, dict):
                out.append((k, tree, None))
            else:
                out.append((k, None, case_failure(g, i, 0) or "no result"))
    return out


def _kib(n: float) -> str:
    return f"{n / 1024:,.1f} KiB"


def output(facts: Facts) -> Outcome:
    hint = (
        " The stack's output must be exactly what running the blocks one after the other gives, with the same"
        " dropout masks: run every block once, in order, and do not draw random numbers of your own."
    )
    return training.judge(facts, "output", hint, success="the plain forward's output")


def _gradient_hint(g: Any, i: int, case: Case, rank: int) -> str:
    tree = result(g, i, rank)
    if not isinstance(tree, dict) or not isinstance(tree.get("grads"), dict):
        return ""
    grads, want = tree["grads"], case.expected[rank]["grads"]
    missing = [
        n for n, t in grads.items() if isinstance(t, torch.Tensor) and not t.any() and n in want and bool(want[n].any())
    ]
    right_output = case_failure(g, i, rank, part="output") is None
    if missing:
        return (
            f" {len(missing)} of {len(want)} gradients are still all zero (for example {missing[0]!r}):"
            " no gradient arrived there: the graph is cut"
            " between segments. Do not detach a segment's input (or give it requires_grad anew): pass the tensor"
            " itself to the checkpoint, so the gradient flows back into the previous segment."
        )
    if right_output:
        return (
            " The output was right, so the recomputation in backward differed from the forward: the blocks use"
            " dropout, and a recomputation must draw the same masks. Save the random state before each segment's"
            " forward and restore it for the recomputation (torch.utils.checkpoint does this by default;"
            " preserve_rng_state=False turns it off)."
        )
    return " Fix the output first (see that check): the gradients follow from it."


def gradients(facts: Facts) -> Outcome:
    return training.judge(facts, "gradients", _gradient_hint, success="plain backpropagation's gradients")


def _expected_recompute(k: int) -> tuple[list[int], list[int]]:
    """Every segment recomputed, last first; and the same without the last segment (checkpoint_sequential)."""
    size = LAYERS // k
    order = [b for s in reversed(range(k)) for b in range(s * size, (s + 1) * size)]
    return order, order[size:]


def _runs_of(calls: list[int]) -> list[list[int]]:
    """The recomputed blocks cut into runs of consecutive blocks (the segments as they were recomputed)."""
    runs: list[list[int]] = []
    for b in calls:
        if runs and b == runs[-1][-1] + 1:
            runs[-1].append(b)
        else:
            runs.append([b])
    return runs


def _show(runs: list[list[int]]) -> str:
    return ", ".join(f"[{r[0]}]" if len(r) == 1 else f"[{r[0]}-{r[-1]}]" for r in runs) or "none"


def _forward_problem(tree: dict[str, Any]) -> str | None:
    calls = tree.get("forward_calls")
    if not isinstance(calls, torch.Tensor) or calls.tolist() != list(range(LAYERS)):
        got = calls.tolist() if isinstance(calls, torch.Tensor) else calls
        return (
            f"in the forward the blocks ran as {got}, not once each in order (0 to {LAYERS - 1}): run every block"
            " exactly once in the forward pass"
        )
    return None


def recompute(facts: Facts) -> Outcome:
    problems: list[str] = []
    good = total = 0
    data: dict[str, Any] = {}
    for k, tree, why in _runs(facts):
        total += 1
        if tree is None:
            problems.append(f"{k} segments: the run did not finish ({why})")
            continue
        calls = tree.get("recompute_calls")
        got = calls.tolist() if isinstance(calls, torch.Tensor) else []
        full, sequential = _expected_recompute(k)
        size = LAYERS // k
        data[f"segments_{k}"] = {"forward": LAYERS, "recomputed": len(got), "segments_recomputed": _show(_runs_of(got))}
        problem = _forward_problem(tree)
        if problem is None and got not in (full, sequential):
            runs = _runs_of(got)
            if not got:
                problem = (
                    "no block was recomputed during backward, so nothing was checkpointed: every activation was"
                    " kept, as in plain backpropagation"
                )
            else:
                problem = (
                    f"the backward recomputed the blocks as {_show(runs)}, but {k} segments of"
                    f" {size} blocks are recomputed as {_show(_runs_of(full))}, last segment first"
                )
                if len(got) > LAYERS:
                    problem += f"; {len(got)} block recomputations is more than one extra forward ({LAYERS})"
                elif all(len(r) == 1 for r in runs) and len(runs) == LAYERS:
                    problem += ": you checkpointed every block on its own, whatever the segment count"
                elif len(runs) == size and all(len(r) == k for r in runs):
                    problem += f": that is {size} segments of {k}; `segments` is the number of segments"
                elif len(got) < len(full) and set(got) < set(full):
                    problem += (
                        ": the other segments were never recomputed, because no gradient reached them (is the"
                        " graph cut between segments?)"
                    )
        if problem is None:
            good += 1
        else:
            problems.append(f"{k} segments: {problem}")
    if not total:
        return Outcome(False, "no cases were run for this check", data, fraction=0.0)
    if problems:
        more = f" ({len(problems) - 1} more segment counts wrong too)" if len(problems) > 1 else ""
        return Outcome(False, problems[0] + "." + more, data, fraction=good / total)
    extra = max(d["recomputed"] for d in data.values())
    return Outcome(
        True,
        f"every block ran once in the forward and was recomputed at most once in backward, segment by segment:"
        f" {LAYERS} block forwards plain, at most {LAYERS + extra} yours (one extra forward, about a third more"
        " compute per training step, a backward costing about two forwards)",
        data,
        fraction=1.0,
    )


def memory(facts: Facts) -> Outcome:
    ref = bounds()
    plain = ref["plain_peak"]
    problems: list[str] = []
    good = total = 0
    series: dict[str, list[list[float]]] = {"peak": [], "kept": []}
    figures: dict[str, Any] = {"plain_peak_bytes": plain, "plain_kept_bytes": ref["plain_kept"]}
    for k, tree, why in _runs(facts):
        total += 1
        bound = ALLOWANCE * ref["peaks"][k]
        if tree is None:
            problems.append(f"{k} segments: the run did not finish ({why})")
            continue
        peak, kept = tree.get("peak_bytes"), tree.get("kept_bytes")
        if not isinstance(peak, int) or not isinstance(kept, int):
            problems.append(f"{k} segments: the driver's measurement is missing: leave torch and the driver unchanged")
            continue
        series["peak"].append([k, round(peak / 1024, 1)])
        series["kept"].append([k, round(kept / 1024, 1)])
        figures[f"segments_{k}"] = {"peak_bytes": peak, "kept_bytes": kept, "bound_bytes": round(bound)}
        forward = _forward_problem(tree)
        where = f"{k} segments: peak {_kib(peak)} ({peak / plain:.2f} of plain's {_kib(plain)})"
        if forward:
            problems.append(f"{k} segments: a figure counts only for a stack that ran: {forward}")
        elif peak > bound:
            advice = (
                " Nothing was saved: run each segment under torch.utils.checkpoint.checkpoint (or your own"
                " autograd Function that saves only the segment's input and recomputes the segment in backward)."
                if peak >= 0.9 * plain
                else f" Checkpointing {k} segments keeps about {k} block inputs ({_kib(k * INPUT_BYTES)}) through the"
                f" forward and then holds one segment of {LAYERS // k} blocks at a time; you kept {_kib(kept)} at the"
                " end of the forward. Keep only each segment's input, and recompute one segment at a time."
            )
            problems.append(f"{where}, above the {_kib(bound)} allowed.{advice}")
        else:
            good += 1
    chart = {
        "title": f"Live bytes during forward and backward of {LAYERS} blocks, by segment count",
        "x_label": "segments k",
        "y_label": "KiB",
        "series": [
            {"name": "plain backprop, peak", "points": [[k, round(plain / 1024, 1)] for k in SEGMENTS]},
            {"name": "yours, peak", "points": series["peak"]},
            {"name": "yours, kept after the forward", "points": series["kept"]},
            {"name": "allowed peak", "points": [[k, round(ALLOWANCE * ref["peaks"][k] / 1024, 1)] for k in SEGMENTS]},
        ],
    }
    data = {"figures": figures, "chart": chart}
    if not total:
        return Outcome(False, "no cases were run for this check", data, fraction=0.0)
    if problems:
        more = f" ({len(problems) - 1} more segment counts over too)" if len(problems) > 1 else ""
        return Outcome(False, problems[0] + more, data, fraction=good / total)
    shown = "; ".join(
        f"k={k}: {_kib(figures[f'segments_{k}']['peak_bytes'])} ({figures[f'segments_{k}']['peak_bytes'] / plain:.2f})"
        for k in SEGMENTS
        if f"segments_{k}" in figures
    )
    return Outcome(
        True,
        f"peak live bytes, plain backpropagation {_kib(plain)}; yours {shown}, against 1/sqrt({LAYERS}) ="
        f" {1 / math.sqrt(LAYERS):.2f} (chart below)",
        data,
        fraction=1.0,
    )


RULES = {"output": output, "gradients": gradients, "memory": memory, "recompute": recompute}
