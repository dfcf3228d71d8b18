"""Rules that several labs' checks share (trusted, outside the sandbox), each with the lab's own words.

``one_all_reduce``: what a measured call may send per rank when it should be one all-reduce.
``wire_per_phase``: the communication rule of a layer lab whose forward and backward are each
measured (tensor-parallel, tp-attention); a call's bytes count only if its results are right.
``layer_problems``, ``layer_call`` and ``all_reduce_bytes``: the cases and the wire verdict of such a lab.
``same_answer_everywhere``: every rank returned the same bool in each call (param-sync,
debugging-tools' sync check).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from labs.host.judge import Case, Facts, Outcome, case_failure, result
from labs.rank.trees import Tolerance

# (data, problem or None) for one measured call: (world size, phase, the case's problem, bytes sent per rank)
WireVerdict = Callable[[int, str, dict[str, Any], list[int]], tuple[dict[str, Any], str | None]]


def one_all_reduce(world_size: int, tensor_bytes: int, sent: list[int], slack: float, framing: int) -> dict[str, Any]:
    """The bytes per rank of one ring all-reduce of ``tensor_bytes``, 2(N-1)/N of it, and the bounds around it.

    ``theory``, ``high`` (theory x (1 + slack) + framing) and ``low`` (theory x (1 - slack)) are for
    the rule; ``shown`` is what the student sees beside the measured bytes.
    """
    theory = 2 * (world_size - 1) * tensor_bytes / world_size
    return {
        "theory": theory,
        "high": theory * (1 + slack) + framing,
        "low": theory * (1 - slack),
        "shown": {
            "tensor_bytes": tensor_bytes,
            "theoretical_bytes_per_rank": round(theory),
            "measured_bytes_per_rank": sent,
            "ratio_to_theory": [round(s / theory, 4) for s in sent],
        },
    }


def wire_per_phase(facts: Facts, verdict: WireVerdict, success: str, *, feedback: tuple[str, ...] = ()) -> Outcome:
    """Judge every measured call's bytes with ``verdict``; its phase is the case's driver ("forward", "backward").

    A call's bytes count only if its results are right on every rank (at the keys of every check the
    case judges, but the ``feedback`` ones): the right number of bytes that did not produce the right
    values (zeros sent in place of the partial sums) proves nothing. Partial credit: the share of
    measured calls whose bytes and values are right.
    """
    data: dict[str, Any] = {}
    problems: list[str] = []
    good = total = 0
    for g in facts.groups:
        n = g.world_size
        for i, case in enumerate(g.cases):
            if not case.measure:
                continue
            phase = str(case.driver)
            total += 1
            wire = g.wire.get(i)
            if wire is None:
                problems.append(f"world size {n}, {phase}: the call did not finish, so its bytes were not counted")
                continue
            sent = [sum(wire["sent"].get(str(r), {}).values()) for r in range(n)]
            found, why = verdict(n, phase, case.inputs[0]["problem"], sent)
            found["loopback_bytes"] = wire["loopback_bytes"]
            data.setdefault(f"world_size_{n}", {})[phase] = found
            if why:
                problems.append(why)
            elif wire["loopback_bytes"] > 1.25 * sum(sent) + 65536:
                problems.append(
                    f"world size {n}, {phase}: {wire['loopback_bytes']:,} bytes crossed the loopback, but the"
                    f" ranks' open connections account for only {sum(sent):,}"
                )
            elif any(case_failure(g, i, r, part) for r in range(n) for part in _scored(case, feedback)):
                problems.append(
                    f"world size {n}, {phase}: the bytes look right, but the call's results are wrong (see the other"
                    " checks), and bytes count only for a call whose results are right"
                )
            else:
                good += 1
    if not total:
        return Outcome(False, "no measured call was run", data, fraction=0.0)
    if problems:
        return Outcome(False, "; ".join(problems[:3]), data, fraction=good / total)
    return Outcome(True, success, data, fraction=1.0)


def _scored(case: Case, feedback: tuple[str, ...]) -> list[str | None]:
    """The parts of ``case`` whose values count (its checks but the feedback ones); [None]: the whole result."""
    if not case.parts:
        return [None]
    return [part for part in case.parts if part not in feedback]


def same_answer_everywhere(
    calls: list[tuple[Any, int, Case]], answer: Callable[[Any, int, int], Any], *, values_check: str, advice: str
) -> Outcome:
    """Every rank returned the same bool in each call; ``advice`` follows "the ranks disagree (...)"."""
    good = total = 0
    problems: list[str] = []
    for g, i, case in calls:
        total += 1
        said = [answer(g, i, r) for r in range(g.world_size)]
        if any(result(g, i, r) is None for r in range(g.world_size)):
            problems.append(f"{g.name}, {case.label}: not every rank returned (see the {values_check} check)")
        elif not all(isinstance(a, bool) for a in said):
            problems.append(f"{g.name}, {case.label}: not every rank returned a bool")
        elif len(set(said)) > 1:
            listed = ", ".join(f"rank {r} {a}" for r, a in enumerate(said))
            problems.append(f"{g.name}, {case.label}: the ranks disagree ({listed}). {advice}")
        else:
            good += 1
    if not total:
        return Outcome(False, "no calls were run for this check", fraction=0.0)
    if problems:
        n = len(problems) - 1
        more = f" ({n} more call{'s' if n > 1 else ''} like this)" if n else ""
        return Outcome(False, f"{problems[0]}{more}.", {"calls": total, "agreed": good}, fraction=good / total)
    return Outcome(True, f"every rank returned the same answer in all {total} calls", {"calls": total}, fraction=1.0)


def layer_problems(
    world_size: int, gen: Any, problems: dict[str, dict[str, Any]], draw: Callable[[dict[str, Any], list[Any]], Any]
) -> list[tuple[str, dict[str, Any], list[dict[str, Any]]]]:
    """(key, problem, each rank's weights) of a tensor-parallel layer lab, for each of ``problems`` (key: dims).

    A problem is ``{"seed": ..., **dims}``, its seed drawn from a generator every rank may see (what
    the ranks share comes from it); ``draw(problem, own)`` gives each rank its own weights from its
    own generator in ``own``, and the rank is given nothing else of them, so it cannot draw another's.
    """
    import torch

    from labs.authoring.training import secret_generators

    out = []
    for key, dims in problems.items():
        common, *own = secret_generators(gen, world_size + 1)
        problem = {"seed": int(torch.randint(0, 2**31 - 1, (1,), generator=common)), **dims}
        out.append((key, problem, draw(problem, own)))
    return out


def layer_call(
    phase: str,
    key: str,
    problem: dict[str, Any],
    parts: list[dict[str, Any]],
    expected: list[dict[str, Any]],
    *,
    measured: bool,
    tolerance: dict[str, Tolerance],
) -> dict[str, Any]:
    """The rest of a layer lab's ``Case`` for one phase (``Case(check=..., fn=..., driver=phase, label=...,
    parts=..., **layer_call(...))``): every rank is given the problem, and in the forward call its own
    weights (``parts``) too; the backward call runs on the layer the forward built."""
    return {
        "inputs": [{"key": key, "problem": dict(problem), **(part if phase == "forward" else {})} for part in parts],
        "expected": expected,
        "inplace": False,
        "measure": measured,
        "tolerance": tolerance,
    }


def all_reduce_bytes(
    world_size: int,
    phase: str,
    tensor: tuple[str, int],
    sent: list[int],
    *,
    bounds: tuple[float, int],
    advice: tuple[str, str],
) -> tuple[dict[str, Any], str | None]:
    """One measured call of a layer lab against one all-reduce of its activation: (what is shown, problem or None).

    ``tensor`` is (its shape as the student sees it, its bytes): in "forward" the float64 output, in
    "backward" the gradient of x. ``bounds`` is (slack, framing) as ``one_all_reduce`` takes them;
    ``advice`` says what too many bytes mean, then what too few mean.
    """
    shape, nbytes = tensor
    budget = one_all_reduce(world_size, nbytes, sent, *bounds)
    what = "output" if phase == "forward" else "gradient of x"
    one = (
        f"one all-reduce of the {shape} float64 {what} sends 2(N-1)/N x {nbytes:,} ="
        f" {round(budget['theory']):,} bytes per rank"
    )
    too_many, too_few = advice
    for r, s in enumerate(sent):
        if s > budget["high"]:
            return budget[
                "shown"
            ], f"world size {world_size}, {phase}: rank {r} sent {s:,} bytes, but {one}. {too_many}"
        if s < budget["low"]:
            return budget["shown"], (
                f"world size {world_size}, {phase}: rank {r} sent only {s:,} bytes, but {one}. {too_few}"
            )
    return budget["shown"], None


def layer_communication(facts: Facts, verdict: WireVerdict) -> Outcome:
    """The communication rule of a tensor-parallel layer lab: one all-reduce forward, one backward
    (``wire_per_phase`` with ``verdict``); what a layer keeps ("sharding") is read from the rank's own
    objects, so it is feedback and never makes a call's bytes count or not."""
    success = "one all-reduce of the output forward and one of the input gradient backward"
    return wire_per_phase(facts, verdict, success, feedback=("sharding",))


def replicated(world_size: int, inputs: dict[str, Any], expected: Any) -> dict[str, Any]:
    """A ``Case``'s ``inputs`` and ``expected`` when every rank is given the same inputs (each its own copy) and
    must return the same result: ``Case(check=..., fn=..., label=..., **replicated(n, inputs, expected), ...)``."""
    return {"inputs": [dict(inputs) for _ in range(world_size)], "expected": [expected for _ in range(world_size)]}


def random_tensors(count: int, shape: tuple[int, ...], dtype: Any, gen: Any) -> list[Any]:
    """``count`` tensors of ``shape`` and ``dtype`` (one per rank: a collective's inputs), drawn from ``gen``:
    standard normal values for a floating dtype, else integers in [-1000, 1000)."""
    import torch

    if dtype.is_floating_point:
        return [torch.randn(shape, generator=gen, dtype=dtype) for _ in range(count)]
    return [torch.randint(-1000, 1000, shape, generator=gen, dtype=dtype) for _ in range(count)]


def tensor_call(fn: str, dtype: Any, shape: tuple[int, ...]) -> str:
    """A collective's call as its case's label: ``all_gather(float32 tensor of shape (4, 3))``."""
    return f"{fn}({str(dtype).removeprefix('torch.')} tensor of shape {tuple(shape)})"
