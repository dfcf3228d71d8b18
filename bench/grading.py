"""Grading latency and throughput for 4-rank ring all-reduce submissions.

Grades N copies of the reference solution through the engine's entry point
(``Grader.grade``) twice: arriving at a steady rate (default 30 a minute), then back
to back. Prints the median and p90 click-to-verdict latency of both, next to a cold
``torch.multiprocessing.spawn`` running the same checks in the same run, and the
back-to-back throughput in graded submissions per minute.

    .venv/bin/python bench/grading.py [-n 30] [--rate 30] [--world-size 4] [--pool 2] [--cold 3]

``measure_engine`` and ``measure_cold`` are reusable (a later bench drives the
HTTP API with the same report).
"""

from __future__ import annotations

import argparse
import io
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench._server import free_port

LAB = "ring-allreduce"
CONTENT = Path(__file__).resolve().parents[1] / "content" / "labs"


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def measure_engine(grade: Callable[[], str], n: int, interval: float = 0.0) -> tuple[list[float], float]:
    """Submit n times, one every ``interval`` seconds (0: back to back), grading each with ``grade``.

    Returns each submission's click-to-verdict latency (from its arrival, so time spent queued
    behind the previous one counts) and the total wall time.
    """
    latencies = []
    started = time.perf_counter()
    for i in range(n):
        arrival = started + i * interval if interval else time.perf_counter()
        time.sleep(max(0.0, arrival - time.perf_counter()))
        status = grade()
        latencies.append(time.perf_counter() - arrival)
        if status != "passed":
            raise SystemExit(f"a reference solution was graded {status!r}: the bench is meaningless")
    return latencies, time.perf_counter() - started


def _cold_rank(rank: int, world_size: int, port: int, code: str, blob: str) -> None:
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world_size)
    namespace: dict[str, object] = {}
    exec(compile(code, "submission.py", "exec"), namespace)
    calls = torch.load(blob, weights_only=True)
    for fn, inplace, inputs, expected in calls:
        arg = inputs[rank].clone()
        out = namespace[fn](arg)  # type: ignore[operator]
        got = arg if inplace else out
        if not torch.allclose(got.double(), expected[rank].double(), rtol=1e-5, atol=1e-5):
            raise SystemExit(f"rank {rank}: wrong result in {fn}")
    dist.destroy_process_group()


def measure_cold(code: str, world_size: int, repeats: int) -> list[float]:
    """Wall time of a cold ``torch.multiprocessing.spawn`` that runs the same checks, per repeat."""
    import importlib.util

    import torch
    import torch.multiprocessing as mp

    spec = importlib.util.spec_from_file_location("bench_checks", CONTENT / LAB / "checks.py")
    assert spec and spec.loader
    checks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(checks)
    cases = checks.cases(world_size, torch.Generator().manual_seed(0))
    times = []
    with tempfile.TemporaryDirectory() as tmp:
        blob = os.path.join(tmp, "cases.pt")
        buffer = io.BytesIO()
        torch.save([(c.fn, c.inplace, c.inputs, c.expected) for c in cases], buffer)
        Path(blob).write_bytes(buffer.getvalue())
        for _ in range(repeats):
            t = time.perf_counter()
            mp.spawn(_cold_rank, args=(world_size, free_port(), code, blob), nprocs=world_size, join=True)
            times.append(time.perf_counter() - t)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", type=int, default=30, help="submissions to grade (default 30)")
    parser.add_argument("--world-size", type=int, default=4)
    parser.add_argument("--pool", type=int, default=2, help="warm sandboxes kept ready (default 2)")
    parser.add_argument("--cold", type=int, default=3, help="cold mp.spawn runs to time (default 3)")
    parser.add_argument("--rate", type=float, default=30, help="arrivals per minute for the paced run (default 30)")
    args = parser.parse_args()

    from labs.host.grader import Grader

    code = (CONTENT / LAB / "solution.py").read_text()
    sizes = [args.world_size]

    def grade() -> str:
        return grader.grade(LAB, code, world_sizes=sizes).status

    with Grader(pool_size=args.pool) as grader:
        grader.grade(LAB, code, world_sizes=sizes)  # loads the checks
        time.sleep(5)  # let the pool fill
        paced, _ = measure_engine(grade, args.n, 60.0 / args.rate)
        time.sleep(5)
        burst, total = measure_engine(grade, args.n)
    cold = measure_cold(code, args.world_size, args.cold)
    cold_median = statistics.median(cold)
    print(
        f"lab {LAB}, {args.world_size} ranks, {args.n} submissions per run, pool of {args.pool}, {os.cpu_count()} CPUs"
    )
    for name, lat in ((f"arriving at {args.rate:g}/min", paced), ("back to back", burst)):
        median = statistics.median(lat)
        print(
            f"engine, {name:>18}: median {median:.3f} s  p90 {percentile(lat, 0.9):.3f} s  "
            f"min {min(lat):.3f} s  max {max(lat):.3f} s  ({median / cold_median:.1%} of cold)"
        )
    print(f"cold mp.spawn of the same checks: median {cold_median:.3f} s over {len(cold)} runs")
    print(f"throughput (back to back): {args.n / total * 60:.1f} graded submissions per minute")


if __name__ == "__main__":
    main()
