"""Trusted checks for collectives-p2p: inputs per rank and expected outputs, computed by the worker.

Never mounted into the sandbox and never shown to students.
"""

from __future__ import annotations

import torch

from labs.authoring import Case, no_builtin_collectives

DTYPES = (torch.float32, torch.float64, torch.int64)
# Shapes per dtype; lengths 7, 5 and 1 are not multiples of 2, 3 or 4.
SHAPES = {torch.float32: [(7,), (4, 3)], torch.float64: [(5,), (2, 2, 2)], torch.int64: [(3, 2), (1,)]}


def _tensor(shape: tuple[int, ...], dtype: torch.dtype, gen: torch.Generator) -> torch.Tensor:
    if dtype.is_floating_point:
        return torch.randn(shape, generator=gen, dtype=dtype)
    return torch.randint(-1000, 1000, shape, generator=gen, dtype=dtype)


def _label(fn: str, dtype: torch.dtype, shape: tuple[int, ...]) -> str:
    return f"{fn}({str(dtype).removeprefix('torch.')} tensor of shape {tuple(shape)})"


def cases(world_size: int, gen: torch.Generator) -> list[Case]:
    n = world_size
    out: list[Case] = []
    for dtype in DTYPES:
        for shape in SHAPES[dtype]:
            xs = [_tensor(shape, dtype, gen) for _ in range(n)]
            total = torch.stack(xs).sum(dim=0)
            out.append(Case("all-reduce", "all_reduce", _label("all_reduce", dtype, shape), xs, [total] * n, True))
            xs = [_tensor(shape, dtype, gen) for _ in range(n)]
            out.append(
                Case(
                    "all-gather",
                    "all_gather",
                    _label("all_gather", dtype, shape),
                    xs,
                    [torch.cat(xs, dim=0)] * n,
                    False,
                )
            )
            rs_shape = (n * shape[0], *shape[1:])
            xs = [_tensor(rs_shape, dtype, gen) for _ in range(n)]
            parts = torch.chunk(torch.stack(xs).sum(dim=0), n)
            out.append(
                Case(
                    "reduce-scatter",
                    "reduce_scatter",
                    _label("reduce_scatter", dtype, rs_shape),
                    xs,
                    [p.clone() for p in parts],
                    False,
                )
            )
    return out


RULES = {"no-builtin-collectives": no_builtin_collectives}
