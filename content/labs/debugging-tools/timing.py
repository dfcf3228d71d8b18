"""The timing table of debugging-tools: its rules (trusted code, never mounted in the sandbox).

``timing_rows``: one row per collective the driver issued through the student's profiler, in
order, with the right op and bytes: a result, compared with what the driver's calls must give.
``timing_times`` is feedback and carries no points: every duration is finite and >= 0, they fit in
the driver's own clock, and the ranks that waited for the straggler show the wait. Both the
durations and the driver's clock are read inside the rank, where the student's code can rewrite
them, and nothing outside the rank times a collective.
"""

from __future__ import annotations

import math
from typing import Any

from labs.authoring import Case, Facts, Outcome, case_failure, result, tallies, training

DELAY = 0.05  # seconds the straggler sleeps before one all-reduce
# Where the driver's own clock saw the delayed all-reduce take WAITED s or more (the ranks that waited
# for the straggler), the rank's longest all-reduce row must be at least SEEN x that.
SEEN, WAITED = 0.5, 0.02
SLACK = 0.005  # seconds: the times may exceed the driver's own clock by this much in all


def calls(facts: Facts) -> list[tuple[Any, int, Case]]:
    return training.cases_judging(facts, "timing-rows")


def _describe(op: dict[str, Any]) -> str:
    return f"{op['op']} of a {op['dtype']} tensor of {op['numel']} elements"


def _rows_problem(rows: Any, case: Case, n: int) -> str | None:
    """Why this rank's table is not one row per collective with the right op and bytes, or None."""
    want = case.expected[0]["rows"]
    ops = case.inputs[0]["ops"]
    if isinstance(rows, str):
        return rows
    bad = [(k, row) for k, row in enumerate(rows) if isinstance(row, str)]
    if bad:
        k, row = bad[0]
        return f'row {k} is {row}; each row is a dict {{"op": str, "bytes": int, "seconds": float}}'
    if len(rows) != len(want):
        names = [w["op"] for w in want]
        got = [row["op"] for row in rows]
        if len(rows) == 2 * len(want) and (got[::2] == names or got[: len(want)] == names):
            return (
                f"{len(rows)} rows for the {len(want)} collectives issued through the profiler: each one"
                " is recorded twice. Append exactly one row per collective, after it finished"
            )
        missing = [name for name in dict.fromkeys(names) if got.count(name) < names.count(name)]
        extra = [name for name in dict.fromkeys(got) if got.count(name) > names.count(name)]
        detail = ""
        if missing:
            detail += f"; too few {', '.join(missing)} rows: every method must record its collective"
        if extra:
            detail += f"; too many {', '.join(extra)} rows: record each collective once"
        return f"{len(rows)} rows, expected {len(want)}, one per collective issued through the profiler{detail}"
    got_ops = [row["op"] for row in rows]
    if got_ops != [w["op"] for w in want]:
        k = next(k for k, (a, w) in enumerate(zip(got_ops, want, strict=True)) if a != w["op"])
        if sorted(got_ops) == sorted(w["op"] for w in want):
            return (
                f'row {k} is "{got_ops[k]}", expected "{want[k]["op"]}": the rows must be in the order the'
                " collectives were issued"
            )
        return (
            f'row {k} is op "{got_ops[k]}", expected "{want[k]["op"]}" (the names are "all_reduce",'
            ' "broadcast" and "all_gather")'
        )
    for k, (row, w, op) in enumerate(zip(rows, want, ops, strict=True)):
        if row["bytes"] != w["bytes"]:
            why = f"row {k} ({_describe(op)}) says {row['bytes']} bytes, expected {w['bytes']}"
            if row["bytes"] == op["numel"]:
                return f"{why}: that is the number of elements; bytes are numel() x element_size()"
            if row["bytes"] == n * w["bytes"]:
                return f"{why}: that is the whole output list; count the tensor this rank passes in"
            if row["bytes"] == op["numel"] * 8:
                return f"{why}: not every tensor is float64; use tensor.element_size()"
            return f"{why} (numel() x element_size() of the tensor argument)"
    return None


def timing_rows(facts: Facts) -> Outcome:
    tally = tallies.Tally(unit="rank result", empty="no timing call was run")
    for g, i, case in calls(facts):
        for r in range(g.world_size):
            got = result(g, i, r)
            if not isinstance(got, dict):
                reason = case_failure(g, i, r, part="collective-results") or "no result"
                tally.add(f"{g.name}, rank {r}: the timing call did not finish ({reason})")
            else:
                why = _rows_problem(got.get("rows"), case, g.world_size)
                tally.add(why and f"{g.name}, rank {r}, {case.label}: {why}")
    data = {"rank_calls": tally.total, "passed": tally.good}
    success = f"one row per collective, right op and bytes, on all {tally.total} ranks"
    return tally.outcome(success, data, score=True)


def _times_problem(g: Any, i: int, case: Case, shown: dict[str, Any]) -> str | None:
    inputs = case.inputs[0]
    straggler = int(inputs["straggler"])
    for r in range(g.world_size):
        got = result(g, i, r)
        if not isinstance(got, dict):
            return f"rank {r} did not finish the timing call"
        rows = got.get("rows")
        if not isinstance(rows, list) or not rows or not all(isinstance(row, dict) for row in rows):
            return f"rank {r} has no table of rows to read times from (see the timing rows check)"
        seconds = [row["seconds"] for row in rows]
        elapsed = float(got.get("elapsed", math.inf))
        window = float(got.get("waited", math.nan))
        shown[f"rank_{r}"] = {
            "seconds": [round(s, 6) for s in seconds],
            "driver_elapsed": round(elapsed, 6),
            "driver_delayed_call": round(window, 6),
        }
        if not all(math.isfinite(s) and s >= 0 for s in seconds):
            k = next(k for k, s in enumerate(seconds) if not (math.isfinite(s) and s >= 0))
            return f"rank {r}, row {k}: seconds is {seconds[k]!r}; a duration is a finite number >= 0"
        if sum(seconds) > elapsed + SLACK:
            return (
                f"rank {r}: the rows add up to {sum(seconds):.4g} s, but the whole sequence took {elapsed:.4g} s"
                " by the driver's clock. Each row is that one collective's duration in seconds (time.perf_counter()"
                " just before and just after it), not the time since the profiler started, nor milliseconds"
            )
        if window >= WAITED:
            longest = max((row["seconds"] for row in rows if row["op"] == "all_reduce"), default=0.0)
            if longest < SEEN * window:
                k = int(inputs["delayed"])
                return (
                    f"rank {straggler} slept {DELAY * 1000:.0f} ms before collective {k} (an all_reduce), and rank {r}"
                    f" spent {window * 1000:.3g} ms in that call by the driver's clock, yet its longest all_reduce"
                    f" row is {longest * 1000:.3g} ms. Time the whole collective, up to when it has finished on"
                    " this rank: with async_op=True, call wait() before reading the clock"
                )
    return None


FEEDBACK = " This check is feedback: it is measured inside your own process, so it cannot count (no points either way)."


def timing_times(facts: Facts) -> Outcome:
    """Feedback, no points: the durations against the driver's clock, both read inside the ranks."""
    tally = tallies.Tally(unit="world size", empty="no timing call was run." + FEEDBACK)
    data: dict[str, Any] = {"straggler_delay_s": DELAY}
    for g, i, case in calls(facts):
        shown: dict[str, Any] = {}
        data[f"world_size_{g.world_size}"] = shown
        why = _times_problem(g, i, case, shown)
        tally.add(why and f"{g.name}: {why}")
    data["feedback"] = "measured inside the ranks: shown, never scored"
    success = (
        "every duration is >= 0, they fit in the driver's clock, and the ranks that waited for the straggler"
        " show the wait." + FEEDBACK
    )
    return tally.outcome(success, data, shown=2, advice=FEEDBACK.strip())
