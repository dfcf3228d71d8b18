"""Trusted checks for collectives-p2p: inputs per rank and expected outputs, computed by the worker.

Never mounted into the sandbox and never shown to students.
"""

from __future__ import annotations

import torch

from labs.authoring import Case, no_builtin_collectives, rules

# Shapes per dtype; lengths 7, 5 and 1 are not multiples of 2, 3 or 4.
SHAPES = {torch.float32: [(7,), (4, 3)], torch.float64: [(5,), (2, 2, 2)], torch.int64: [(3, 2), (1,)]}


def cases(world_size: int, gen: torch.Generator) -> list[Case]:
    n = world_size
    out: list[Case] = []
    for dtype, shapes in SHAPES.items():
        for shape in shapes:
            xs = rules.random_tensors(n, shape, dtype, gen)
            label = rules.tensor_call("all_reduce", dtype, shape)
            out.append(Case("all-reduce", "all_reduce", label, xs, [torch.stack(xs).sum(dim=0)] * n, inplace=True))
            xs = rules.random_tensors(n, shape, dtype, gen)
            label = rules.tensor_call("all_gather", dtype, shape)
            out.append(Case("all-gather", "all_gather", label, xs, [torch.cat(xs, dim=0)] * n))
            rs_shape = (n * shape[0], *shape[1:])
            xs = rules.random_tensors(n, rs_shape, dtype, gen)
            label = rules.tensor_call("reduce_scatter", dtype, rs_shape)
            chunks = [p.clone() for p in torch.stack(xs).sum(dim=0).chunk(n)]
            out.append(Case("reduce-scatter", "reduce_scatter", label, xs, chunks))
    return out


RULES = {"no-builtin-collectives": no_builtin_collectives}
