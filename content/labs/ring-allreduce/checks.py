"""Trusted checks for ring-allreduce: inputs, expected sums and the wire-volume rules.

Never mounted into the sandbox and never shown to students.
"""

from __future__ import annotations

from typing import Any

import torch

from labs.authoring import Case, Facts, Outcome, case_failure, no_builtin_collectives

SHAPES = [
    (torch.float32, (7,)),
    (torch.float32, (4, 3)),
    (torch.float64, (5,)),
    (torch.int64, (9,)),
    (torch.int64, (2, 3, 2)),
]
MEASURED = 1 << 18  # float32 elements: a 1 MiB tensor
HEADER_ALLOWANCE = 256  # bytes of framing per message, more than gloo uses
STRAY_ALLOWANCE = 1024  # bytes a rank may send to a peer other than rank + 1


def _tensor(shape: tuple[int, ...], dtype: torch.dtype, gen: torch.Generator) -> torch.Tensor:
    if dtype.is_floating_point:
        return torch.randn(shape, generator=gen, dtype=dtype)
    return torch.randint(-1000, 1000, shape, generator=gen, dtype=dtype)


def cases(world_size: int, gen: torch.Generator) -> list[Case]:
    n = world_size
    out = []
    for dtype, shape in [*SHAPES, (torch.float32, (MEASURED,))]:
        xs = [_tensor(shape, dtype, gen) for _ in range(n)]
        total = torch.stack(xs).sum(dim=0)
        label = f"ring_all_reduce({str(dtype).removeprefix('torch.')} tensor of shape {shape})"
        out.append(
            Case("ring-all-reduce", "ring_all_reduce", label, xs, [total] * n, True, measure=shape == (MEASURED,))
        )
    return out


def _measured(facts: Facts) -> list[tuple[Any, int, Case, dict[str, Any] | None, str | None]]:
    """(group, case index, case, wire report, why its bytes cannot count) per measured call.

    Bytes count only for a call whose sums are right on every rank: a ring's worth of bytes that
    did not produce the sum (zeros sent around, a ring that skips its all-gather) proves nothing.
    """
    out = []
    for g in facts.groups:
        for i, case in enumerate(g.cases):
            if case.measure:
                why = next((f"rank {r}: {w}" for r in range(g.world_size) if (w := _did_not_run(g, i, r))), None)
                if why is None and any(case_failure(g, i, r) for r in range(g.world_size)):
                    why = WRONG_SUMS
                out.append((g, i, case, g.wire.get(i), why))
    return out


WRONG_SUMS = "wrong sums"


def _not_counted(n: int) -> str:
    return (
        f"world size {n}: the bytes look right, but the measured call's sums are wrong (see the ring-all-reduce"
        " check), and bytes count only for a call that sums right: fix the sums first"
    )


def _did_not_run(g: Any, i: int, r: int) -> str | None:
    """Why rank r has no result for call i (an error, a crash), or None if it returned one."""
    failure = case_failure(g, i, r)
    if failure is None or i in g.ranks[r].results:
        return None
    return failure


def communication_volume(facts: Facts) -> Outcome:
    data: dict[str, Any] = {}
    problems = []
    for g, _, case, wire, why in _measured(facts):
        n = g.world_size
        size = case.expected[0].numel() * case.expected[0].element_size()
        theory = 2 * (n - 1) * size / n
        bound = theory + 2 * (n - 1) * (HEADER_ALLOWANCE + case.expected[0].element_size())
        if (why and why != WRONG_SUMS) or wire is None:
            problems.append(f"world size {n}: the measured call did not finish ({why or 'not run'})")
            continue
        before = len(problems)
        sent = [sum(wire["sent"].get(str(r), {}).values()) for r in range(n)]
        floor = (n - 1) * size / n  # even a reduce-scatter alone sends this much: below it, nothing was reduced
        data[f"world_size_{n}"] = {
            "tensor_bytes": size,
            "theoretical_bytes_per_rank": round(theory),
            "measured_bytes_per_rank": sent,
            "ratio_to_theory": [round(s / theory, 4) for s in sent],
            "loopback_bytes": wire["loopback_bytes"],
        }
        under = [(r, s) for r, s in enumerate(sent) if s < 0.95 * floor]
        if under:
            r, s = under[0]
            problems.append(
                f"world size {n}: rank {r} sent only {s} bytes, less than (N-1)/N x {size} = {round(floor)}:"
                " every rank must send its chunks around the ring"
            )
        over = [(r, s) for r, s in enumerate(sent) if s > bound]
        if over:
            r, s = over[0]
            problems.append(
                f"world size {n}: rank {r} sent {s} bytes, more than 2(N-1)/N x {size} = "
                f"{round(theory)} (+{round(bound - theory)} allowed for headers)"
            )
        # Loopback counts every byte once, headers too: far more than the sockets account for means
        # traffic on connections that were closed to hide it.
        if wire["loopback_bytes"] > 1.25 * sum(sent) + 65536:
            problems.append(
                f"world size {n}: {wire['loopback_bytes']} bytes crossed the loopback, but the ranks'"
                f" open connections account for only {sum(sent)}"
            )
        if why == WRONG_SUMS and len(problems) == before:
            problems.append(_not_counted(n))
    if problems:
        return Outcome(False, "; ".join(problems), data)
    if not data:
        return Outcome(False, "no measured call was run", data)
    return Outcome(True, "every rank sent within 2(N-1)/N of the tensor size", data)


def ring_neighbours(facts: Facts) -> Outcome:
    problems = []
    data: dict[str, Any] = {}
    for g, _, _, wire, why in _measured(facts):
        n = g.world_size
        if (why and why != WRONG_SUMS) or wire is None:
            problems.append(f"world size {n}: the measured call did not finish ({why or 'not run'})")
            continue
        before = len(problems)
        data[f"world_size_{n}"] = wire["sent"]
        for r in range(n):
            peers = wire["sent"].get(str(r), {})
            stray = {p: b for p, b in peers.items() if p != str((r + 1) % n) and b > STRAY_ALLOWANCE}
            if stray:
                p, b = next(iter(stray.items()))
                problems.append(
                    f"world size {n}: rank {r} sent {b} bytes to rank {p}; it may send only to rank {(r + 1) % n}"
                )
            elif not peers.get(str((r + 1) % n)):
                problems.append(f"world size {n}: rank {r} sent nothing to rank {(r + 1) % n}")
        if why == WRONG_SUMS and len(problems) == before:
            problems.append(_not_counted(n))
    if problems:
        return Outcome(False, "; ".join(problems[:4]), data)
    if not data:
        return Outcome(False, "no measured call was run", data)
    return Outcome(True, "every rank sent only to rank + 1", data)


RULES = {
    "ring-neighbours": ring_neighbours,
    "communication-volume": communication_volume,
    "no-builtin-collectives": no_builtin_collectives,
}
