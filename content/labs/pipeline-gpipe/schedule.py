"""The bubble of a recorded pipeline schedule: pipeline-gpipe's trusted helpers (never mounted in the sandbox).

Each stage records its forwards and backwards as ``["F32", "B32", ...]`` (kind, rows). ``replay``
runs those orders together with ideal times (a backward twice a forward), which gives the bubble
exactly and free of the grading machine's load; ``shape_problem`` says what keeps one stage's
record from being GPipe's. ``measured`` and ``chart`` are for what is shown, never judged.
"""

from __future__ import annotations

from typing import Any


def theory(n: int, m: int) -> float:
    """GPipe's bubble fraction (N - 1) / (M + N - 1)."""
    return (n - 1) / (m + n - 1)


def parse(events: Any) -> list[tuple[str, int]] | None:
    """A stage's record ``["F32", "B32", ...]`` as (kind, rows), or None if it is not one."""
    if not isinstance(events, list) or len(events) > 10_000:
        return None
    out = []
    for e in events:
        if not isinstance(e, str) or len(e) < 2 or e[0] not in "FB" or not e[1:].isdigit():
            return None
        out.append((e[0], int(e[1:])))
    return out


def replay(stages: list[list[tuple[str, int]]], batch: int) -> float | None:
    """The bubble fraction of the recorded order with ideal times, or None if that order cannot run.

    A forward of r rows takes r / batch, a backward 2 r / batch. Stage s's k-th forward waits for
    stage s - 1's k-th forward, its k-th backward for stage s + 1's k-th backward; each stage runs
    its own events in the recorded order, one at a time. Bubble = 1 - busy / (N x makespan).
    """
    n = len(stages)
    done: list[dict[str, list[float]]] = [{"F": [], "B": []} for _ in range(n)]
    free, nxt = [0.0] * n, [0] * n
    progress = True
    while progress:
        progress = False
        for s in range(n):
            while nxt[s] < len(stages[s]):
                kind, rows = stages[s][nxt[s]]
                k = len(done[s][kind])
                dep = s - 1 if kind == "F" else s + 1
                if 0 <= dep < n:
                    if len(done[dep][kind]) <= k:
                        break
                    start = max(free[s], done[dep][kind][k])
                else:
                    start = free[s]
                free[s] = start + rows / batch * (1 if kind == "F" else 2)
                done[s][kind].append(free[s])
                nxt[s] += 1
                progress = True
    if any(nxt[s] < len(stages[s]) for s in range(n)):
        return None
    makespan = max(free)
    busy = sum(rows / batch * (1 if kind == "F" else 2) for st in stages for kind, rows in st)
    return 1 - busy / (n * makespan) if makespan > 0 else None


def shape_problem(events: list[tuple[str, int]], m: int, batch: int) -> str | None:
    """What is wrong with one stage's record for a GPipe step of M micro-batches, or None."""
    per = batch // m
    shown = " ".join(f"{k}{r}" for k, r in events[:10]) + (" ..." if len(events) > 10 else "")
    want = f"{m} forwards of {per} rows, then {m} backwards"
    forwards = [r for k, r in events if k == "F"]
    backwards = [r for k, r in events if k == "B"]
    if len(forwards) != m or any(r != per for r in forwards):
        rows = ", ".join(map(str, sorted(set(forwards))))
        return (
            f"it ran {len(forwards)} forward{'s' if len(forwards) != 1 else ''} of {rows} rows ({shown});"
            f" GPipe runs {want}: cut the batch into num_micro_batches equal micro-batches and call stage(x) once"
            " on each"
        )
    if len(backwards) != m or any(r != per for r in backwards):
        return f"it ran {len(backwards)} backward passes ({shown}); GPipe runs {want}: backpropagate every micro-batch"
    if events[:m] != [("F", per)] * m:
        return (
            f"it ran a backward before its last forward ({shown}); GPipe runs {want}: every stage first pushes all"
            " M micro-batches forward, and only then runs their backwards (that is what fills the pipeline)"
        )
    return None


LIBRARY = (
    "your module uses torch.distributed.pipelining: its schedules are not allowed here, since writing the"
    " schedule is the exercise. Move the activations and gradients yourself with dist.send/dist.recv"
)


def measured(timings: list[Any]) -> float | None:
    """1 - (mean busy time) / wall time, the wall from the first stage's start to the last stage's end."""
    try:
        starts, ends, busy = ([float(t[key]) for t in timings] for key in ("start", "end", "busy"))
    except (TypeError, KeyError, ValueError):
        return None
    wall = max(ends) - min(starts)
    if not wall > 0 or wall > 3600:
        return None
    return min(1.0, max(0.0, 1 - sum(busy) / len(busy) / wall))


def chart(series: dict[int, dict[str, list[list[float]]]]) -> dict[str, Any]:
    """The bubble chart: per N, the replayed schedule (what the check judges), then the theory line, dashed
    and drawn over it. The wall clock is left out: on a busy grading machine it can even rise with M
    (``measured_table`` shows it apart)."""
    out = []
    for n, lines in sorted(series.items()):
        if lines.get("schedule"):
            out.append({"name": f"N = {n}: your schedule, replayed", "group": n, "points": lines["schedule"]})
        if lines.get("theory"):
            out.append({"name": f"N = {n}: theory (N-1)/(M+N-1)", "group": n, "style": "theory",
                        "points": lines["theory"]})  # fmt: skip
    return {
        "title": "Pipeline bubble: the share of each stage's time spent waiting",
        "x_label": "micro-batches M",
        "y_label": "bubble fraction",
        "series": out,
    }


def measured_table(series: dict[int, dict[str, list[list[float]]]]) -> dict[str, Any] | None:
    """The bubble measured on the wall clock, apart from the chart and clearly labelled: noisy, never judged."""
    rows = [
        [f"N = {n}, M = {m:g}", f"{value:.3f}", f"{theory(n, int(m)):.3f}"]
        for n, lines in sorted(series.items())
        for m, value in lines.get("measured", [])
    ]
    if not rows:
        return None
    return {
        "caption": "Measured wall clock (noisy, not judged): the grading machine runs other work beside your ranks, "
        "so these figures can even rise with M. The chart shows your schedule replayed with ideal times instead.",
        "columns": ["Run", "Measured bubble (wall clock)", "Theory (N-1)/(M+N-1)"],
        "rows": rows,
    }
