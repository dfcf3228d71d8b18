"""Trusted checks for tree-broadcast: the calls each rank makes, the expected results, and the tree rule.

Runs on the grading worker, outside the sandbox; never shown to students. The grader calls
``cases(world_size, gen)`` for each world size: every ``Case`` is one call on every rank with that
rank's ``inputs[r]``, made by ``driver.run``; what it returns is compared with ``expected[r]``.
A check with no entry in ``RULES`` is judged by those comparisons; a rule judges what the grader
observed from outside the ranks (here: the bytes each rank sent and received, counted by the kernel).
"""

from __future__ import annotations

import math

import torch

from labs.authoring import Case, Facts, Outcome, case_failure, no_builtin_collectives

SHAPES = [(torch.float32, (7,)), (torch.float64, (4, 3)), (torch.int64, (2, 3, 2))]
MEASURED = (torch.float32, (1 << 16,))  # 256 KiB, broadcast from the last rank: its bytes are judged by `tree`
HEADERS = 4 << 10  # bytes a rank may send beyond the payload per message: framing, connection set-up


def _tensor(dtype: torch.dtype, shape: tuple[int, ...], gen: torch.Generator) -> torch.Tensor:
    if dtype.is_floating_point:
        return torch.randn(shape, generator=gen, dtype=dtype)
    return torch.randint(-1000, 1000, shape, generator=gen, dtype=dtype)


def cases(world_size: int, gen: torch.Generator) -> list[Case]:
    """Each shape from rank 0, from the last rank and from one in between; the measured call from the last."""
    n = world_size
    calls = [(dtype, shape, src) for dtype, shape in SHAPES for src in sorted({0, n // 2, n - 1})]
    calls.append((*MEASURED, n - 1))
    out = []
    for dtype, shape, src in calls:
        x = _tensor(dtype, shape, gen)
        inputs = [{"tensor": x if r == src else torch.zeros_like(x), "src": src} for r in range(n)]
        label = f"tree_broadcast({str(dtype).removeprefix('torch.')} tensor of shape {shape}, src={src})"
        measure = (dtype, shape) == MEASURED
        expected = [{"tensor": x} for _ in range(n)]
        out.append(Case("broadcast", "tree_broadcast", label, inputs, expected, driver="run", measure=measure))
    return out


def tree(facts: Facts) -> Outcome:
    """No rank sent more than ⌈log2 N⌉ copies of the measured tensor; each rank but the source received one.

    The bytes count only for a measured call that broadcast right on every rank: sending nothing is
    cheap too, and proves nothing.
    """
    problems, wrong = [], []
    for group in facts.groups:
        n = group.world_size
        for i, case in enumerate(group.cases):
            if not case.measure:
                continue
            wire = group.wire.get(i)
            if wire is None or any(case_failure(group, i, r) for r in range(n)):
                wrong.append(n)
                continue
            size = case.expected[0]["tensor"].numel() * case.expected[0]["tensor"].element_size()
            src, rounds = case.inputs[0]["src"], math.ceil(math.log2(n))
            sent = {r: {int(p): b for p, b in wire["sent"].get(str(r), {}).items() if p.isdigit()} for r in range(n)}
            for r in range(n):
                copies = sum(sent[r].values()) / size
                if copies > rounds + 0.05 + HEADERS * rounds / size:
                    problems.append(
                        f"world size {n}: rank {r} sent {copies:.1f} copies of the tensor, more than the ⌈log₂ {n}⌉ ="
                        f" {rounds} a binomial tree needs"
                        + (": sending from the source to each rank in turn costs it N − 1" if r == src else "")
                    )
                received = sum(s.get(r, 0) for s in sent.values()) / size
                if r != src and not 0.95 <= received <= 1.05 + HEADERS / size:
                    problems.append(f"world size {n}: rank {r} received {received:.1f} copies; a tree delivers it one")
    if wrong:
        sizes = ", ".join(map(str, wrong))
        problems.append(
            f"world size {sizes}: the measured call did not broadcast right on every rank, and its bytes count only"
            " for a right broadcast: fix the broadcast check first"
        )
    if problems:
        return Outcome(False, "; ".join(problems[:4]))
    return Outcome(True, "no rank sent more than ⌈log₂ N⌉ copies, and each rank received one")


RULES = {"tree": tree, "no-builtin-collectives": no_builtin_collectives}
