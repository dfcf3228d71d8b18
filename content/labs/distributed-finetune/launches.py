"""Trusted helpers for distributed-finetune's checks (never mounted in a rank): reading what a launch left.

``metrics`` parses the JSON lines a launch left at METRICS_PATH (read by the zygote after its ranks
exited); ``ended`` says why a launch did not end as planned; ``first_difference``, ``wrong`` and
``cut_short`` compare a log with the reference, naming the first step that differs or a killed launch's
log that stops early (not flushed).
"""

from __future__ import annotations

import json
import math
from typing import Any

from labs.authoring import GroupRun, result

LOSS_RTOL = 1e-4  # bf16 rounding order (gloo's sums, an unsynced accumulation) moved losses by < 1e-6 (measured)
LR_RTOL = 1e-9
METRICS, RELAUNCH = "metrics.jsonl", "relaunch.jsonl"  # METRICS_PATH's name: a launch's, the relaunch's
FLUSH = "flush METRICS_PATH after each line (a killed process loses what it had not written out)"
FLUSH_ADVICE = FLUSH[0].upper() + FLUSH[1:] + "."


def last_line(text: str) -> str:
    lines = [line.strip() for line in str(text).splitlines() if line.strip()]
    return lines[-1][:300] if lines else "(nothing on stderr)"


def ended(g: GroupRun) -> str | None:
    """Why a launch that should have finished (or, killed, should have been killed) did not, or None."""
    if g.status is None:
        return "not run: an earlier launch ended the grading"
    got = result(g, 0, 0)
    if isinstance(got, dict) and got.get("exit") not in ((None, 0) if g.expect_crash else (0,)):
        return f"rank 0's script exited with status {got.get('exit')}: {last_line(got.get('stderr', ''))}"
    if g.expect_crash:
        return None if g.status == "crashed" else f"the launch to be killed was not: {g.status}"
    if g.status != "ok":
        ended = {"deadlock": "the ranks hung (deadlock)", "time_limit": "the time limit ran out"}
        return f"the launch ended early: {ended.get(g.status, g.status)}"
    return None


def metrics(g: GroupRun, folder: str, name: str = METRICS) -> tuple[list[dict[str, float]], float | None, str | None]:
    """(the step records, the perplexity, a problem) of METRICS_PATH as the launch left it."""
    data = g.files.get(f"{folder}/{name}")
    if data is None:
        return [], None, (ended(g) or "") + ("; " if ended(g) else "") + "METRICS_PATH was never written"
    records: list[dict[str, float]] = []
    perplexity = None
    for number, line in enumerate(data.decode("utf-8", "replace").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            if "perplexity" in row:
                perplexity = float(row["perplexity"])
            else:
                records.append({"step": int(row["step"]), "loss": float(row["loss"]), "lr": float(row["lr"])})
        except (ValueError, KeyError, TypeError):
            return (
                records,
                perplexity,
                f"line {number} of METRICS_PATH is not a record as the statement says: {line[:120]!r}",
            )
    steps = [r["step"] for r in records]
    broken = next((i for i in range(1, len(steps)) if steps[i] != steps[i - 1] + 1), None)
    if broken is not None:
        seen = ", ".join(map(str, steps[max(0, broken - 3) : broken + 2]))
        return records, perplexity, f"METRICS_PATH's steps do not follow each other once each: ..., {seen}, ..."
    return records, perplexity, None


def close(got: float, want: float, rtol: float) -> bool:
    return math.isfinite(got) and abs(got - want) <= rtol * abs(want)


def matches(records: list[dict[str, float]], want: dict[str, Any]) -> bool:
    losses = want["losses"]
    return len(records) == len(losses) and all(
        close(r["loss"], w, LOSS_RTOL) for r, w in zip(records, losses, strict=True)
    )


def first_difference(records: list[dict[str, float]], losses: list[float], key: str = "loss") -> str | None:
    if len(records) != len(losses):
        return f"METRICS_PATH holds {len(records)} optimizer steps, expected {len(losses)}"
    for r, w in zip(records, losses, strict=True):
        if not close(r[key], w, LOSS_RTOL if key == "loss" else LR_RTOL):
            return f"the {key} logged at step {r['step']} is {r[key]!r}, expected {w!r}"
    return None


def cut_short(records: list[dict[str, float]], want: dict[str, Any]) -> str | None:
    """For a killed launch whose log stops early but agrees as far as it goes: that, in words."""
    wanted = want["losses"]
    if want.get("killed") and len(records) < len(wanted) and not first_difference(records, wanted[: len(records)]):
        return f"METRICS_PATH holds {len(records)} of the {len(wanted)} steps done"
    return None


def wrong(records: list[dict[str, float]], want: dict[str, Any], key: str = "loss") -> str | None:
    """The first difference of a launch's log from ``want``."""
    return first_difference(records, want["losses"] if key == "loss" else want["lrs"], key)
