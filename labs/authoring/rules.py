"""Rules that several labs' checks share (trusted, outside the sandbox), each with the lab's own words.

``one_all_reduce``: what a measured call may send per rank when it should be one all-reduce.
``wire_per_phase``: the communication rule of a layer lab whose forward and backward are each
measured (tensor-parallel, tp-attention); a call's bytes count only if its results are right.
``same_answer_everywhere``: every rank returned the same bool in each call (param-sync,
debugging-tools' sync check).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from labs.host.judge import Case, Facts, Outcome, case_failure, result

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
