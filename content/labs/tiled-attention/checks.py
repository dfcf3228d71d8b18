"""Trusted checks for tiled-attention: per-submission inputs, attention computed in full, the rules.

Never mounted into the sandbox. The expected output and logsumexp are ``driver.reference``
(the whole score matrix at once, float64), run here, outside the sandbox, on this lab's own copy
of the public driver. The memory rule reads what the kernel measured outside the rank: the
rank's memory high-water (``memory_peak``) in a phase that makes one larger call alone.
"""

from __future__ import annotations

import secrets
from typing import Any

import torch

from labs.authoring import (
    Case,
    Facts,
    Outcome,
    Phase,
    case_failure,
    later,
    load_public,
    off_by,
    result,
    tallies,
    training,
)

BATCH, HEADS, N, D = 1, 2, 1024, 16
# (tile size, scale of q and k, check): 24 and 100 do not divide N = 1024; a scale of 20 gives
# scores of several hundred (the largest near 2,000), whose exp overflows float64 past 709.78.
CASES = ((16, 1.0, "output"), (24, 1.0, "output"), (64, 1.0, "output"), (24, 20.0, "large-logits"),
         (100, 20.0, "large-logits"))  # fmt: skip
TOLERANCE = (1e-9, 1e-11)
# The memory case, alone in a phase: one head of N = 2048 queries and keys, tiles of 64 keys.
MEMORY = {"batch": 1, "heads": 1, "n": 2048, "d": D, "tile_size": 64, "scale": 1.0}
MATRIX_BYTES = int(MEMORY["batch"] * MEMORY["heads"] * MEMORY["n"] ** 2 * 8)  # its full score matrix: 32 MiB
SAMPLED = 64  # queries of the memory case compared with attention computed here, drawn after the run
mib = tallies.mib


def _inputs(seed: int, tile: int, scale: float) -> dict[str, Any]:
    return {"seed": seed, "batch": BATCH, "heads": HEADS, "n": N, "d": D, "tile_size": tile, "scale": scale}


def values_cases(gen: torch.Generator) -> list[Case]:
    driver = load_public(__file__, "driver")
    seeds = {scale: int(torch.randint(0, 2**31 - 1, (1,), generator=gen)) for scale in {s for _, s, _ in CASES}}
    # One draw per scale, computed in full once and shared by that scale's tile sizes.
    expected = {scale: later(driver.reference, _inputs(seed, 1, scale)) for scale, seed in seeds.items()}
    out = []
    for tile, scale, check in CASES:
        big = " (scores of several hundred)" if scale > 1 else ""
        ragged = "" if N % tile == 0 else f", the last tile of {N % tile}"
        out.append(
            Case(
                check=check,
                fn="tiled_attention",
                driver="attention",
                label=f"N = {N}, tiles of {tile}{ragged}{big}",
                inputs=[_inputs(seeds[scale], tile, scale)],
                expected=[expected[scale]],
                parts={check: ["out"], "logsumexp": ["lse"]},
                tolerance={"out": TOLERANCE, "lse": TOLERANCE},
            )
        )
    return out


def memory_case(gen: torch.Generator) -> Case:
    """Its values are compared at queries drawn after the run (``sampled_failure``): no reference in full here."""
    inputs = {"seed": int(torch.randint(0, 2**31 - 1, (1,), generator=gen)), **MEMORY, "memory": True}
    return Case(
        check="memory",
        fn="tiled_attention",
        driver="attention",
        label=f"N = {MEMORY['n']}, {MEMORY['heads']} head, tiles of {MEMORY['tile_size']}",
        inputs=[inputs],
        expected=[{}],
        parts={"memory": []},
    )


def sampled_failure(inputs: dict[str, Any], tree: Any) -> str | None:
    """Why neither ``out`` nor ``lse`` is right at ``SAMPLED`` queries drawn now, or None.

    Each query's output depends on its own row of ``q`` and every key and value: attention for a
    few rows is cheap, and a call cannot know which rows will be compared.
    """
    driver = load_public(__file__, "driver")
    q, k, v = driver.make_qkv(inputs)
    rows = torch.tensor(sorted(secrets.SystemRandom().sample(range(q.shape[-2]), SAMPLED)))
    scores = q[..., rows, :] @ (k.transpose(-2, -1) / q.shape[-1] ** 0.5)
    lse = torch.logsumexp(scores, dim=-1)
    out = torch.exp(scores - lse[..., None]) @ v
    got = tree if isinstance(tree, dict) else {}
    mine = {}
    for key, want in (("out", q), ("lse", lse)):
        t = got.get(key)
        shape = tuple(want.shape) if key == "out" else tuple(q.shape[:-1])
        if not isinstance(t, torch.Tensor) or tuple(t.shape) != shape:
            return f"{key} is not a tensor of shape {shape}"
        mine[key] = t[..., rows, :] if key == "out" else t[..., rows]
    if _close(mine["out"], out) or _close(mine["lse"], lse):
        return None
    i = int(rows[0])
    found = float(mine["lse"].reshape(-1)[0]), float(lse.reshape(-1)[0])
    return f"at query {i}, lse {off_by(*found)}, and out differs too (compared at {SAMPLED} queries)"


def phases(world_sizes: list[int], gen: torch.Generator) -> list[Phase]:
    """The five cases at N = 1024, then the memory case alone: the kernel's high-water covers that call only."""
    n = world_sizes[0]
    return [Phase(None, n, values_cases(gen)), Phase("memory", n, [memory_case(gen)])]


def _attention(inputs: dict[str, Any], scale: float) -> torch.Tensor:
    """Attention with the scores multiplied by ``scale`` (to recognise a wrong scale)."""
    q, k, v = load_public(__file__, "driver").make_qkv(inputs)
    return torch.softmax(q @ k.transpose(-2, -1) * scale, dim=-1) @ v


def _close(got: Any, want: torch.Tensor) -> bool:
    return isinstance(got, torch.Tensor) and got.shape == want.shape and torch.allclose(got, want, *TOLERANCE)


def _ragged_hint(g: Any, case: Case, rank: int, part: str) -> str:
    """Advice when only the tile sizes that do not divide N are wrong, else ''."""
    tile = int(case.inputs[rank]["tile_size"])
    dividing = [j for j, c in enumerate(g.cases) if N % int(c.inputs[0]["tile_size"]) == 0 and c.judges(part)]
    if not N % tile or not dividing or any(case_failure(g, j, rank, part=part) is not None for j in dividing):
        return ""
    return (
        f" The tile sizes that divide N were right, this one ({tile}) is not: the last tile has only {N % tile}"
        " keys. Loop start = 0, T, 2T, ... while start < N, and slice k[..., start:start + T, :] (Python slicing"
        " stops at N by itself)."
    )


def _output_hint(g: Any, i: int, case: Case, rank: int) -> str:
    tree = result(g, i, rank)
    got = tree.get("out") if isinstance(tree, dict) else None
    if not isinstance(got, torch.Tensor):
        return " Return a tuple (out, lse): out of the shape of q, lse of shape (batch, heads, N)."
    inputs = case.inputs[rank]
    if not torch.isfinite(got).all():
        return (
            " Some outputs are inf or nan: exp of a large score overflowed (exp(710) is inf in float64). Subtract"
            " the running maximum before exponentiating: exp(s - m_new), never exp(s)."
        )
    if _close(got, _attention(inputs, 1 / D)) or _close(got, _attention(inputs, 1.0)):
        return f" That is attention with the wrong scale: the scores are q k^T / sqrt(d), here / sqrt({D}) = / 4."
    recurrence = (
        " Your logsumexp is right, so the running max and sum are; the running output is not: when the maximum"
        " grows, multiply the accumulated output by the same exp(m_prev - m_new) as the sum."
        if case_failure(g, i, rank, part="logsumexp") is None
        else " After each tile: m_new = max(m_prev, rowmax(s)); l_new = l_prev * exp(m_prev - m_new) + rowsum(exp(s"
        " - m_new)); acc_new = acc_prev * exp(m_prev - m_new) + exp(s - m_new) V; at the end out = acc / l."
    )
    return _ragged_hint(g, case, rank, "output") or recurrence


def output(facts: Facts) -> Outcome:
    return training.judge(facts, "output", _output_hint, success="softmax(q k^T / sqrt(d)) v")


def large_logits(facts: Facts) -> Outcome:
    return training.judge(facts, "large-logits", _output_hint, success="softmax(q k^T / sqrt(d)) v")


def _lse_hint(g: Any, i: int, case: Case, rank: int) -> str:
    tree = result(g, i, rank)
    got = tree.get("lse") if isinstance(tree, dict) else None
    want = case.expected[rank]["lse"]
    if not isinstance(got, torch.Tensor) or got.shape != want.shape:
        shape = tuple(got.shape) if isinstance(got, torch.Tensor) else type(got).__name__
        return f" lse must have shape {tuple(want.shape)} (one number per query), not {shape}."
    if not torch.isfinite(got).all():
        return " Some are inf: exp overflowed. lse = m + log(l), with l summed as exp(s - m), never exp(s)."
    return _ragged_hint(g, case, rank, "logsumexp") or (
        " lse is log sum_j exp(s_j) over all keys, which is m + log(l) with the final running max m and sum"
        " l = sum_j exp(s_j - m) (natural log)."
    )


def logsumexp(facts: Facts) -> Outcome:
    return training.judge(facts, "logsumexp", _lse_hint, success="logsumexp(q k^T / sqrt(d))")


def memory(facts: Facts) -> Outcome:
    groups = [g for g in facts.groups if g.phase == "memory" and g.cases]
    if not groups:
        return Outcome(False, "no cases were run for this check", fraction=0.0)
    g, case = groups[0], groups[0].cases[0]
    n, tile = int(case.inputs[0]["n"]), int(case.inputs[0]["tile_size"])

    def over(peak: int) -> str:
        return (
            f"the process's memory rose by {mib(peak)} during your call (measured by the kernel, outside your code),"
            f" at least one full {n} x {n} score matrix ({mib(MATRIX_BYTES)}). Compute the scores one key/value tile"
            f" at a time, (batch, heads, {n}, {tile}), and keep only the running max, sum and output between tiles"
        )

    def wrong() -> str | None:
        tree = result(g, 0, 0)
        return case_failure(g, 0, 0) if tree is None else sampled_failure(case.inputs[0], tree)

    peak, problem = tallies.memory_problem(g, MATRIX_BYTES - 1, over, wrong, "a call that computed attention right")
    data = {"peak_bytes": peak, "full_matrix_bytes": MATRIX_BYTES}
    if problem or peak is None:
        return Outcome(False, f"In the memory case ({case.label}), {problem}.", data, fraction=0.0)
    return Outcome(
        True,
        f"the process's memory rose by {mib(peak)} during your call with N = {n}, measured by the kernel: below"
        f" one full score matrix ({mib(MATRIX_BYTES)}; attention computed in full holds about twice that)",
        data,
        fraction=1.0,
    )


RULES = {"output": output, "large-logits": large_logits, "logsumexp": logsumexp, "memory": memory}
