"""Trusted checks for param-sync: what each rank's copy holds in each call, the true answers, the rules.

Never mounted into the sandbox. Every call gives every rank its copy of a float32 model, the
parameters themselves: the same on every rank unless one rank's was changed (one element one ulp
away, or two unequal elements swapped). No rank can tell whether its copy is the others': the
values come from a stream no rank can reproduce, and a changed copy looks like any other. So the
truth is known here, and a rank can only learn it by comparing copies with the others.
"""

from __future__ import annotations

import hashlib
import itertools
import math
from typing import Any

import torch

from labs.authoring import Case, Facts, Outcome, case_failure, result, tallies, training

DIMS = [64, 128, 64, 16]  # 17,616 float32 parameters: 70.5 KB per rank
LIMIT = 4096  # bytes a rank may send in one call: a fingerprint fits many times, the model never


def shapes() -> dict[str, tuple[int, ...]]:
    """The model's parameter names and shapes, as ``driver.build_model`` names them."""
    out: dict[str, tuple[int, ...]] = {}
    for k, (fan_in, fan_out) in enumerate(itertools.pairwise(DIMS)):
        out[f"{2 * k}.weight"] = (fan_out, fan_in)
        out[f"{2 * k}.bias"] = (fan_out,)
    return out


MODEL_BYTES = 4 * sum(math.prod(s) for s in shapes().values())


def _draw(gen: torch.Generator, high: int) -> int:
    return int(torch.randint(0, high, (1,), generator=gen))


def _stream(key: bytes, count: int) -> torch.Tensor:
    """``count`` float64 numbers uniform in [0, 1), from a hash of ``key``: unpredictable without it.

    Not a torch generator, whose state a rank could reconstruct from the values it was given and
    then replay to see whether its own copy is the common one.
    """
    raw = hashlib.shake_256(key).digest(8 * count)
    words = torch.frombuffer(bytearray(raw), dtype=torch.int64) & ((1 << 53) - 1)
    return words.to(torch.float64) / float(1 << 53)


def model(key: bytes) -> dict[str, torch.Tensor]:
    """One call's model: every tensor uniform in +-1/sqrt(fan_in), drawn in float64 and rounded to float32.

    Every float32 in the range can occur, so an element one ulp away from a drawn one is as likely
    as the drawn one itself: a changed copy looks like any other.
    """
    out = {}
    for k, (name, shape) in enumerate(shapes().items()):
        bound = DIMS[k // 2] ** -0.5
        values = _stream(key + name.encode(), math.prod(shape)) * 2 * bound - bound
        out[name] = values.to(torch.float32).view(shape)
    return out


def changed(common: dict[str, torch.Tensor], change: dict[str, Any]) -> dict[str, torch.Tensor]:
    """A copy of ``common`` with one element one ulp away, or two unequal elements of one tensor swapped."""
    out = {name: t.clone() for name, t in common.items()}
    flat = out[change["param"]].view(-1)
    i = change["at"]
    if change["kind"] == "ulp":
        towards = torch.tensor(float("inf") if change["up"] else float("-inf"), dtype=torch.float32)
        flat[i] = torch.nextafter(flat[i], towards)
    else:
        j = change["other"]
        while bool(flat[j] == flat[i]):  # equal values would swap into the same copy: take the next
            j = (j + 1) % flat.numel()
        flat[i], flat[j] = flat[j].clone(), flat[i].clone()
    return out


def cases(world_size: int, gen: torch.Generator) -> list[Case]:
    shape = shapes()
    names = list(shape)
    secret = _draw(gen, 2**62).to_bytes(8, "little")
    # The one-ulp change is never in the first parameter (so checking that one alone misses it);
    # the swap is in one of the weight matrices, between two unequal elements.
    ulp_param = names[1 + _draw(gen, len(names) - 1)]
    ulp = {"kind": "ulp", "param": ulp_param, "at": _draw(gen, math.prod(shape[ulp_param])), "up": bool(_draw(gen, 2))}
    weights = [n for n in names if n.endswith("weight")]
    swap_param = weights[_draw(gen, len(weights))]
    size = math.prod(shape[swap_param])
    i = _draw(gen, size)
    swap = {"kind": "swap", "param": swap_param, "at": i, "other": (i + 1 + _draw(gen, size - 1)) % size}
    plan = [
        ("in sync: every rank holds the same model", None),
        (f"one element of {ulp_param} one ulp away on rank {{r}}", ulp),
        (f"two unequal elements of {swap_param} swapped on rank {{r}}", swap),
        ("in sync: every rank holds the same model", None),
    ]
    order = torch.randperm(len(plan), generator=gen).tolist()  # no call's place says what it is
    out = []
    for k, (label, change) in enumerate(plan[j] for j in order):
        common = model(secret + k.to_bytes(2, "little"))
        who = _draw(gen, world_size) if change else None
        mine = changed(common, change) if change else common
        inputs = [{"dims": DIMS, "params": mine if r == who else common} for r in range(world_size)]
        out.append(
            Case(
                check="answers",
                fn="params_in_sync",
                driver="check",
                label=label.format(r=who),
                inputs=inputs,
                expected=[{"in_sync": change is None} for _ in range(world_size)],
                measure=True,
                parts={"answers": ["in_sync"]},
            )
        )
    return out


def _change(case: Case) -> dict[str, Any] | None:
    """What differs between the ranks' copies in ``case``: {"kind": "ulp" or "swap", "param": name}, or None."""
    base = case.inputs[0]["params"]
    for other in case.inputs[1:]:
        for name, tensor in other["params"].items():
            differ = int((tensor != base[name]).sum())
            if differ:
                return {"kind": "ulp" if differ == 1 else "swap", "param": name}
    return None


def _answer_hint(g: Any, i: int, case: Case, got: Any) -> str:
    change = _change(case)
    if not isinstance(got, bool):
        return " params_in_sync must return a Python bool (or a one-element bool tensor)."
    want = case.expected[0]["in_sync"]
    if any(tallies.said(g, i, r, "in_sync") is want for r in range(g.world_size)):
        return (
            " Other ranks answered this call right: every rank must learn every other rank's fingerprint"
            " (see the agreement check)."
        )
    if change is None:
        return (
            " The copies were bitwise identical, so the answer is True: the fingerprint must be the same"
            " on every rank for the same parameters (no unseeded randomness, nothing that depends on the rank)."
        )
    if change["kind"] == "ulp":
        return (
            f" One element of {change['param']} differed by one ulp. Fingerprint every parameter (not only"
            " the first) and every bit: a float32 sum rounds such a change away and a tolerance (allclose,"
            " isclose) accepts it by design; hash the bytes or fold in the bit patterns (p.view(torch.int32)),"
            " and compare exactly."
        )
    return (
        f" Two unequal elements of {change['param']} were swapped: every sum, sum of squares, norm, min and"
        " max is unchanged. Fingerprint every parameter, in a way that depends on where each value is: a hash"
        " of the bytes in order, or a sum of the bit patterns weighted by position."
    )


answers, agreement = tallies.bool_rules(
    "answers",
    "in_sync",
    _answer_hint,
    advice="A rank that only compares itself with rank 0 cannot know about the others: reduce the fingerprints"
    " so that every rank sees the same result (all_reduce with MAX and with MIN, or all_gather) and decide from that",
)


def _bytes_problem(g: Any, i: int, sent: list[int]) -> str | None:
    over = [(r, s) for r, s in enumerate(sent) if s > LIMIT]
    if over:
        r, s = over[0]
        if s > MODEL_BYTES // 10:
            advice = (
                f"{s / MODEL_BYTES:.0%} of the model's {MODEL_BYTES:,} bytes: the parameters went on the wire."
                " Send a fixed-size fingerprint (a few numbers) instead"
            )
        else:
            advice = (
                "gloo adds a few hundred bytes per collective, so one collective per parameter tensor (or"
                " a fingerprint that grows with the model) costs more as the model grows. Fold every"
                " parameter into one fixed-size fingerprint and exchange it in one or two collectives"
            )
        return f"rank {r} sent {s:,} bytes, over the {LIMIT:,}-byte limit: {advice}"
    if 0 in sent:
        return (
            f"rank {sent.index(0)} sent nothing. Every rank must share its fingerprint, or the others cannot know"
            " that its copy differs"
        )
    if any(case_failure(g, i, r, part="answers") for r in range(g.world_size)):
        return (
            "the bytes are within the limit, but not every rank answered right (see the answers check), and"
            " bytes count only for a call whose answers are right"
        )
    return None


def communication(facts: Facts) -> Outcome:
    tally = tallies.Tally(unit="call", empty="no measured call")
    data: dict[str, Any] = {"limit_bytes_per_rank": LIMIT, "model_bytes": MODEL_BYTES}
    most = 0
    for g, i, case in training.cases_judging(facts, "answers"):
        wire, n = g.wire.get(i), g.world_size
        if wire is None or any(result(g, i, r) is None for r in range(n)):
            tally.add(f"{g.name}, {case.label}: the call did not finish on every rank, so its bytes say nothing")
            continue
        sent = [sum(wire["sent"].get(str(r), {}).values()) for r in range(n)]
        data.setdefault(f"world_size_{n}", {})[case.label] = sent
        problem = _bytes_problem(g, i, sent)
        tally.add(problem and f"{g.name}, {case.label}: {problem}")
        most = max(most, *sent)
    success = f"every rank sent between 1 and {most:,} bytes per call, under the {LIMIT:,}-byte limit"
    return tally.outcome(success, data)


RULES = {"answers": answers, "agreement": agreement, "communication": communication}
