"""Trusted checks for ring-allreduce: inputs, expected sums and the wire-volume rules.

Never mounted into the sandbox and never shown to students.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from labs.authoring import Case, Facts, Outcome, case_failure, no_builtin_collectives, rules, wire

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
# What is wrong with one measured call's bytes, as problems (world size, case, its wire counts, data to fill in).
Verdict = Callable[[int, Case, dict[str, Any], dict[str, Any]], list[str]]


def cases(world_size: int, gen: torch.Generator) -> list[Case]:
    out = []
    for dtype, shape in [*SHAPES, (torch.float32, (MEASURED,))]:
        xs = rules.random_tensors(world_size, shape, dtype, gen)
        label = rules.tensor_call("ring_all_reduce", dtype, shape)
        total = [torch.stack(xs).sum(dim=0)] * world_size
        out.append(Case("ring-all-reduce", "ring_all_reduce", label, xs, total, True, measure=shape == (MEASURED,)))
    return out


def _judge(facts: Facts, verdict: Verdict, success: str, shown: int | None = None) -> Outcome:
    """The first ``shown`` problems ``verdict`` finds with each measured call's bytes (all or nothing).

    Bytes count only for a call whose sums are right on every rank: a ring's worth of bytes that
    did not produce the sum (zeros sent around, a ring that skips its all-gather) proves nothing.
    """
    data: dict[str, Any] = {}
    problems: list[str] = []
    for g in facts.groups:
        for i, case in enumerate(g.cases):
            if not case.measure:
                continue
            n, counts = g.world_size, g.wire.get(i)
            # A rank with no result for the call (an error, a crash): the call did not finish.
            lost = [f"rank {r}: {w}" for r in range(n) if i not in g.ranks[r].results and (w := case_failure(g, i, r))]
            if lost or counts is None:
                problems.append(f"world size {n}: the measured call did not finish ({lost[0] if lost else 'not run'})")
            elif found := verdict(n, case, counts, data):
                problems += found
            elif any(case_failure(g, i, r) for r in range(n)):
                problems.append(
                    f"world size {n}: the bytes look right, but the measured call's sums are wrong (see the"
                    " ring-all-reduce check), and bytes count only for a call that sums right: fix the sums first"
                )
    if problems:
        return Outcome(False, "; ".join(problems[:shown]), data)
    if not data:
        return Outcome(False, "no measured call was run", data)
    return Outcome(True, success, data)


def _volume(n: int, case: Case, counts: dict[str, Any], data: dict[str, Any]) -> list[str]:
    element = case.expected[0].element_size()
    size = case.expected[0].numel() * element
    sent = wire.sent(counts, n)
    # At most one all-reduce, 2(N-1)/N of the tensor, with headers on each of its 2(N-1) messages.
    budget = rules.one_all_reduce(n, size, sent, 0.0, 2 * (n - 1) * (HEADER_ALLOWANCE + element))
    data[f"world_size_{n}"] = {**budget["shown"], "loopback_bytes": counts["loopback_bytes"]}
    floor = (n - 1) * size / n  # even a reduce-scatter alone sends this much: below it, nothing was reduced
    problems = []
    if under := [(r, s) for r, s in enumerate(sent) if s < 0.95 * floor]:
        problems.append(
            f"world size {n}: rank {under[0][0]} sent only {under[0][1]} bytes, less than (N-1)/N x {size} ="
            f" {round(floor)}: every rank must send its chunks around the ring"
        )
    if over := [(r, s) for r, s in enumerate(sent) if s > budget["high"]]:
        problems.append(
            f"world size {n}: rank {over[0][0]} sent {over[0][1]} bytes, more than 2(N-1)/N x {size} ="
            f" {round(budget['theory'])} (+{round(budget['high'] - budget['theory'])} allowed for headers)"
        )
    # Loopback counts every byte once, headers too: far more than the sockets account for means
    # traffic on connections that were closed to hide it.
    if counts["loopback_bytes"] > 1.25 * sum(sent) + 65536:
        problems.append(
            f"world size {n}: {counts['loopback_bytes']} bytes crossed the loopback, but the ranks'"
            f" open connections account for only {sum(sent)}"
        )
    return problems


def communication_volume(facts: Facts) -> Outcome:
    return _judge(facts, _volume, "every rank sent within 2(N-1)/N of the tensor size")


def _neighbours(n: int, case: Case, counts: dict[str, Any], data: dict[str, Any]) -> list[str]:
    data[f"world_size_{n}"] = counts["sent"]
    problems = []
    for r in range(n):
        right, peers = str((r + 1) % n), counts["sent"].get(str(r), {})
        if stray := [(p, b) for p, b in peers.items() if p != right and b > STRAY_ALLOWANCE]:
            p, b = stray[0]
            problems.append(f"world size {n}: rank {r} sent {b} bytes to rank {p}; it may send only to rank {right}")
        elif not peers.get(right):
            problems.append(f"world size {n}: rank {r} sent nothing to rank {right}")
    return problems


def ring_neighbours(facts: Facts) -> Outcome:
    return _judge(facts, _neighbours, "every rank sent only to rank + 1", shown=4)


RULES = {
    "ring-neighbours": ring_neighbours,
    "communication-volume": communication_volume,
    "no-builtin-collectives": no_builtin_collectives,
}
