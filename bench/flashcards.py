"""Rate-and-next-card round trips: 50 concurrent students against uvicorn, next to a bare route.

Starts the app as `ringlab serve` runs it (a subprocess, a temporary SQLite data
directory, migrated and content-synced), registers the students through the API,
then each student rates the card the queue gives it (POST /api/v1/reviews) and
asks for the next one (GET /api/v1/decks/{deck}/queue), a fixed number of times.
A bare FastAPI app under the same uvicorn, in the same run, answers the same
pattern (POST then GET) as the yardstick. Loopback only; every loop is bounded.

    .venv/bin/python bench/flashcards.py [--students 50] [--rounds 30]
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

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench._server import free_port, wait_ready

REPO = Path(__file__).resolve().parents[1]
DECK = "mire-dis-train"
BARE_APP = """
import sys, uvicorn
from fastapi import FastAPI
app = FastAPI()
@app.post("/bare")
def rate(body: dict) -> dict:
    return {"card_id": body.get("card_id"), "state": "learning", "due": None, "interval_days": 0}
@app.get("/bare")
def queue() -> dict:
    return {"card": {"id": "mdt-001", "topic": "t", "front": "f"}, "counts": {"new": 1, "learning": 0, "review": 0}}
@app.get("/healthz")
def health() -> dict:
    return {"status": "ok"}
uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
"""


def start(command: list[str], env: dict[str, str], log: Path, port: int) -> subprocess.Popen[bytes]:
    with log.open("w") as out:
        proc = subprocess.Popen(command, cwd=REPO, env=env, stdout=out, stderr=out)
    wait_ready(f"http://127.0.0.1:{port}/healthz", proc, log)
    return proc


class Tally:
    def __init__(self) -> None:
        self.times: list[float] = []
        self.errors: list[str] = []

    def report(self, name: str, wall: float) -> float:
        ordered = sorted(self.times) or [0.0]
        p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
        rate = len(self.times) / wall if wall else 0.0
        print(f"{name:<28} {len(self.times):>6} round trips  p50 {statistics.median(ordered) * 1000:6.1f} ms  "
              f"p99 {p99 * 1000:6.1f} ms  {rate:7.1f} round trips/s  errors {len(self.errors)}")  # fmt: skip
        for error in self.errors[:5]:
            print("   ", error)
        return rate


async def run_clients(n: int, work: Callable[[int, httpx.AsyncClient], Awaitable[None]], base: str) -> float:
    # Drop idle connections before uvicorn does (5 s), so a request never lands on a closing one.
    limits = httpx.Limits(max_connections=n, max_keepalive_connections=n, keepalive_expiry=2.0)
    async with httpx.AsyncClient(base_url=base, limits=limits, timeout=30) as client:
        started = time.perf_counter()
        await asyncio.gather(*(work(i, client) for i in range(n)))
        return time.perf_counter() - started


async def register(n: int, base: str) -> list[dict[str, str]]:
    headers: list[dict[str, str]] = []
    async with httpx.AsyncClient(base_url=base, timeout=60) as client:
        for i in range(n):  # one at a time: password hashing is slow on purpose
            creds = {"username": f"bench{i:03d}", "password": "bench-password-1"}
            answer = await client.post("/api/v1/auth/register", json=creds)
            assert answer.status_code == 201, answer.text
            token = (await client.post("/api/v1/auth/token", json=creds)).json()["access_token"]
            headers.append({"Authorization": f"Bearer {token}"})
    return headers


async def bench_app(base: str, students: int, rounds: int) -> tuple[Tally, float]:
    auth = await register(students, base)
    tally = Tally()

    async def student(i: int, client: httpx.AsyncClient) -> None:
        rng = random.Random(i)
        first = await client.get(f"/api/v1/decks/{DECK}/queue", headers=auth[i])
        card = first.json()["card"] if first.status_code == 200 else None
        for _ in range(rounds):
            if card is None:
                return
            started = time.perf_counter()
            body = {
                "card_id": card["id"],
                "rating": rng.randint(1, 5),
                "duration_ms": 2000,
                "review_id": uuid.uuid4().hex,
            }
            try:
                rated = await client.post("/api/v1/reviews", json=body, headers=auth[i])
                nxt = await client.get(f"/api/v1/decks/{DECK}/queue", headers=auth[i])
            except httpx.HTTPError as exc:
                tally.errors.append(f"{type(exc).__name__}: {exc}")
                return
            tally.times.append(time.perf_counter() - started)
            for answer in (rated, nxt):
                if answer.status_code != 200:
                    tally.errors.append(
                        f"{answer.request.method} {answer.request.url.path}: {answer.status_code} {answer.text[:120]}"
                    )
            card = nxt.json()["card"] if nxt.status_code == 200 else None

    wall = await run_clients(students, student, base)
    return tally, wall


async def bench_bare(base: str, students: int, rounds: int) -> tuple[Tally, float]:
    tally = Tally()

    async def student(i: int, client: httpx.AsyncClient) -> None:
        for _ in range(rounds):
            started = time.perf_counter()
            try:
                rated = await client.post("/bare", json={"card_id": "mdt-001", "rating": 3})
                nxt = await client.get("/bare")
            except httpx.HTTPError as exc:
                tally.errors.append(f"{type(exc).__name__}: {exc}")
                return
            tally.times.append(time.perf_counter() - started)
            for answer in (rated, nxt):
                if answer.status_code != 200:
                    tally.errors.append(f"bare: {answer.status_code}")

    wall = await run_clients(students, student, base)
    return tally, wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--students", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=30)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ringlab-bench-") as tmp:
        data = Path(tmp)
        env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
        env |= {"RINGLAB_DATA_DIR": str(data), "RINGLAB_SIGNUP_LIMIT_PER_CLIENT": "100000",
                "RINGLAB_SIGNIN_LIMIT_PER_CLIENT": "100000"}  # fmt: skip
        app_port, bare_port = free_port(), free_port()
        app = start([sys.executable, "-m", "app", "serve", "--port", str(app_port)], env, data / "app.log", app_port)
        bare = start([sys.executable, "-c", BARE_APP, str(bare_port)], env, data / "bare.log", bare_port)
        try:
            cpus = os.cpu_count()
            print(f"{args.students} students x {args.rounds} rounds, {cpus} CPUs, SQLite, one uvicorn worker each")
            bare_tally, bare_wall = asyncio.run(bench_bare(f"http://127.0.0.1:{bare_port}", args.students, args.rounds))
            app_tally, app_wall = asyncio.run(bench_app(f"http://127.0.0.1:{app_port}", args.students, args.rounds))
        finally:
            for proc in (app, bare):
                proc.terminate()
                proc.wait(timeout=10)
        if app_tally.errors:
            print("app log tail:\n" + (data / "app.log").read_text()[-2000:])
        bare_rate = bare_tally.report("bare FastAPI route", bare_wall)
        app_rate = app_tally.report("rate + next card (API)", app_wall)
        print(f"throughput ratio {app_rate / bare_rate:.2f} (target >= 0.50); "
              f"errors {len(app_tally.errors)} (target 0)")  # fmt: skip


if __name__ == "__main__":
    main()
