"""Trusted checks for tiled-attention: per-submission inputs, attention computed in full, the rules.

Never mounted into the sandbox. The expected output and logsumexp are ``driver.reference``
(the whole score matrix at once, float64), run here, outside the sandbox, on this lab's own copy
of the public driver. The memory rule reads the peak of live bytes that the driver measured
during the student's call (in the rank, so untrusted: it can only cost points, never earn values).
"""

from __future__ import annotations

from typing import Any

import torch

from labs import training
from labs.judge import Case, Facts, Outcome, case_failure, result
from labs.public import load_public

BATCH, HEADS, N, D = 1, 2, 1024, 16
# (tile size, scale of q and k, check): 24 and 100 do not divide N = 1024; a scale of 20 gives
# scores of several hundred (the largest near 2,000), whose exp overflows float64 past 709.78.
CASES = ((16, 1.0, "output"), (24, 1.0, "output"), (64, 1.0, "output"), (24, 20.0, "large-logits"),
         (100, 20.0, "large-logits"))  # fmt: skip
TOLERANCE = (1e-9, 1e-11)
MATRIX_BYTES = BATCH * HEADS * N * N * 8  # one full N x N float64 score matrix


def _inputs(seed: int, tile: int, scale: float) -> dict[str, Any]:
    return {"seed": seed, "batch": BATCH, "heads": HEADS, "n": N, "d": D, "tile_size": tile, "scale": scale}


def cases(world_size: int, gen: torch.Generator) -> list[Case]:
    driver = load_public(__file__, "driver")
    seeds = {scale: int(torch.randint(0, 2**31 - 1, (1,), generator=gen)) for scale in {s for _, s, _ in CASES}}
    # One draw per scale, computed in full once and shared by that scale's tile sizes.
    expected = {scale: driver.reference(_inputs(seed, 1, scale)) for scale, seed in seeds.items()}
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


def _mib(n: float) -> str:
    return f"{n / 2**20:.2f} MiB"


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
    ragged = _ragged_hint(g, case, rank, "output")
    if ragged:
        return ragged
    if case_failure(g, i, rank, part="logsumexp") is None:
        return (
            " Your logsumexp is right, so the running max and sum are; the running output is not: when the maximum"
            " grows, multiply the accumulated output by the same exp(m_prev - m_new) as the sum."
        )
    return (
        " After each tile: m_new = max(m_prev, rowmax(s)); l_new = l_prev * exp(m_prev - m_new) + rowsum(exp(s -"
        " m_new)); acc_new = acc_prev * exp(m_prev - m_new) + exp(s - m_new) V; at the end out = acc / l."
    )


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
    ragged = _ragged_hint(g, case, rank, "logsumexp")
    if ragged:
        return ragged
    return (
        " lse is log sum_j exp(s_j) over all keys, which is m + log(l) with the final running max m and sum"
        " l = sum_j exp(s_j - m) (natural log)."
    )


def logsumexp(facts: Facts) -> Outcome:
    return training.judge(facts, "logsumexp", _lse_hint, success="logsumexp(q k^T / sqrt(d))")


def memory(facts: Facts) -> Outcome:
    good = total = 0
    problems: list[str] = []
    figures: dict[str, Any] = {"full_matrix_bytes": MATRIX_BYTES}
    for g in facts.groups:
        for i, case in enumerate(g.cases):
            total += 1
            tile = int(case.inputs[0]["tile_size"])
            tree = result(g, i, 0)
            peak = tree.get("peak_bytes") if isinstance(tree, dict) else None
            if not isinstance(peak, int):
                why = case_failure(g, i, 0) or "no measurement"
                problems.append(f"{case.label}: the call did not finish ({why})")
                continue
            figures[f"tile_{tile}_scale_{case.inputs[0]['scale']:g}"] = {"peak_bytes": peak}
            # A peak says something only about a call that computed attention: its out or its lse is right.
            right = case_failure(g, i, 0, part=case.check) is None or case_failure(g, i, 0, part="logsumexp") is None
            if peak >= MATRIX_BYTES:
                problems.append(
                    f"{case.label}: your call held {_mib(peak)} at its peak, at least one full {N} x {N} score"
                    f" matrix per head ({_mib(MATRIX_BYTES)} for {BATCH * HEADS} heads). Compute the scores one"
                    f" key/value tile at a time, (batch, heads, N, {tile}), and keep only the running max, sum"
                    " and output between tiles"
                )
            elif not right:
                problems.append(
                    f"{case.label}: the peak ({_mib(peak)}) counts only for a call that computed attention, and"
                    " neither this out nor this lse is right (see those checks)"
                )
            else:
                good += 1
    data = {"figures": figures}
    if not total:
        return Outcome(False, "no cases were run for this check", data, fraction=0.0)
    if problems:
        more = (
            f" ({len(problems) - 1} more {'case' if len(problems) == 2 else 'cases'} too)" if len(problems) > 1 else ""
        )
        return Outcome(False, problems[0] + "." + more, data, fraction=good / total)
    peaks = [v["peak_bytes"] for k, v in figures.items() if k.startswith("tile_")]
    return Outcome(
        True,
        f"your peak of live bytes stayed between {_mib(min(peaks))} and {_mib(max(peaks))}, below one full score"
        f" matrix ({_mib(MATRIX_BYTES)}; attention computed in full holds about twice that)",
        data,
        fraction=1.0,
    )


RULES = {"output": output, "large-logits": large_logits, "logsumexp": logsumexp, "memory": memory}
