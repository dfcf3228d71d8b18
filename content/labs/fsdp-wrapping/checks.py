"""Trusted checks for fsdp-wrapping: per-submission inputs, the single-process reference, the rules.

Never mounted into the sandbox. Training is compared with ``driver.reference`` (one process,
the whole global batch, the same AdamW), run here on this lab's own copy of the public driver.
What each strategy must look like (its FSDP units, its peak of unsharded parameter bytes and
the bytes its all-gathers put on the wire) follows from the model's parameter sizes alone:
``units.py`` computes it here, on the model's shapes. The memory is what the kernel
measured outside the ranks (``memory_peak``): per strategy, a group of its own runs one forward
and backward of a wider model, and each rank's high-water must stay under that strategy's bound.
"""

from __future__ import annotations

from typing import Any

import torch

from labs.authoring import (
    Case,
    Facts,
    Outcome,
    Phase,
    case_failure,
    later,
    load_public,
    load_trusted,
    memory_peak,
    result,
    training,
    wire,
)

STRATEGIES = ("per-layer", "per-block", "whole-model")
DIMS = {"width": 120, "blocks": 2}  # 6 Linear layers of 120 x 120 + a LayerNorm: 698,880 float64 bytes
BATCH = 24  # the global batch: equal shards on 2, 3 and 4 ranks (the lab runs on 2; a test on 3 too)
STEPS = 1  # one step: the gradients are compared too (AdamW's first step alone hides their scale)
LR, WEIGHT_DECAY = 1e-2, 0.01
TOLERANCE = (1e-9, 1e-11)  # (rtol, atol): float64; the ranks' sums run in another order (~1e-14 after AdamW)
# Bounds on the bytes a rank sends in the probe (one forward and backward, no reduce-scatter), as
# multiples of (N-1)/N of the bytes its all-gathers must bring in. Measured: 1.000-1.001 plus
# gloo's framing; whole-model gathers 0.58 and per-block 0.83 of what per-layer gathers.
HIGH, LOW = 1.05, 0.95
FRAMING = 8192  # bytes per rank on top, for gloo's framing of up to 13 all-gathers
DRIVER = load_public(__file__, "driver")
# What each strategy must look like, from the model's shapes alone (units.py).
units = load_trusted(__file__, "units")
ROOT, shapes, nbytes, expected_probe = units.ROOT, units.shapes, units.nbytes, units.expected_probe
unit_parameters, unit_bytes, peak_bytes, gathered_bytes = (
    units.unit_parameters,
    units.unit_bytes,
    units.peak_bytes,
    units.gathered_bytes,
)
# The memory cases: the same layout, 544 wide (one Linear: 2.26 MiB of float64), on 2 ranks, a group per strategy.
# The bytes these cases all-gather and reduce-scatter are most of the lab's grading time: 768 wide took 0.3 s more
# a grading, for a margin no wider (the peaks jitter by one or two buffers, with the backward's prefetch).
MEMORY_DIMS = {"width": 544, "blocks": 2}
MEMORY_BATCH = 8
MEMORY_WORLD_SIZE = 2
# A rank's memory may rise by at most this much (MiB) in each strategy's memory case: halfway between what the
# reference adds and what the nearest wrong wrapping adds, measured by the kernel (torch 2.13, gloo, 2026-11-27,
# 9 gradings of the reference and 5-7 of each mutant): per-layer 36.2-37.6 against 40.3-41.9 (Linear units not
# resharded after the forward; embed and head left in the root); per-block 45.0-48.0 against 51.7-54.2 (both
# blocks one unit); whole-model wrapping adds 56.2-56.3.
PEAK_ALLOWED_MIB = {"per-layer": 39.0, "per-block": 50.0}


def cases(world_size: int, gen: torch.Generator) -> list[Case]:
    seed = int(torch.randint(0, 2**31 - 1, (1,), generator=gen))
    base = {"seed": seed, "dims": DIMS, "batch": BATCH, "steps": STEPS, "lr": LR, "weight_decay": WEIGHT_DECAY}
    trained = later(DRIVER.reference, base)
    model = shapes(DIMS)
    out = []
    for strategy in STRATEGIES:
        inputs = [{**base, "strategy": strategy} for _ in range(world_size)]
        label = f"{strategy}: gradients and one AdamW step on a global batch of {BATCH}"
        parts, tolerance = {"training": ["grads", "params"]}, {"grads": TOLERANCE, "params": TOLERANCE}
        trains = [trained] * world_size
        out.append(Case("training", "wrap", label, inputs, trains, driver="train", parts=parts, tolerance=tolerance))
        probe = [expected_probe(model, strategy, world_size)] * world_size
        label = f"{strategy}: one forward and backward without reduce-scatter"
        out.append(Case("units", "wrap", label, [dict(i) for i in inputs], probe, driver="probe", measure=True))
    return out


def memory_case(strategy: str, seed: int, expected: Any) -> Case:
    inputs = {"seed": seed, "dims": MEMORY_DIMS, "batch": MEMORY_BATCH, "strategy": strategy}
    mib = sum(nbytes(p) for p in shapes(MEMORY_DIMS).parameters()) / 2**20
    label = f"{strategy}: one forward and backward of the {MEMORY_DIMS['width']}-wide model ({mib:.1f} MiB)"
    rows = [dict(inputs) for _ in range(MEMORY_WORLD_SIZE)]
    parts, tolerance = {"peak-memory": ["loss", "grad_rows"]}, {"loss": TOLERANCE, "grad_rows": TOLERANCE}
    return Case("peak-memory", "wrap", label, rows, expected, driver="memory", parts=parts, tolerance=tolerance)


def phases(world_sizes: list[int], gen: torch.Generator) -> list[Phase]:
    """Training and the probes at every world size, then each strategy's memory case in a group of its own."""
    out = [Phase(None, n, cases(n, gen)) for n in world_sizes]
    seed = int(torch.randint(0, 2**31 - 1, (1,), generator=gen))
    # Every strategy must compute the same loss and gradients: one reference for all memory cases.
    memory = {"seed": seed, "dims": MEMORY_DIMS, "batch": MEMORY_BATCH}
    expected = later(DRIVER.memory_reference, memory, MEMORY_WORLD_SIZE)
    for strategy in PEAK_ALLOWED_MIB:
        out.append(Phase(f"memory, {strategy}", MEMORY_WORLD_SIZE, [memory_case(strategy, seed, expected)]))
    return out


# --- the rules -------------------------------------------------------------------------------


def _probes(facts: Facts) -> list[tuple[Any, int, Case, str]]:
    calls = [(g, i, c) for g in facts.groups for i, c in enumerate(g.cases) if c.driver == "probe"]
    return [(g, i, c, c.inputs[0]["strategy"]) for g, i, c in calls]


def _list(names: list[str]) -> str:
    return ", ".join(names) if names else "none"


def _units_problem(got: Any, want: dict[str, Any], strategy: str) -> str | None:
    units = got.get("units") if isinstance(got, dict) else None
    sharding = got.get("sharding") if isinstance(got, dict) else None
    if not isinstance(units, list) or not isinstance(sharding, dict):
        return "the probe returned no units"
    if units != want["units"]:
        missing = [u for u in want["units"] if u not in units]
        extra = [u for u in units if u not in want["units"]]
        why = f"the FSDP units are [{_list(units)}], expected [{_list(want['units'])}]"
        if missing:
            why += f"; missing: {_list(missing)}"
        if extra:
            why += f"; not expected: {_list(extra)}"
        if ROOT in missing:
            why += ". Call fully_shard(model) last: the root unit holds every parameter no inner unit took"
        elif strategy == "whole-model" and extra:
            why += ". Whole-model wrapping is one fully_shard(model) and nothing else"
        elif strategy == "per-layer" and missing:
            why += ". Per-layer wrapping calls fully_shard on every nn.Linear (embed, head and both in every block)"
        elif strategy == "per-block" and (missing or extra):
            why += ". Per-block wrapping calls fully_shard on each element of model.blocks, not on its layers"
        return why
    for name, info in want["sharding"].items():
        mine = sharding.get(name)
        if not isinstance(mine, dict) or not mine.get("sharded"):
            return (
                f"{name} is a plain tensor on this rank, not a DTensor shard: no FSDP unit holds it, so it is"
                " neither sharded nor are its gradients averaged. Call fully_shard(model) after the inner units"
            )
        if mine.get("placements") != info["placements"] or mine.get("local_rows") != info["local_rows"]:
            return (
                f"{name} is sharded as [{mine.get('placements')}] with {mine.get('local_rows')} local rows, expected"
                f" [{info['placements']}] with {info['local_rows']}: use fully_shard's default sharding over every rank"
            )
    return None


def _wrap_order_advice(facts: Facts, problems: list[str]) -> str:
    """When only the strategies with inner units failed to run, the likely cause is the wrapping order."""
    broken = {s for g, i, _, s in _probes(facts) for r in range(g.world_size) if result(g, i, r) is None}
    if broken and "whole-model" not in broken and problems:
        return (
            " Only the strategies with inner units failed: FSDP2 wraps from the inside out, so call fully_shard on"
            " the inner units first and on the root last."
        )
    return ""


def units_rule(facts: Facts) -> Outcome:
    problems: list[str] = []
    good = total = 0
    for g, i, case, strategy in _probes(facts):
        total += 1
        why = None
        for r in range(g.world_size):
            got = result(g, i, r)
            why = case_failure(g, i, r, part=None) if got is None else _units_problem(got, case.expected[r], strategy)
            if why:
                problems.append(f"{strategy}, world size {g.world_size}, rank {r}: {why}")
                break
        good += why is None
    if not total:
        return Outcome(False, "no cases were run for this check", fraction=0.0)
    if problems:
        message = _first(problems, good, total) + _wrap_order_advice(facts, problems)
        return Outcome(False, message, {"problems": problems}, fraction=good / total)
    return Outcome(True, "every strategy made the expected FSDP units and sharded every parameter over the ranks")


def _first(problems: list[str], good: int, total: int) -> str:
    more = f" ({len(problems) - 1} more like it)" if len(problems) > 1 else ""
    return f"{problems[0]}{more} [{good} of {total} right]."


def _table(facts: Facts) -> tuple[list[dict[str, Any]], str]:
    """Per world size and strategy: units and all-gather bytes per rank, measured and expected."""
    rows: list[dict[str, Any]] = []
    for g, i, case, strategy in _probes(facts):
        n, model = g.world_size, shapes(case.inputs[0]["dims"])
        sent = wire.sent(g.wire[i], n) if i in g.wire else None
        rows.append(
            {
                "world_size": n,
                "strategy": strategy,
                "units": len(case.expected[0]["units"]),
                "unsharded_peak_bytes": peak_bytes(model, strategy),
                "all_gather_bytes_per_rank": max(sent) if sent else None,
                "expected_all_gather_bytes_per_rank": round((n - 1) * gathered_bytes(model, strategy) / n),
            }
        )
    text: dict[int, list[str]] = {}
    for r in rows:
        ag = "-" if r["all_gather_bytes_per_rank"] is None else f"{r['all_gather_bytes_per_rank']:,}"
        cell = f"{r['strategy']}: {ag} B per rank (expected {r['expected_all_gather_bytes_per_rank']:,})"
        text.setdefault(r["world_size"], []).append(cell)
    return rows, " | ".join(f"world size {n}: " + "; ".join(cells) for n, cells in sorted(text.items()))


def _chart(what: str, unit: str, rows: list[dict[str, Any]], series: dict[str, str]) -> dict[str, Any] | None:
    """One point per strategy in ``rows`` for each series (its name: the key it plots, in ``unit``, KiB or MiB)."""
    scale = 1024 if unit == "KiB" else 2**20
    out = []
    for name, key in series.items():
        points = [[k + 1, round(r[key] / scale, 1)] for k, r in enumerate(rows) if r[key] is not None]
        if points:
            out.append({"name": name, "points": points})
    if not out or out[0]["name"] != next(iter(series)):  # nothing measured
        return None
    names = ", ".join(f"{k + 1} = {r['strategy']}" for k, r in enumerate(rows))
    return {"title": f"{what}: {names}", "x_label": "strategy", "y_label": unit, "series": out}


def _mib(n: float) -> str:
    return f"{n / 2**20:,.1f} MiB"


def _memory_cases(facts: Facts) -> list[dict[str, Any]]:
    """Per memory case: the strategy, the most any rank added, its bound, and what is wrong (None: nothing)."""
    out = []
    for g in (g for g in facts.groups if g.phase and g.cases):
        strategy = g.cases[0].inputs[0]["strategy"]
        allowed = round(PEAK_ALLOWED_MIB[strategy] * 2**20)
        peaks = [memory_peak(g, r) for r in range(g.world_size)]
        known = [p for p in peaks if p is not None]
        row: dict[str, Any] = {"strategy": strategy, "peak_bytes": max(known, default=None), "allowed_bytes": allowed}
        where = f"{strategy} ({g.cases[0].label})"
        wrong = next((w for q in range(g.world_size) if (w := case_failure(g, 0, q, part="peak-memory"))), None)
        if len(known) < len(peaks):
            r = peaks.index(None)
            why = case_failure(g, 0, r) or "this grader could not read its memory from the kernel"
            row["problem"] = f"{where}: rank {r}'s memory was not measured ({why})"
        elif (peak := max(known)) > allowed:
            r = peaks.index(peak)
            row["problem"] = (
                f"{where}: rank {r}'s memory rose by {_mib(peak)} (measured by the kernel, outside your code), more"
                f" than the {_mib(allowed)} this strategy needs.{_peak_advice(strategy)}"
            )
        elif wrong:
            row["problem"] = (
                f"{where}: the memory ({_mib(peak)}) counts only for a wrapping that trains right, and this one's"
                f" loss or gradients are wrong ({wrong}); see the training check"
            )
        out.append({"problem": None, **row})
    return out


def peak_memory(facts: Facts) -> Outcome:
    rows = _memory_cases(facts)
    problems = [row["problem"] for row in rows if row["problem"]]
    good, total = len(rows) - len(problems), len(rows)
    data: dict[str, Any] = {"memory": [{k: v for k, v in row.items() if k != "problem"} for row in rows]}
    series = {"measured by the kernel (MiB, the most of any rank)": "peak_bytes", "allowed (MiB)": "allowed_bytes"}
    if chart := _chart("Memory a rank added, by strategy", "MiB", rows, series):
        data["chart"] = chart
    if not total:
        return Outcome(False, "no cases were run for this check", data, fraction=0.0)
    shown = "; ".join(
        f"{row['strategy']}: {'-' if row['peak_bytes'] is None else _mib(row['peak_bytes'])}"
        f" (allowed {_mib(row['allowed_bytes'])})"
        for row in rows
    )
    if problems:
        return Outcome(False, f"{_first(problems, good, total)} Measured: {shown}.", data, fraction=good / total)
    return Outcome(True, f"each strategy's memory, measured by the kernel, is within its bound: {shown}", data)


def _peak_advice(strategy: str) -> str:
    if strategy == "per-layer":
        return (
            " Per-layer wrapping holds one Linear whole at a time (two while the backward prefetches the next):"
            " call fully_shard on every nn.Linear, embed and head included, so that each is resharded after its"
            " forward (fully_shard's default, None in torch 2.13, does that for every unit but the root; passing"
            " reshard_after_forward=True does it too), then fully_shard(model)"
        )
    return (
        " Per-block wrapping holds one block whole at a time (two while the backward prefetches the next) besides"
        " the root's embed, norm and head: call fully_shard on each element of model.blocks, one call per block,"
        " resharded after its forward (the default for every unit but the root, or reshard_after_forward=True),"
        " then fully_shard(model)"
    )


def _gather_chart(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Communication against the parameters each strategy holds whole at once, at the largest world size."""
    n = max((row["world_size"] for row in rows), default=0)
    series = {
        f"all-gather bytes per rank, {n} ranks (KiB)": "all_gather_bytes_per_rank",
        "expected all-gather (KiB)": "expected_all_gather_bytes_per_rank",
        "unsharded parameters at the peak (KiB)": "unsharded_peak_bytes",
    }
    return _chart("Communication against memory", "KiB", [r for r in rows if r["world_size"] == n], series)


def all_gather(facts: Facts) -> Outcome:
    """The bytes each rank sent in each probe, between bounds. They count only for a strategy that trains right
    and, where it has a memory case, whose memory shows its units resharded: bytes that reach the lower bound
    prove nothing on their own (any code can send more)."""
    rows, table = _table(facts)
    resharded = {row["strategy"]: row["problem"] is None for row in _memory_cases(facts)}

    def verdict(g: Any, i: int, case: Case, sent: list[int]) -> str | None:
        strategy, n = case.inputs[0]["strategy"], g.world_size
        # A rank whose probe raised (no result) sent what it had by then: those bytes tell nothing.
        failed = next((r for r in range(n) if result(g, i, r) is None), None)
        if failed is not None:
            why = case_failure(g, i, failed)
            return f"the probe failed on rank {failed} ({why}), so its bytes say nothing about the wrapping"
        model = shapes(case.inputs[0]["dims"])
        gathered = gathered_bytes(model, strategy)
        theory = (n - 1) * gathered / n
        # The root wrapped with reshard_after_forward=True is gathered again for the backward: as right.
        again = (n - 1) * gathered_bytes(model, strategy, root_resharded=True) / n
        off = wire.outside(sent, (theory, again), (HIGH, LOW, FRAMING))
        if off:
            one = f"gathering {gathered:,} bytes of parameters sends (N-1)/N x that = {round(theory):,} bytes per rank"
            if again > theory * HIGH:
                one += f" ({round(again):,} with the root resharded after its forward too)"
            return f"{wire.compared(*off, theory, f'it should: {one}')}. {_gather_advice(strategy, off[1], theory)}"
        if not _trains_right(g, strategy):
            return (
                "the bytes are in range, but they count only for a strategy that trains right, and this one does not"
                " (see the training check)"
            )
        if not resharded.get(strategy, True):
            return (
                "the bytes are in range, but they count only for a strategy whose memory case shows each unit whole"
                " one at a time, and this one's does not (see the peak-memory check)"
            )
        return None

    data: dict[str, Any] = {"table": rows}
    if chart := _gather_chart(rows):
        data["chart"] = chart
    return wire.judge(
        [(g, i, c) for g, i, c, _ in _probes(facts)],
        verdict,
        success=f"each strategy's all-gathers sent the expected bytes. {table}",
        call="probe",
        where=lambda g, case: f"{case.inputs[0]['strategy']}, world size {g.world_size}",
        data=data,
        after=f" Measured: {table}",
    )


def _trains_right(g: Any, strategy: str) -> bool:
    """This group's training case of ``strategy`` is right on every rank."""
    return any(
        c.driver == "train" and c.inputs[0]["strategy"] == strategy and training.values_right(g, j, ("training",))
        for j, c in enumerate(g.cases)
    )


def _gather_advice(strategy: str, sent: float, theory: float) -> str:
    """What the bytes show, with the causes that could give them offered as possibilities (bytes cannot tell)."""
    if strategy == "whole-model":
        return (
            "Whole-model wrapping gathers every parameter in the forward, and keeps them for the backward by"
            " default: one fully_shard(model)."
            + (" Fewer bytes means some parameters were never gathered." if sent < theory else "")
            + (" More bytes could come from inner units as well as the root." if sent > theory else "")
        )
    if sent < theory:
        return (
            "Fewer bytes than this strategy's units need: some parameters were gathered fewer times than expected."
            " Possible causes: inner units not resharded after their forward, so not gathered again for their"
            " backward (reshard_after_forward=False; leave fully_shard's default), or fewer units than the"
            " strategy names (several of its modules in one unit)"
        )
    return (
        "More bytes than this strategy's units need: some parameters were gathered more often than expected."
        " Possible causes: more units than the strategy names (a module inside one of its units wrapped too),"
        " or a module wrapped twice"
    )


def _unsharded(g: Any, strategy: str, rank: int) -> list[str]:
    """The parameters this rank's probe of ``strategy`` saw as plain tensors right after wrap."""
    for i, case in enumerate(g.cases):
        if case.driver == "probe" and case.inputs[0]["strategy"] == strategy:
            got = result(g, i, rank)
            sharding = got.get("sharding") if isinstance(got, dict) else None
            if isinstance(sharding, dict):
                return [n for n, info in sharding.items() if isinstance(info, dict) and not info.get("sharded")]
    return []


def _training_hint(g: Any, i: int, case: Case, rank: int) -> str:
    plain = _unsharded(g, case.inputs[0]["strategy"], rank)
    if plain:
        return (
            f"{', '.join(plain[:4])} belong to no FSDP unit: they stay whole on every rank and FSDP never averages"
            " their gradients, so the ranks drift apart. Call fully_shard(model) after the inner units: the root"
            " unit takes every parameter no inner unit holds."
        )
    return "Every strategy must train exactly like one process: wrap with fully_shard and change nothing else."


def training_rule(facts: Facts) -> Outcome:
    return training.judge(facts, "training", _training_hint, success="single-process training")


RULES = {"training": training_rule, "units": units_rule, "peak-memory": peak_memory, "all-gather": all_gather}
