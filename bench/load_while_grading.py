"""Answer saves and ratings while the grading worker grades back to back, on one machine.

    .venv/bin/python bench/load_while_grading.py [--students 50] [--think-ms 500-1500] [--cpus 0,1] [--nice N]
                                                  [--no-grading]

Starts ``ringlab serve`` (SQLite, its embedded grading worker) on a fresh data directory,
pinned with its worker to ``--cpus`` (``taskset``), on a copy of content/ whose ring
all-reduce lab is graded with 4 ranks. Then, at the same time: one client submits the
reference ring all-reduce solution, polls it until graded and submits again, back to back;
and ``--students`` simulated students each start a Module 202 attempt and, per question,
save an answer (``PUT /api/v1/attempts/{id}/answers/{q}``) and rate the next flashcard
(``GET`` the queue, ``POST /api/v1/reviews``), with think time between requests. Prints
p50/p99 of answer save and rating, how many submissions were graded meanwhile, and errors.
``--nice`` sets RINGLAB_WORKER_NICE for the worker (default: the app's default);
``--no-grading`` measures the same students with an idle worker.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from bench._server import free_port, make_students, wait_ready  # noqa: E402
from bench.quizzes import Recorder, pct, report, think  # noqa: E402

LAB = "ring-allreduce"
DECK = "mire-dis-train"


async def student(client: httpx.AsyncClient, rec: Recorder, token: str, lo: int, hi: int, ramp: float) -> None:
    """Module 202 question by question: think, save an answer, think, rate the next flashcard."""
    await asyncio.sleep(random.uniform(0, ramp))
    auth = {"Authorization": f"Bearer {token}"}
    started = await rec.call("start", client.post("/api/v1/quizzes/module-202/attempts", headers=auth))
    if started is None:
        return
    attempt = started.json()
    for q in attempt["questions"]:
        await think(lo, hi)
        url = f"/api/v1/attempts/{attempt['id']}/answers/{q['id']}"
        await rec.call("answer save", client.put(url, json={"choice": random.choice("ABCD")}, headers=auth))
        await think(lo, hi)
        queue = await rec.call("next card", client.get(f"/api/v1/decks/{DECK}/queue", headers=auth))
        card = queue.json()["card"] if queue is not None else None
        if card:
            body = {"card_id": card["id"], "version": card["version"], "rating": random.randint(1, 5)}
            await rec.call("rating", client.post("/api/v1/reviews", json=body, headers=auth))


async def grade_back_to_back(client: httpx.AsyncClient, token: str, code: str, stop: asyncio.Event) -> list[float]:
    """Submit, poll until graded, submit again, until ``stop``; the click-to-verdict times."""
    auth = {"Authorization": f"Bearer {token}"}
    took = []
    while not stop.is_set():
        began = time.perf_counter()
        created = await client.post(f"/api/v1/labs/{LAB}/submissions", json={"code": code}, headers=auth)
        assert created.status_code == 202, created.text[:300]
        while True:
            await asyncio.sleep(0.05)
            body = (await client.get(f"/api/v1/submissions/{created.json()['id']}", headers=auth)).json()
            if body["status"] not in ("queued", "running"):
                break
        assert body["score"] == body["max_score"], f"the reference solution scored {body['score']}: {body['verdict']}"
        took.append(time.perf_counter() - began)
    return took


async def run(base: str, tokens: list[str], grader: str, code: str, args: argparse.Namespace) -> tuple:  # type: ignore[type-arg]
    lo, hi = (int(x) for x in args.think_ms.split("-"))
    rec, stop = Recorder(), asyncio.Event()
    limits = httpx.Limits(max_connections=200, max_keepalive_connections=200)
    async with httpx.AsyncClient(base_url=base, limits=limits, timeout=60) as client:
        grading = asyncio.create_task(grade_back_to_back(client, grader, code, stop)) if args.grading else None
        if grading is not None:
            await asyncio.sleep(2)  # grading is under way before the students arrive
        began = time.perf_counter()
        await asyncio.gather(*(student(client, rec, t, lo, hi, args.ramp_s) for t in tokens))
        elapsed = time.perf_counter() - began
        stop.set()
        graded = await grading if grading is not None else []
    return rec, graded, elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--students", type=int, default=50)
    parser.add_argument("--think-ms", default="500-1500", help="think time before each save and each rating, lo-hi")
    parser.add_argument("--ramp-s", type=float, default=5.0, help="students arrive spread over this many seconds")
    parser.add_argument("--cpus", default="0,1", help="cores for the server and its worker (taskset); '' for all")
    parser.add_argument("--nice", type=int, help="RINGLAB_WORKER_NICE for the worker (default: the app's)")
    parser.add_argument("--no-grading", dest="grading", action="store_false", help="students only, idle worker")
    args = parser.parse_args()
    pin = ["taskset", "-c", args.cpus] if args.cpus and shutil.which("taskset") else []
    data = Path(tempfile.mkdtemp(prefix="ringlab-bench-"))
    content = data / "content"
    shutil.copytree(REPO / "content", content)
    lab_yaml = content / "labs" / LAB / "lab.yaml"
    text = lab_yaml.read_text()
    assert "world_sizes: [2, 3, 4]" in text, "the lab's world sizes moved: update this bench"
    lab_yaml.write_text(text.replace("world_sizes: [2, 3, 4]", "world_sizes: [4]"))
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "RINGLAB_WORKER_NICE")}
    env |= {"RINGLAB_DATA_DIR": str(data), "RINGLAB_CONTENT_DIR": str(content), "RINGLAB_EMBEDDED_WORKER": "true",
            "RINGLAB_LAB_SUBMIT_LIMIT": "100000"}  # fmt: skip
    if args.nice is not None:
        env["RINGLAB_WORKER_NICE"] = str(args.nice)
    command = [sys.executable, "-m", "app"]
    subprocess.run([*command, "db", "upgrade"], cwd=REPO, env=env, check=True, capture_output=True)
    subprocess.run([*command, "content", "sync"], cwd=REPO, env=env, check=True, capture_output=True)
    tokens = make_students(data / "ringlab.sqlite3", args.students + 1)
    code = (REPO / "content" / "labs" / LAB / "solution.py").read_text()  # the bench only: never served
    port = free_port()
    log = open(data / "app.log", "w")  # noqa: SIM115 - open for the server's life
    proc = subprocess.Popen([*pin, *command, "serve", "--port", str(port)], cwd=REPO, env=env, stdout=log, stderr=log)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_ready(base + "/healthz", proc, data / "app.log")
        asyncio.run(_warm(base, tokens[-1], code))  # the worker's template imports torch, the pool fills
        rec, graded, elapsed = asyncio.run(run(base, tokens[:-1], tokens[-1], code, args))
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()
    nice = args.nice if args.nice is not None else "default"
    print(
        f"{args.students} students: 25 answer saves + 25 ratings each, think {args.think_ms} ms; server and worker "
        f"on cpus {args.cpus or 'all'} of {os.cpu_count()}, SQLite, worker nice {nice}"
    )
    if args.grading:
        median = sorted(graded)[len(graded) // 2] if graded else float("nan")
        print(f"  grading back to back (4 ranks): {len(graded)} graded in {elapsed:.1f} s "
              f"({len(graded) / elapsed * 60:.1f}/min), click-to-verdict median {median:.3f} s")  # fmt: skip
    else:
        print("  no grading (idle worker)")
    for name in ("answer save", "rating", "next card", "start"):
        if values := rec.times.get(name):
            print(report(name, values))
    print(f"  errors: {len(rec.errors)}")
    for line in rec.errors[:10]:
        print(f"    {line}")
    saves, ratings = rec.times.get("answer save", []), rec.times.get("rating", [])
    ok = not rec.errors and saves and ratings and max(pct(saves, 0.99), pct(ratings, 0.99)) <= 100
    print(f"  target (answer save and rating p99 <= 100 ms, no errors): {'met' if ok else 'NOT met'}")
    if rec.errors:
        print(f"  server log kept in {data}")
        return 1
    shutil.rmtree(data, ignore_errors=True)
    return 0


async def _warm(base: str, token: str, code: str) -> None:
    stop = asyncio.Event()
    async with httpx.AsyncClient(base_url=base, timeout=120) as client:
        task = asyncio.create_task(grade_back_to_back(client, token, code, stop))
        await asyncio.sleep(0.1)
        stop.set()  # the loop ends after its first grade
        await task
    await asyncio.sleep(3)  # the pool refills


if __name__ == "__main__":
    raise SystemExit(main())
