"""Rate-and-next-card round trips: 50 concurrent students against uvicorn, next to a bare route.

Starts, on loopback only, the app as `ringlab serve` runs it (a temporary SQLite data
directory, migrated and content-synced) and a bare FastAPI app under the same uvicorn
settings. A round trip is what the review page does per card: rate the card the queue
gave (POST /api/v1/reviews), then ask for the next one (GET /api/v1/decks/{deck}/queue);
the bare app answers the same two requests with constants. Two phases, each on both
servers in the same run:

- throughput: every student sends its next round trip as soon as the last one returns
  (no think time): round trips per second, app against bare. At saturation the p50/p99
  are queueing time (50 requests in line), for the bare route too.
- latency: the same number of students at a student's pace (a think time between
  cards, uniform in --think-ms): p50/p99 of a round trip under that load.

    .venv/bin/python bench/flashcards.py [--students 50] [--rounds 30] [--think-ms 1000-3000] [--workers 1]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench._server import free_port, make_students, tree_cpu_s, wait_ready

REPO = Path(__file__).resolve().parents[1]
DECK = "mire-dis-train"


def bare_app():  # type: ignore[no-untyped-def]
    """The yardstick: the same two requests, answered with constants (sync routes, like the app's)."""
    from fastapi import FastAPI

    app = FastAPI()

    @app.post("/bare")
    def rate(body: dict) -> dict:  # type: ignore[type-arg]
        return {"card_id": body.get("card_id"), "state": "learning", "due": None, "interval_days": 0}

    @app.get("/bare")
    def queue() -> dict:  # type: ignore[type-arg]
        return {"card": {"id": "mdt-001", "topic": "t", "front": "f"}, "counts": {"new": 1, "learning": 0, "review": 0}}

    @app.get("/healthz")
    def health() -> dict:  # type: ignore[type-arg]
        return {"status": "ok"}

    return app


class Tally:
    def __init__(self) -> None:
        self.times: list[float] = []
        self.errors: list[str] = []
        self.wall = 0.0
        self.server_cpu = 0.0  # CPU seconds the server's processes used during the phase
        self.client_cpu = 0.0  # and this load generator

    @property
    def rate(self) -> float:
        return len(self.times) / self.wall if self.wall else 0.0

    def line(self, name: str) -> str:
        ordered = sorted(self.times) or [0.0]
        p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
        return (f"  {name:<26} {len(self.times):>5} round trips  p50 {statistics.median(ordered) * 1000:7.1f} ms  "
                f"p99 {p99 * 1000:7.1f} ms  {self.rate:6.1f}/s  errors {len(self.errors)}\n{'':30}"
                f"CPU ms/round trip: server {self.server_cpu / max(1, len(self.times)) * 1000:5.2f} "
                f"client {self.client_cpu / max(1, len(self.times)) * 1000:5.2f}")  # fmt: skip


RoundTrip = Callable[[httpx.AsyncClient, int, random.Random], Awaitable[bool]]


def drive(server: subprocess.Popen[bytes], port: int, students: int, rounds: int, think: tuple[int, int],
          trip: RoundTrip) -> Tally:  # fmt: skip
    before, mine = tree_cpu_s(server.pid), time.process_time()
    tally = asyncio.run(_drive(f"http://127.0.0.1:{port}", students, rounds, think, trip))
    tally.server_cpu = tree_cpu_s(server.pid) - before
    tally.client_cpu = time.process_time() - mine
    return tally


async def _drive(base: str, students: int, rounds: int, think: tuple[int, int], trip: RoundTrip) -> Tally:
    """``students`` concurrent loops of ``rounds`` round trips, ``think`` ms apart (0-0: back to back)."""
    tally = Tally()

    async def student(i: int) -> None:
        # A client (one keep-alive connection) per student, as a browser tab has: one shared pool of 50
        # costs httpx several times more CPU per request, and this load generator shares the machine.
        async with httpx.AsyncClient(base_url=base, timeout=30) as client:
            await studies(i, client)

    async def studies(i: int, client: httpx.AsyncClient) -> None:
        rng = random.Random(i)
        if think[1]:
            await asyncio.sleep(rng.uniform(0, think[1]) / 1000)  # arrive spread out
        for _ in range(rounds):
            started = time.perf_counter()
            try:
                more = await trip(client, i, rng)
            except (httpx.HTTPError, AssertionError) as exc:
                tally.errors.append(f"{type(exc).__name__}: {exc}")
                return
            tally.times.append(time.perf_counter() - started)
            if not more:
                return
            if think[1]:
                await asyncio.sleep(rng.uniform(*think) / 1000)

    began = time.perf_counter()
    await asyncio.gather(*(student(i) for i in range(students)))
    tally.wall = time.perf_counter() - began
    return tally


def app_trip(tokens: list[str]) -> RoundTrip:
    cards: dict[int, tuple[str, int] | None] = {}

    def shown(body: dict[str, Any]) -> tuple[str, int] | None:
        card = body["card"]
        return (card["id"], card["version"]) if card else None

    async def trip(client: httpx.AsyncClient, i: int, rng: random.Random) -> bool:
        auth = {"Authorization": f"Bearer {tokens[i]}"}
        if i not in cards:
            first = await client.get(f"/api/v1/decks/{DECK}/queue", headers=auth)
            assert first.status_code == 200, first.text[:200]
            cards[i] = shown(first.json())
        card = cards[i]
        if card is None:
            return False
        body = {"card_id": card[0], "version": card[1], "rating": rng.randint(1, 5), "duration_ms": 2000,
                "review_id": uuid.uuid4().hex}  # fmt: skip
        rated = await client.post("/api/v1/reviews", json=body, headers=auth)
        assert rated.status_code == 200, f"POST /api/v1/reviews: {rated.status_code} {rated.text[:200]}"
        nxt = await client.get(f"/api/v1/decks/{DECK}/queue", headers=auth)
        assert nxt.status_code == 200, f"GET queue: {nxt.status_code} {nxt.text[:200]}"
        cards[i] = shown(nxt.json())
        return True

    return trip


async def bare_trip(client: httpx.AsyncClient, i: int, rng: random.Random) -> bool:
    rated = await client.post("/bare", json={"card_id": "mdt-001", "rating": rng.randint(1, 5)})
    nxt = await client.get("/bare")
    assert rated.status_code == nxt.status_code == 200, "bare route failed"
    return True


def start(command: list[str], env: dict[str, str], log: Path, port: int) -> subprocess.Popen[bytes]:
    with log.open("w") as out:
        proc = subprocess.Popen(command, cwd=REPO, env=env, stdout=out, stderr=out)
    wait_ready(f"http://127.0.0.1:{port}/healthz", proc, log)
    return proc


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--students", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=30, help="round trips per student and phase")
    parser.add_argument("--think-ms", default="1000-3000", help="latency phase: pause between cards, lo-hi")
    parser.add_argument("--workers", type=int, default=1, help="uvicorn worker processes, for both servers")
    parser.add_argument("--serve-bare", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_bare:
        import uvicorn

        # The same uvicorn settings as `ringlab serve` (access log included).
        uvicorn.run(
            "bench.flashcards:bare_app", factory=True, host="127.0.0.1", port=args.serve_bare,
            workers=args.workers, timeout_keep_alive=30,
        )  # fmt: skip
        return 0
    lo, hi = (int(x) for x in args.think_ms.split("-"))
    think = (lo, hi)
    with tempfile.TemporaryDirectory(prefix="ringlab-bench-") as tmp:
        data = Path(tmp)
        env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"} | {"RINGLAB_DATA_DIR": str(data)}
        run = [sys.executable, "-m", "app"]
        subprocess.run([*run, "db", "upgrade"], cwd=REPO, env=env, check=True, capture_output=True)
        subprocess.run([*run, "content", "sync"], cwd=REPO, env=env, check=True, capture_output=True)
        tokens = make_students(data / "ringlab.sqlite3", 2 * args.students)
        app_port, bare_port = free_port(), free_port()
        app = start([*run, "serve", "--port", str(app_port), "--workers", str(args.workers)], env,
                    data / "app.log", app_port)  # fmt: skip
        bare_cmd = [sys.executable, "-m", "bench.flashcards", "--serve-bare", str(bare_port), "--workers",
                    str(args.workers)]  # fmt: skip
        bare = start(bare_cmd, env, data / "bare.log", bare_port)
        n, rounds = args.students, args.rounds
        try:
            b_fast = drive(bare, bare_port, n, rounds, (0, 0), bare_trip)
            a_fast = drive(app, app_port, n, rounds, (0, 0), app_trip(tokens[:n]))
            b_slow = drive(bare, bare_port, n, rounds, think, bare_trip)
            a_slow = drive(app, app_port, n, rounds, think, app_trip(tokens[n:]))
        finally:
            for proc in (app, bare):
                proc.terminate()
                proc.wait(timeout=20)
        errors = a_fast.errors + a_slow.errors + b_fast.errors + b_slow.errors
        print(f"{n} students, {rounds} round trips each per phase, {os.cpu_count()} CPUs, SQLite, "
              f"{args.workers} uvicorn worker(s) per server")  # fmt: skip
        print("throughput (no think time)")
        print(b_fast.line("bare FastAPI route"))
        print(a_fast.line("rate + next card (API)"))
        print(f"latency (think {think[0]}-{think[1]} ms between cards)")
        print(b_slow.line("bare FastAPI route"))
        print(a_slow.line("rate + next card (API)"))
        ratio = a_fast.rate / b_fast.rate if b_fast.rate else 0.0
        ordered = sorted(a_slow.times) or [0.0]
        p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))] * 1000
        print(f"throughput ratio {ratio:.2f} (target >= 0.50); paced p99 {p99:.1f} ms (target < 100); "
              f"errors {len(errors)} (target 0)")  # fmt: skip
        for error in errors[:5]:
            print("   ", error)
        if errors:
            print("app log tail:\n" + (data / "app.log").read_text()[-2000:])
        return 1 if errors else 0


if __name__ == "__main__":
    raise SystemExit(main())
