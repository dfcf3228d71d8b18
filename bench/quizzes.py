"""Drive simulated students through quiz attempts against the app served by uvicorn.

    .venv/bin/python bench/quizzes.py [--students 50] [--attempts 2] [--think-ms 200-600] [--ramp-s 5] [--cpus 0,1]

Starts, on loopback only: the app (``python -m app serve``: migrate, content sync, uvicorn)
on a fresh SQLite data directory, and a bare FastAPI app with one trivial route. The same
number of students, with the same think time between requests, first hit the bare route,
then take Module 202 over the JSON API (start, 25 answer saves, submit). Prints p50/p99 of
answer-save and submit next to the bare route, and the error count. ``--cpus`` pins both
servers to those cores (``taskset``), to measure as on a 2-core machine.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from bench._client import ERRORS as client_errors  # noqa: E402
from bench._server import free_port, make_students, wait_ready  # noqa: E402


def bare_app():  # type: ignore[no-untyped-def]
    """The baseline: FastAPI with one route and nothing else (sync, like the app's routes)."""
    from fastapi import FastAPI

    app = FastAPI()

    @app.put("/answers/{question_id}")
    def answer(question_id: str) -> dict[str, str]:
        return {"question_id": question_id}

    return app


class Recorder:
    def __init__(self) -> None:
        self.times: dict[str, list[float]] = {}
        self.errors: list[str] = []

    async def call(self, name: str, coro, ok: tuple[int, ...] = (200, 201)):  # type: ignore[no-untyped-def]
        start = time.perf_counter()
        try:
            response = await coro
        except (httpx.HTTPError, *client_errors) as exc:
            self.errors.append(f"{name}: {exc!r}")
            return None
        self.times.setdefault(name, []).append((time.perf_counter() - start) * 1000)
        if response.status_code not in ok:
            self.errors.append(f"{name}: {response.status_code} {response.text[:200]}")
            return None
        return response


async def think(lo: int, hi: int) -> None:
    await asyncio.sleep(random.uniform(lo, hi) / 1000)


async def bare_student(client: httpx.AsyncClient, rec: Recorder, requests: int, lo: int, hi: int, ramp: float) -> None:
    await asyncio.sleep(random.uniform(0, ramp))
    for i in range(requests):
        await think(lo, hi)
        await rec.call("bare route", client.put(f"/answers/q{i}"))


async def student(
    client: httpx.AsyncClient, rec: Recorder, token: str, attempts: int, lo: int, hi: int, ramp: float
) -> None:
    await asyncio.sleep(random.uniform(0, ramp))
    headers = {"Authorization": f"Bearer {token}"}
    for _ in range(attempts):
        await think(lo, hi)
        started = await rec.call("start", client.post("/api/v1/quizzes/module-202/attempts", headers=headers))
        if started is None:
            return
        attempt = started.json()
        for q in attempt["questions"]:
            await think(lo, hi)
            choice = random.choice(q["options"])["key"]
            url = f"/api/v1/attempts/{attempt['id']}/answers/{q['id']}"
            await rec.call("answer save", client.put(url, json={"choice": choice}, headers=headers))
        await think(lo, hi)
        await rec.call("submit", client.post(f"/api/v1/attempts/{attempt['id']}/submit", headers=headers))


async def drive(base: str, make) -> Recorder:  # type: ignore[no-untyped-def]
    rec = Recorder()
    limits = httpx.Limits(max_connections=200, max_keepalive_connections=200)
    async with httpx.AsyncClient(base_url=base, limits=limits, timeout=30) as client:
        await asyncio.gather(*make(client, rec))
    return rec


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def report(label: str, values: list[float]) -> str:
    return f"  {label:<12} n={len(values):>5}  p50 {statistics.median(values):6.1f} ms  p99 {pct(values, 0.99):6.1f} ms"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--students", type=int, default=50)
    parser.add_argument("--attempts", type=int, default=2)
    parser.add_argument("--think-ms", default="200-600", help="think time between a student's requests, lo-hi")
    parser.add_argument("--ramp-s", type=float, default=5.0, help="students arrive spread over this many seconds")
    parser.add_argument("--cpus", default="0,1", help="cores for the servers (taskset); '' for no pinning")
    parser.add_argument("--serve-bare", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_bare:
        import uvicorn

        uvicorn.run(bare_app(), host="127.0.0.1", port=args.serve_bare, log_level="warning")
        return 0
    lo, hi = (int(x) for x in args.think_ms.split("-"))
    pin = ["taskset", "-c", args.cpus] if args.cpus and shutil.which("taskset") else []
    data = Path(tempfile.mkdtemp(prefix="ringlab-bench-"))
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"} | {"RINGLAB_DATA_DIR": str(data)}
    run = [sys.executable, "-m", "app"]
    subprocess.run([*run, "db", "upgrade"], cwd=REPO, env=env, check=True, capture_output=True)
    subprocess.run([*run, "content", "sync"], cwd=REPO, env=env, check=True, capture_output=True)
    tokens = make_students(data / "ringlab.sqlite3", args.students)
    app_port, bare_port = free_port(), free_port()
    logs = [open(data / "app.log", "w"), open(data / "bare.log", "w")]  # noqa: SIM115 - open for the servers' lives
    procs = [
        subprocess.Popen(
            [*pin, *run, "serve", "--port", str(app_port)], cwd=REPO, env=env, stdout=logs[0], stderr=logs[0]
        ),
        subprocess.Popen(
            [*pin, sys.executable, __file__, "--serve-bare", str(bare_port)], cwd=REPO, stdout=logs[1], stderr=logs[1]
        ),
    ]
    try:
        wait_ready(f"http://127.0.0.1:{app_port}/healthz", procs[0], data / "app.log")
        wait_ready(f"http://127.0.0.1:{bare_port}/docs", procs[1], data / "bare.log")
        requests = args.attempts * 27
        bare = asyncio.run(
            drive(
                f"http://127.0.0.1:{bare_port}",
                lambda c, r: [bare_student(c, r, requests, lo, hi, args.ramp_s) for _ in range(args.students)],
            )
        )
        began = time.perf_counter()
        real = asyncio.run(
            drive(
                f"http://127.0.0.1:{app_port}",
                lambda c, r: [student(c, r, t, args.attempts, lo, hi, args.ramp_s) for t in tokens],
            )
        )
        elapsed = time.perf_counter() - began
    finally:
        for p in procs:
            p.terminate()
            p.wait(timeout=10)
        for f in logs:
            f.close()
    total = sum(len(v) for v in real.times.values())
    print(
        f"{args.students} students x {args.attempts} attempts of Module 202 (25 questions), think {lo}-{hi} ms, "
        f"arriving over {args.ramp_s:g} s, servers on cpus {args.cpus or 'all'} of {os.cpu_count()}, SQLite"
    )
    print(f"  {total} app requests in {elapsed:.1f} s ({total / elapsed:.0f}/s)")
    for name, values in (
        ("bare route", bare.times.get("bare route", [])),
        *((k, real.times.get(k, [])) for k in ("answer save", "submit", "start")),
    ):
        if values:
            print(report(name, values))
    print(f"  errors: {len(real.errors) + len(bare.errors)}")
    for line in (real.errors + bare.errors)[:10]:
        print(f"    {line}")
    if real.errors or bare.errors:
        print(f"  server logs kept in {data}")
        return 1
    shutil.rmtree(data, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
