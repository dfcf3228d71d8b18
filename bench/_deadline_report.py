"""What a deadline rush recorded (bench/deadline.py), and the figures it prints from it."""

from __future__ import annotations

import argparse
import os
from collections import Counter
from dataclasses import dataclass, field

from app.labs.models import Submission, SubmissionStatus
from bench._chart import ascii_chart, write_svg
from bench._deadline_db import Audit, rush_rate
from bench._queueing import capacity_table
from bench.grading import percentile
from bench.quizzes import Recorder, report

STUDY = ("quiz start", "answer save", "next card", "rating", "quiz submit")


@dataclass(frozen=True)
class Piece:
    """A real solution to submit: a lab's reference, or one of its mutants (wrong on purpose)."""

    lab: str
    name: str
    code: str

    @property
    def right(self) -> bool:
        return self.name == "solution"


@dataclass
class Sent:
    student: int
    piece: Piece
    id: int | None = None  # set once the app acknowledged it (202)
    status: str | None = None  # the verdict status the student saw
    seen_s: float | None = None  # the student's clock: POST -> verdict seen


@dataclass
class Rush:
    sent: list[Sent] = field(default_factory=list)
    labs: Recorder = field(default_factory=Recorder)  # submit and poll requests
    study: Recorder = field(default_factory=Recorder)  # the studying students' requests
    cpu: list[tuple[str, float, float]] = field(default_factory=list)  # (part, CPU seconds, share) during the rush
    cpu_again: list[tuple[str, float, float]] = field(default_factory=list)  # the same, back to back after it
    cpu_first: list[tuple[str, float, float]] = field(default_factory=list)  # and back to back before it


def spread(label: str, values: list[float]) -> str:
    if not values:
        return f"  {label}: none"
    return (
        f"  {label} (n={len(values)}): p50 {percentile(values, 0.5):.1f} s  p95 {percentile(values, 0.95):.1f} s  "
        f"max {max(values):.1f} s"
    )


def summary(
    args: argparse.Namespace,
    rush: Rush,
    found: dict[int, Submission],
    samples: list[tuple[float, int, int]],
    load: float,
    rush_audit: Audit,
    unacknowledged: int,
    again: tuple[float, dict[int, Submission], Audit],
    ahead: tuple[float, dict[int, Submission], Audit],
) -> bool:
    """Print the figures; True when nothing was lost or double-graded and no request failed."""
    acked = [s for s in rush.sent if s.id is not None]
    right = sum(1 for s in rush.sent if s.piece.right)
    print(
        f"deadline rush: {args.students} students, {len(rush.sent)} submissions ({right} right, "
        f"{len(rush.sent) - right} wrong) to {', '.join(args.labs)}, arriving over {args.window:g} s; "
        f"{args.studying} others studying; {args.web} web processes, {args.workers} grading workers, PostgreSQL; "
        f"{os.cpu_count()} CPUs, load average {load:.1f} at the start"
    )
    if args.split:
        grading, rest = (",".join(map(str, sorted(cpus))) for cpus in args.split)
        print(f"  CPUs: grading workers and their ranks on {grading}; web, PostgreSQL and load generator on {rest}")
    waits = [(r.finished_at - r.submitted_at).total_seconds() for r in found.values() if r.finished_at]
    print(spread("submit -> verdict (database clock)", waits))
    seen = [s.seen_s for s in acked if s.seen_s is not None]
    pace = f"polling every {args.poll:g} s" if args.poll else "held polls, as the lab page asks"
    print(spread(f"submit -> verdict seen by the student ({pace})", seen))
    first: dict[int, float] = {}
    for s in acked:
        r = found.get(s.id or 0)
        if s.student not in first and r is not None and r.finished_at:
            first[s.student] = (r.finished_at - r.submitted_at).total_seconds()
    print(spread("each student's wait for their first verdict", list(first.values())))

    depth = [queued for _, queued, _ in samples]
    peak = max(depth, default=0)
    at_peak = depth.index(peak) if depth else 0
    print(
        f"  queue depth (jobs waiting), every second: peak {peak} at {at_peak} s, "
        f"{max((r for _, _, r in samples), default=0)} being graded at most"
    )
    print("\n".join(ascii_chart(depth, 1.0)))
    if args.chart:
        write_svg(
            args.chart,
            depth,
            1.0,
            title=f"Jobs waiting: {args.students} students at a deadline, {args.workers} workers",
            y_label="jobs waiting",
        )
        print(f"  chart written to {args.chart}")

    after, regraded, again_audit = again
    before, _, first_audit = ahead
    rate = (before + after) / 2  # the two back-to-back runs that bracket the rush
    finished = [r.finished_at.timestamp() for r in found.values() if r.finished_at]
    busy = rush_rate(samples, finished)
    print(
        f"  back to back (the same {len(regraded)} submissions all queued at once, no web load): "
        f"{before:.1f}/min before the rush, {after:.1f}/min after it (the machine {after / before - 1:+.0%} "
        f"between them), {rate:.1f}/min on average"
    )
    if busy is None:
        print("  grading: the queue never backed up during the rush (no stretch of work waiting)")
    else:
        during, span, waiting = busy
        ratio = during / rate if rate else None
        shown = "n/a" if ratio is None else f"{ratio:.2f}"
        print(
            f"  grading during the rush: {during:.1f}/min over the {span:.0f} s from the first to the last second "
            f"with jobs waiting (waiting in {waiting} of those samples); ratio to back to back {shown} "
            f"(target >= 0.90: {'met' if ratio is not None and ratio >= 0.9 else 'NOT met'}; "
            f"{during / before:.2f} to the run before, {during / after:.2f} to the run after)"
        )
    per_worker = rate / args.workers
    for name, usage in (
        ("back to back before", rush.cpu_first),
        ("during the rush", rush.cpu),
        ("back to back after", rush.cpu_again),
    ):
        if usage:
            total = sum(seconds for _, seconds, _ in usage)
            shares = ", ".join(f"{label} {share:.0%} ({seconds:.0f} s)" for label, seconds, share in usage)
            print(f"  CPU {name} ({total:.0f} CPU-seconds of {os.cpu_count()} CPUs): {shares}")
    plain, held = (rush.labs.times.get(name, []) for name in ("poll", "held poll"))
    if acked:
        print(
            f"  polls per submission: {(len(plain) + len(held)) / len(acked):.1f} "
            f"({len(plain)} plain, {len(held)} held until the status changed or for the server's long_poll_s)"
        )

    study = [v for name in STUDY for v in rush.study.times.get(name, [])]
    if study:
        print(report("web: quiz and card requests", study))
    for name in ("submit", "poll"):
        if values := rush.labs.times.get(name):
            print(report(f"web: lab {name}", values))
    errors = rush.labs.errors + rush.study.errors
    print(f"  request errors: {len(errors)}")
    for line in errors[:10]:
        print(f"    {line}")

    print(f"  rush: {rush_audit.line()}; stored without an acknowledgement {unacknowledged}")
    print(f"  back to back before: {first_audit.line()}")
    print(f"  back to back after: {again_audit.line()}")
    statuses: dict[str, int] = {}
    odd = []
    changed: list[str] = []  # a mutant can score differently on other secret inputs
    for s in acked:
        r = found.get(s.id or 0)
        if r is None:
            continue
        statuses[str(r.status)] = statuses.get(str(r.status), 0) + 1
        full = r.status == SubmissionStatus.graded and r.score == r.max_score
        if full != s.piece.right:
            odd.append(f"{s.piece.lab}/{s.piece.name}: {r.status} {r.score}/{r.max_score}")
        later = regraded.get(r.id)
        if later is not None and (later.status, later.score) != (r.status, r.score):
            changed.append(f"{s.piece.lab}/{s.piece.name}: {r.score} then {later.score}/{r.max_score}")
    print(
        f"  verdicts: {', '.join(f'{k} {v}' for k, v in sorted(statuses.items()))}; unexpected (a reference below "
        f"full marks, or a wrong solution at full marks) {len(odd)}; changed when re-graded {len(changed)}"
    )
    for line in odd[:5]:
        print(f"    {line}")
    for line, n in sorted(Counter(changed).items(), key=lambda item: -item[1])[:10]:
        print(f"    re-graded differently: {line} ({n}x)")
    grading_cpus = len(args.split[0]) if args.split else (os.cpu_count() or 1)
    print(
        f"  per worker: {per_worker:.1f} graded/min back to back ({grading_cpus} CPUs shared by "
        f"{args.workers} workers: {grading_cpus / args.workers:g} each)"
    )
    if args.capacity:
        print(
            f"\nworkers of this size for a p95 submit -> verdict under 60 s, at {per_worker:.1f} graded/min each "
            "(spread over the hour / all in its last 10 minutes; M/M/c queueing arithmetic, not measured):"
        )
        print("\n".join(capacity_table(per_worker)))
    bad = sum(a.lost + a.doubled for a in (rush_audit, first_audit, again_audit))
    return not bad and not errors
