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
from typing import Any

import torch

from labs.authoring import Case, Facts, Outcome, case_failure, result, rules

DIMS = [64, 128, 64, 16]  # 17,616 float32 parameters: 70.5 KB per rank
LIMIT = 4096  # bytes a rank may send in one call: a fingerprint fits many times, the model never


def shapes() -> dict[str, tuple[int, ...]]:
    """The model's parameter names and shapes, as ``driver.build_model`` names them."""
    out: dict[str, tuple[int, ...]] = {}
    for k, (fan_in, fan_out) in enumerate(itertools.pairwise(DIMS)):
        out[f"{2 * k}.weight"] = (fan_out, fan_in)
        out[f"{2 * k}.bias"] = (fan_out,)
    return out


def _numel(shape: tuple[int, ...]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


MODEL_BYTES = 4 * sum(_numel(s) for s in shapes().values())


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
        values = _stream(key + name.encode(), _numel(shape)) * 2 * bound - bound
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
    names = list(shapes())
    secret = _draw(gen, 2**62).to_bytes(8, "little")
    # The one-ulp change is never in the first parameter (so checking that one alone misses it);
    # the swap is in one of the weight matrices, between two unequal elements.
    ulp_param = names[1 + _draw(gen, len(names) - 1)]
    ulp = {"kind": "ulp", "param": ulp_param, "at": _draw(gen, _numel(shapes()[ulp_param])), "up": bool(_draw(gen, 2))}
    weights = [n for n in names if n.endswith("weight")]
    swap_param = weights[_draw(gen, len(weights))]
    size = _numel(shapes()[swap_param])
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


def _calls(facts: Facts) -> list[tuple[Any, int, Case]]:
    return [(g, i, c) for g in facts.groups for i, c in enumerate(g.cases) if c.judges("answers")]


def _answer(g: Any, i: int, r: int) -> Any:
    got = result(g, i, r)
    return got.get("in_sync") if isinstance(got, dict) else None


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
    if any(_answer(g, i, r) is want for r in range(g.world_size)):
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


def answers(facts: Facts) -> Outcome:
    total = passed = 0
    first: str | None = None
    wrong_where: list[str] = []
    for g, i, case in _calls(facts):
        for r in range(g.world_size):
            total += 1
            why = case_failure(g, i, r, part="answers")
            if why is None:
                passed += 1
                continue
            wrong_where.append(f"world size {g.world_size}: {case.label}")
            if first is None:
                got = _answer(g, i, r)
                want = case.expected[r]["in_sync"]
                if result(g, i, r) is None:
                    first = f"{g.name}, rank {r}, {case.label}: {why}."
                else:
                    shown = got if isinstance(got, bool) else f"{got!r}"
                    first = f"{g.name}, rank {r}, {case.label}: returned {shown}, expected {want}." + _answer_hint(
                        g, i, case, got
                    )
    data: dict[str, Any] = {"rank_calls": total, "passed": passed}
    if not total:
        return Outcome(False, "no calls were run for this check", data, fraction=0.0)
    if first is None:
        return Outcome(True, f"all {total} answers right (every rank, every call)", data, fraction=1.0)
    calls = sorted(set(wrong_where))
    data["wrong_calls"] = calls
    more = f" Wrong in {len(calls)} call{'s' if len(calls) > 1 else ''} in all." if len(calls) > 1 else ""
    return Outcome(False, f"{first}{more} [{passed} of {total} right]", data, fraction=passed / total)


def agreement(facts: Facts) -> Outcome:
    return rules.same_answer_everywhere(
        _calls(facts),
        _answer,
        values_check="answers",
        advice="A rank that only compares itself with rank 0 cannot know about the others: reduce the"
        " fingerprints so that every rank sees the same result (all_reduce with MAX and with MIN, or all_gather)"
        " and decide from that",
    )


def _more(problems: list[str]) -> str:
    n = len(problems) - 1
    return f" ({n} more call{'s' if n > 1 else ''} like this)" if n else ""


def communication(facts: Facts) -> Outcome:
    good = total = 0
    problems: list[str] = []
    data: dict[str, Any] = {"limit_bytes_per_rank": LIMIT, "model_bytes": MODEL_BYTES}
    for g, i, case in _calls(facts):
        if not case.measure:
            continue
        total += 1
        wire = g.wire.get(i)
        finished = all(result(g, i, r) is not None for r in range(g.world_size))
        if wire is None or not finished:
            problems.append(f"{g.name}, {case.label}: the call did not finish on every rank, so its bytes say nothing")
            continue
        sent = [sum(wire["sent"].get(str(r), {}).values()) for r in range(g.world_size)]
        data.setdefault(f"world_size_{g.world_size}", {})[case.label] = sent
        over = [(r, s) for r, s in enumerate(sent) if s > LIMIT]
        silent = [r for r, s in enumerate(sent) if s == 0]
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
            problems.append(
                f"{g.name}, {case.label}: rank {r} sent {s:,} bytes, over the {LIMIT:,}-byte limit: {advice}"
            )
        elif silent:
            problems.append(
                f"{g.name}, {case.label}: rank {silent[0]} sent nothing. Every rank must share its fingerprint,"
                " or the others cannot know that its copy differs"
            )
        elif any(case_failure(g, i, r, part="answers") for r in range(g.world_size)):
            problems.append(
                f"{g.name}, {case.label}: the bytes are within the limit, but not every rank answered right (see"
                " the answers check), and bytes count only for a call whose answers are right"
            )
        else:
            good += 1
    if not total:
        return Outcome(False, "no measured call", data, fraction=0.0)
    if problems:
        more = _more(problems)
        message = f"{problems[0]}{more}."
        return Outcome(False, message, data, fraction=good / total)
    most = max(max(v) for k, w in data.items() if k.startswith("world_size_") for v in w.values())
    message = f"every rank sent between 1 and {most:,} bytes per call, under the {LIMIT:,}-byte limit"
    return Outcome(True, message, data, fraction=1.0)


RULES = {"answers": answers, "agreement": agreement, "communication": communication}
