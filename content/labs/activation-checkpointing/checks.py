"""Trusted checks for activation-checkpointing: per-submission inputs, plain backpropagation, the rules.

Never mounted into the sandbox. The values are judged against plain backpropagation
(``driver.reference``) run here, outside the sandbox, on this lab's own copy of the public
driver. The memory is what the kernel measured outside the rank: its memory high-water
(``memory_peak``) in a phase that runs one larger stack alone, per memory segment count. Its
bound is the peak of live tensor bytes that this lab's reference checkpointing (``solution.py``,
one ``torch.utils.checkpoint`` per segment) reaches on that stack, counted here with the
driver's ``LiveBytes``, times an allowance, plus what a rank's Python and torch add: bytes depend
on the shapes only, never on the seed, so they are counted once per shape and kept.
"""

from __future__ import annotations

import functools
from typing import Any

import torch

from labs.authoring import Case, Facts, Outcome, Phase, case_failure, later, load_public, result, tallies, training

LAYERS, DIM, HEADS, BATCH, TOKENS, DROPOUT = 12, 32, 2, 2, 16, 0.1
SEGMENTS = (2, 3, 4, 6)  # every one divides the 12 blocks; 3 and 4 are the nearest to sqrt(12)
TOLERANCE = (1e-9, 1e-11)  # float64; another order of the same sums differs by ~1e-16
# The memory cases: the same 12 blocks, narrow (4 heads of 4 dimensions) over long sequences, so that
# the attention probabilities (batch x heads x tokens^2 per block) dominate the bytes, not the compute.
MEMORY = {"dim": 16, "heads": 4, "batch": 2, "tokens": 128}
MEMORY_SEGMENTS = (6,)  # the memory cases; the small stack runs the other segment counts
VALUES_SEGMENTS = tuple(k for k in SEGMENTS if k not in MEMORY_SEGMENTS)
ALLOWANCE = 1.15  # live bytes up to 15% above the reference checkpointing's pass
OVERHEAD = 16 << 20  # what a rank's Python and torch add to its memory as they run (measured: about 11 MiB)
mib = tallies.mib


SMALL = {"dim": DIM, "heads": HEADS, "batch": BATCH, "tokens": TOKENS}  # the values cases


def _inputs(seed: int, segments: int, dims: dict[str, int] = SMALL) -> dict[str, Any]:
    return {"seed": seed, "layers": LAYERS, "dropout": DROPOUT, **dims, "segments": segments}


def input_bytes(dims: dict[str, int]) -> int:
    """One block input (float64)."""
    return dims["batch"] * dims["tokens"] * dims["dim"] * 8


@functools.cache
def bounds() -> dict[str, Any]:
    """On the memory cases' stack: plain backpropagation's live bytes, the reference checkpointing's
    peak of live bytes at every memory segment count, and the memory a rank may add for it."""
    driver = load_public(__file__, "driver")
    solution = load_public(__file__, "solution")
    plain = driver.reference(_inputs(1, 1, MEMORY), measure=True)
    peaks = {k: driver.run(solution.checkpointed_forward, _inputs(1, k, MEMORY), k)["peak_bytes"] for k in SEGMENTS}
    allowed = {k: OVERHEAD + round(ALLOWANCE * peak) for k, peak in peaks.items()}
    return {"plain_kept": plain["kept_bytes"], "plain_peak": plain["peak_bytes"], "peaks": peaks, "allowed": allowed}


def _expected(inputs: dict[str, Any]) -> dict[str, Any]:
    """Plain backpropagation through the whole stack: the output and the gradients every case must match."""
    plain = load_public(__file__, "driver").reference(inputs)
    return {"output": plain["output"], "grads": plain["grads"]}


def _case(seed: int, k: int, expected: Any, dims: dict[str, int], check: str) -> Case:
    parts = {"output": ["output"], "gradients": ["grads"]}
    if check == "memory":  # a memory case's values are judged too, and its memory counts only if they are right
        parts["memory"] = ["output", "grads"]
    return Case(
        check=check,
        fn="checkpointed_forward",
        driver="checkpointing",
        label=(
            f"{LAYERS} blocks in {k} segments of {LAYERS // k}, dim {dims['dim']}, {dims['heads']} heads,"
            f" {dims['batch']} x {dims['tokens']} tokens"
        ),
        inputs=[{**_inputs(seed, k, dims), "memory": check == "memory"}],
        expected=[expected],
        parts=parts,
        tolerance={"output": TOLERANCE, "grads": TOLERANCE},
    )


def phases(world_sizes: list[int], gen: torch.Generator) -> list[Phase]:
    """Every segment count on the small stack (values, recomputation), then each memory case alone."""
    n = world_sizes[0]
    seed = int(torch.randint(0, 2**31 - 1, (1,), generator=gen))
    expected = later(_expected, _inputs(seed, 1))
    out = [Phase(None, n, [_case(seed, k, expected, SMALL, "output") for k in VALUES_SEGMENTS])]
    seed = int(torch.randint(0, 2**31 - 1, (1,), generator=gen))
    expected = later(_expected, _inputs(seed, 1, MEMORY))
    for k in MEMORY_SEGMENTS:
        out.append(Phase(f"memory, {k} segments", n, [_case(seed, k, expected, MEMORY, "memory")]))
    return out


def _runs(facts: Facts) -> list[tuple[int, dict[str, Any] | None, str | None]]:
    """(segments, the result tree or None, why there is none) for every case, the memory cases' included."""
    out: list[tuple[int, dict[str, Any] | None, str | None]] = []
    for g in facts.groups:
        for i, case in enumerate(g.cases):
            k = int(case.inputs[0]["segments"])
            tree = result(g, i, 0)
            out.append((k, tree, None) if isinstance(tree, dict) else (k, None, case_failure(g, i, 0) or "no result"))
    return out


_UNIT = "results, one per segment count on one rank,"  # "all 4 results, one per segment count on one rank, equal ..."


def output(facts: Facts) -> Outcome:
    hint = (
        " The stack's output must be exactly what running the blocks one after the other gives, with the same"
        " dropout masks: run every block once, in order, and do not draw random numbers of your own."
    )
    return training.judge(facts, "output", hint, success="the plain forward's output", unit=_UNIT)


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
    return training.judge(facts, "gradients", _gradient_hint, success="plain backpropagation's gradients", unit=_UNIT)


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


def _recompute_problem(k: int, got: list[int]) -> str | None:
    """What is wrong with the blocks recomputed in backward for ``k`` segments, or None."""
    full, sequential = _expected_recompute(k)
    if got in (full, sequential):
        return None
    if not got:
        return (
            "no block was recomputed during backward, so nothing was checkpointed: every activation was kept, as in"
            " plain backpropagation"
        )
    runs, size = _runs_of(got), LAYERS // k
    problem = (
        f"the backward recomputed the blocks as {_show(runs)}, but {k} segments of {size} blocks are recomputed as"
        f" {_show(_runs_of(full))}, last segment first"
    )
    if len(got) > LAYERS:
        return problem + f"; {len(got)} block recomputations is more than one extra forward ({LAYERS})"
    if all(len(r) == 1 for r in runs) and len(runs) == LAYERS:
        return problem + ": you checkpointed every block on its own, whatever the segment count"
    if len(runs) == size and all(len(r) == k for r in runs):
        return problem + f": that is {size} segments of {k}; `segments` is the number of segments"
    if len(got) < len(full) and set(got) < set(full):
        return problem + (
            ": the other segments were never recomputed, because no gradient reached them (is the graph cut between"
            " segments?)"
        )
    return problem


def recompute(facts: Facts) -> Outcome:
    tally = tallies.Tally(unit="segment count")
    data: dict[str, Any] = {}
    for k, tree, why in _runs(facts):
        if tree is None:
            tally.add(f"{k} segments: the run did not finish ({why})")
            continue
        calls = tree.get("recompute_calls")
        got = calls.tolist() if isinstance(calls, torch.Tensor) else []
        data[f"segments_{k}"] = {"forward": LAYERS, "recomputed": len(got), "segments_recomputed": _show(_runs_of(got))}
        problem = _forward_problem(tree) or _recompute_problem(k, got)
        tally.add(problem and f"{k} segments: {problem}")
    extra = max((d["recomputed"] for d in data.values()), default=0)
    success = (
        f"every block ran once in the forward and was recomputed at most once in backward, segment by segment:"
        f" {LAYERS} block forwards plain, at most {LAYERS + extra} yours (one extra forward, about a third more"
        " compute per training step, a backward costing about two forwards)"
    )
    return tally.outcome(success, data)


def _over(k: int, ref: dict[str, Any], peak: int) -> str:
    """Why a peak of ``peak`` bytes for ``k`` segments is too much, against the reference figures ``ref``."""
    plain, allowed = ref["plain_peak"], ref["allowed"][k]
    advice = (
        " Nothing was saved: run each segment under torch.utils.checkpoint.checkpoint (or your own autograd"
        " Function that saves only the segment's input and recomputes the segment in backward)."
        if peak - OVERHEAD >= 0.8 * plain
        else f" Checkpointing {k} segments keeps {k} segment inputs ({mib(k * input_bytes(MEMORY))}) through the"
        f" forward and then holds the activations of one segment of {LAYERS // k} blocks at a time: keep only each"
        " segment's input, and recompute one segment at a time."
    )
    return (
        f"the process's memory rose by {mib(peak)} (measured by the kernel, outside your code), above the"
        f" {mib(allowed)} allowed ({ALLOWANCE:.2f} x the {mib(ref['peaks'][k])} of tensors a reference checkpointing"
        f" of {k} segments holds at its peak, plus {mib(OVERHEAD)} for Python and torch; plain backpropagation holds"
        f" {mib(plain)}).{advice}"
    )


def memory(facts: Facts) -> Outcome:
    ref = bounds()
    plain = ref["plain_peak"]
    tally = tallies.Tally(unit="segment count")
    measured: list[list[float]] = []
    figures: dict[str, Any] = {"plain_live_peak_bytes": plain, "overhead_bytes": OVERHEAD}
    for g in (g for g in facts.groups if g.phase and g.cases):
        case = g.cases[0]
        k = int(case.inputs[0]["segments"])
        peak, problem = tallies.memory_problem(
            g,
            ref["allowed"][k],
            functools.partial(_over, k, ref),
            functools.partial(case_failure, g, 0, 0, part="memory"),
            "a stack whose output and gradients are right",
        )
        figures[f"segments_{k}"] = {"peak_bytes": peak, "allowed_bytes": ref["allowed"][k]}
        if peak is not None:
            measured.append([k, round(peak / 2**20, 1)])
        tally.add(problem and f"{k} segments, {case.label}: {problem}")
    chart = {
        "title": f"Memory during forward and backward of {LAYERS} blocks, by segment count",
        "x_label": "segments k",
        "y_label": "MiB",
        "series": [
            {"name": "plain backprop, live tensors", "points": [[k, round(plain / 2**20, 1)] for k in SEGMENTS]},
            {
                "name": "reference checkpointing, live tensors",
                "points": [[k, round(ref["peaks"][k] / 2**20, 1)] for k in SEGMENTS],
            },
            {"name": "yours, measured by the kernel", "points": measured},
            {"name": "allowed", "points": [[k, round(ref["allowed"][k] / 2**20, 1)] for k in MEMORY_SEGMENTS]},
        ],
    }
    shown = "; ".join(f"k={k}: {y:,.1f} MiB" for k, y in measured)
    success = (
        f"the memory your stack added, measured by the kernel: {shown}, each within its bound; plain"
        f" backpropagation holds {mib(plain)} of tensors at its peak (chart below)"
    )
    return tally.outcome(success, {"figures": figures, "chart": chart})


RULES = {"output": output, "gradients": gradients, "memory": memory, "recompute": recompute}
