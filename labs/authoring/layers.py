"""What the tensor-parallel layer labs share (tensor-parallel, tp-attention), trusted, outside the sandbox.

Each rank is given only its own part of the weights (``rules.layer_problems``), and one process running
the whole layer is the reference (``reference``). ``calls`` builds each problem's forward and backward
call; ``all_reduce`` judges a measured call's bytes against one all-reduce of its float64 activation,
and ``advice`` words what too many or too few bytes mean in each phase.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

from labs.authoring.rules import all_reduce_bytes, layer_call, layer_problems
from labs.host.judge import later

if TYPE_CHECKING:  # torch is imported where it is used, so that loading a checks module stays fast
    import torch

TOLERANCE = (1e-9, 1e-11)  # float64; the ranks sum the partial products in another order
# One all-reduce sends 2(N-1)/N of the tensor per rank; allow 10% and a little framing on top,
# and require at least 90% of it (fewer bytes: the all-reduce is missing).
BOUNDS = (0.10, 16384)

Tree = dict[str, Any]
# Each rank's own weights (problem, one generator per rank), as ``rules.layer_problems`` draws them.
Draw = Callable[[Tree, list[Any]], list[Tree]]
# Each rank's expected forward and backward results (problem, every rank's weights).
Expected = Callable[[Tree, list[Tree]], tuple[list[Tree], list[Tree]]]


def reference(
    layer: Callable[..., dict[str, torch.Tensor]],
    x: torch.Tensor,
    grad_y: torch.Tensor,
    params: dict[str, torch.Tensor | None],
) -> dict[str, Any]:
    """One process runs ``layer(x, **params)`` and the backward of ``(y * grad_y).sum()``, y being its result
    at ``output``: every result it names, ``grad_x``, each parameter that is not None and its gradient
    (``grad_<name>``). A None parameter is left out of the call, so the layer's default stands."""
    x = x.clone().requires_grad_(True)
    leaves = {k: v.clone().requires_grad_(True) for k, v in params.items() if v is not None}
    out = layer(x, **leaves)
    (out["output"] * grad_y).sum().backward()
    return {
        **{k: v.detach() for k, v in out.items()},
        "grad_x": x.grad,
        **{k: v.detach() for k, v in leaves.items()},
        **{f"grad_{k}": v.grad for k, v in leaves.items()},
    }


def calls(
    world_size: int, gen: Any, problems: dict[str, Tree], draw: Draw, expected: Expected, keys: tuple[str, ...]
) -> list[tuple[Tree, Tree, Tree]]:
    """(problem, forward, backward) for each of ``problems`` (key: dims), the first one's bytes measured.

    ``forward`` and ``backward`` are the rest of each phase's ``Case`` (``rules.layer_call``: ``Case(check=...,
    fn=..., driver="forward", label=..., parts=..., **forward)``), its results at ``keys`` within ``TOLERANCE``;
    ``draw`` gives each rank its own weights, ``expected`` each rank's results.
    """
    tolerance = dict.fromkeys(keys, TOLERANCE)
    out = []
    for n, (key, problem, parts) in enumerate(layer_problems(world_size, gen, problems, draw)):
        both = later(expected, problem, parts)  # computed while the ranks run (``labs.host.judge.later``)
        forward, backward = later(_part, both, 0), later(_part, both, 1)
        run: Tree = {"key": key, "problem": problem, "parts": parts, "measured": n == 0, "tolerance": tolerance}
        out.append(
            (problem, layer_call("forward", expected=forward, **run), layer_call("backward", expected=backward, **run))
        )
    return out


def _part(both: Future[tuple[Any, Any]], i: int) -> Any:
    return both.result()[i]


def all_reduce(
    world_size: int, phase: str, shape: list[int], sent: list[int], advice: dict[str, tuple[str, str]]
) -> tuple[Tree, str | None]:
    """One measured call's bytes per rank against one all-reduce of its float64 activation of ``shape`` (the
    output forward, the gradient of x backward), within ``BOUNDS``: (what is shown, problem or None), with
    ``advice[phase]`` (``advice``) after a problem."""
    tensor = (" x ".join(map(str, shape)), math.prod(shape) * 8)
    return all_reduce_bytes(world_size, phase, tensor, sent, bounds=BOUNDS, advice=advice[phase])


def advice(*, kept: str, summed: str, reduce: str, missing: str, unreduced: str) -> dict[str, tuple[str, str]]:
    """What too many bytes mean, then too few, in each phase of a layer lab, for ``all_reduce``.

    ``kept`` is what a rank keeps of the weights, ``summed`` what the forward all-reduce sums and ``reduce``
    names that all-reduce; ``missing`` is the advice for too few bytes forward, ``unreduced`` backward.
    """
    return {
        "forward": (
            f"More than one all-reduce, or weights on the wire: keep only {kept}, and sum {summed} with a single"
            " all-reduce.",
            missing,
        ),
        "backward": (
            f"More than one all-reduce in backward: {reduce} must pass the output gradient through unchanged (its"
            " backward is the identity), not all-reduce it again.",
            unreduced,
        ),
    }
