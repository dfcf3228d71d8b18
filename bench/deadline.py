"""A class at its deadline: students submitting labs all at once while others study, on PostgreSQL.

    .venv/bin/python bench/deadline.py [--students 200] [--window 60] [--labs a,b,...] [--workers 2] [--web 2]
                                       [--studying N] [--poll S] [--chart queue.svg] [--capacity]
                                       [--database-url URL] [--grading-cpus CPUS] [--quick]
    .venv/bin/python bench/deadline.py --capacity --rate R     (the capacity table alone, R graded/min/worker)

Starts a throwaway PostgreSQL server (the test suite's, Debian's ``postgresql``) unless
``--database-url`` names an empty database; migrates it, syncs content/, creates the students (an
API token each), starts ``ringlab serve --workers W`` (``--web`` web processes, the embedded worker
off) and ``--workers`` real ``ringlab worker`` processes. After a warm-up (each lab's reference,
as many at once as there are workers, left out of every figure):

- **the rush**: each student arrives at a random moment of ``--window`` seconds and submits two or
  three real solutions (a lab's reference or one of its mutants, half and half) to ``--labs``, one
  after another (one in flight per lab, as the app allows), polling each over the JSON API until its
  verdict as its pages do: each request held by the server (``?wait=``, its last ``long_poll_s``) until
  the status changes, asked again 0.25 s after each answer (``--poll S``: a plain poll every S seconds
  instead), and thinking 1-5 s before the next; meanwhile ``--studying`` other students take
  Module 202 and rate flashcards through the JSON API (the load generator: this one asyncio process, on
  aiohttp, which costs a twentieth of httpx's CPU per request: bench/_client.py);
- **back to back**, before the rush and after it: the same submissions (before: the rush's plan, each
  from an account of its own; after: the rush's own rows re-graded, with the web processes stopped),
  all queued at once, graded by the same workers. The rush is compared with the mean of the two: the
  machine's speed drifts within minutes, and two runs that bracket the rush cancel a steady drift.

With ``--grading-cpus`` (say ``1`` on a 2-CPU machine) the grading workers and their ranks run on
those CPUs alone and everything else on the others, as a course runs its workers on machines of their
own: the rush's rate against back to back then shows what the rush costs grading besides the CPU the
web takes (the database, the queue's claims and wake-ups). By default everything shares every CPU.

Prints submit -> verdict and each student's wait for their first verdict (p50/p95/max, from the
database's ``submitted_at`` and ``finished_at``), the queue depth every second as a chart
(``--chart PATH.svg`` writes it too), grades per minute from the first to the last second with jobs
waiting against back to back, web p50/p99 of the studying students' requests, and lost and double-graded submissions
(exit status 1 if any, or on errors). ``--capacity`` adds the table of workers needed for a p95
wait under a minute, from the measured per-worker rate (bench/_queueing.py).
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
import threading
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from sqlalchemy import func, select  # noqa: E402

from app.accounts.models import User  # noqa: E402
from app.content.service import sync_directory  # noqa: E402
from app.db import make_engine, make_sessionmaker  # noqa: E402
from app.labs.models import Submission  # noqa: E402
from app.migrate import upgrade  # noqa: E402
from bench import _cpu as cpu  # noqa: E402
from bench._client import Client  # noqa: E402
from bench._deadline_db import (  # noqa: E402
    audit,
    back_to_back,
    queued_at_once,
    sample_queue,
    verdicts_written,
    wait_for_workers,
    wait_graded,
)
from bench._deadline_report import Piece, Rush, Sent, summary  # noqa: E402
from bench._queueing import capacity_table  # noqa: E402
from bench._server import free_port, make_students, wait_ready  # noqa: E402
from bench.pg_workers import database  # noqa: E402
from bench.quizzes import Recorder, think  # noqa: E402
from labs.spec import load_lab, mutants  # noqa: E402

CONTENT = REPO / "content"
LABS = "memory-estimate,lamb,tiled-attention,ring-allreduce"  # fast CPU labs, one to three groups of ranks
QUIZ, DECK = "module-202", "mire-dis-train"
THINK_S = (1.0, 5.0)  # reading a verdict before the next submission
PAUSE_S = 0.25  # between a held poll's answer and the next, as the lab page waits
FIRST_HOLD_S = 10.0  # the first ask after submitting is held too, as the terminal client's is
STUDY_THINK_MS = (1000, 4000)  # between a studying student's requests


def pieces(labs: list[str]) -> dict[str, tuple[Piece, list[Piece]]]:
    """Each lab's reference and mutants, read from content/labs (the bench only: never served)."""
    known = sorted(p.name for p in (CONTENT / "labs").iterdir() if (p / "lab.yaml").is_file())
    found = {}
    for lab in labs:
        folder = CONTENT / "labs" / lab
        if lab not in known:
            raise SystemExit(f"--labs: there is no lab {lab!r} in content/labs; the labs are: {', '.join(known)}")
        if yaml.safe_load((folder / "lab.yaml").read_text()).get("needs_gpu"):
            raise SystemExit(f"--labs: {lab} needs a GPU; choose CPU labs (default: {LABS})")
        wrong = [Piece(lab, m.name, m.code) for m in mutants.load(load_lab(folder))]
        if not wrong:
            raise SystemExit(f"--labs: {lab} has no mutants/ to submit as wrong solutions")
        found[lab] = (Piece(lab, "solution", (folder / "solution.py").read_text()), wrong)
    return found


def plan(rng: random.Random, labs: dict[str, tuple[Piece, list[Piece]]]) -> list[Piece]:
    """Two or three submissions to labs drawn at random, each right or wrong with even odds."""
    chosen = []
    for _ in range(rng.choice((2, 3))):
        right, wrong = labs[rng.choice(sorted(labs))]
        chosen.append(right if rng.random() < 0.5 else rng.choice(wrong))
    return chosen


def schedule(args: argparse.Namespace) -> list[tuple[float, list[Piece]]]:
    """Each rushing student's arrival (seconds into the window) and what they submit, drawn from ``--seed``."""
    rng, labs = random.Random(args.seed), pieces(args.labs)
    arrivals = [rng.uniform(0, args.window) for _ in range(args.students)]
    return [(at, plan(rng, labs)) for at in arrivals]


async def submitter(
    client: Client,
    rush: Rush,
    student: int,
    token: str,
    todo: list[Piece],
    at: float,
    *,
    poll: float,
    max_wait: float,
) -> None:
    """Arrive at ``at`` (perf_counter), then submit each piece and poll until its verdict."""
    await asyncio.sleep(max(0.0, at - time.perf_counter()))
    auth = {"Authorization": f"Bearer {token}"}
    for n, piece in enumerate(todo):
        if n:
            await asyncio.sleep(random.uniform(*THINK_S))
        sent = Sent(student, piece)
        rush.sent.append(sent)
        began = time.perf_counter()
        url = f"/api/v1/labs/{piece.lab}/submissions"
        created = await rush.labs.call("submit", client.post(url, json={"code": piece.code}, headers=auth), ok=(202,))
        if created is None:
            continue
        sent.id = int(created.json()["id"])
        pause, hold = (poll, 0.0) if poll else (PAUSE_S, FIRST_HOLD_S)
        seen = "queued"  # the status last answered: the server holds on it without a first look
        while time.perf_counter() - began < max_wait:
            await asyncio.sleep(pause)
            held = f"?wait={hold:g}&seen={seen}" if hold else ""  # a long poll: answered when the status changes
            kind = "held poll" if hold else "poll"  # a held poll's time is its hold: not a web latency
            got = await rush.labs.call(kind, client.get(f"/api/v1/submissions/{sent.id}{held}", headers=auth))
            if got is None:
                pause, hold = 1.0, 0.0
                continue
            body = got.json()
            if body["status"] not in ("queued", "running"):
                sent.status, sent.seen_s = body["status"], time.perf_counter() - began
                break
            if poll:  # --poll: a plain poll every so often
                continue
            # As the pages do: held up to the server's long_poll_s, asked again after a short pause.
            pause, hold, seen = PAUSE_S, float(body.get("long_poll_s") or 0) or 0.0, body["status"]
            if not hold:
                pause = float(body.get("poll_after_s") or 1.0)


async def studier(client: Client, rec: Recorder, token: str, stop: asyncio.Event) -> None:
    """Module 202 question by question, rating the next flashcard after each answer, until ``stop``."""
    auth = {"Authorization": f"Bearer {token}"}
    await think(0, STUDY_THINK_MS[1])
    while not stop.is_set():
        started = await rec.call("quiz start", client.post(f"/api/v1/quizzes/{QUIZ}/attempts", headers=auth))
        if started is None:
            await asyncio.sleep(5)
            continue
        attempt = started.json()
        for q in attempt["questions"]:
            await think(*STUDY_THINK_MS)
            if stop.is_set():
                return
            choice = random.choice(q["options"])["key"]
            url = f"/api/v1/attempts/{attempt['id']}/answers/{q['id']}"
            await rec.call("answer save", client.put(url, json={"choice": choice}, headers=auth))
            await think(*STUDY_THINK_MS)
            queue = await rec.call("next card", client.get(f"/api/v1/decks/{DECK}/queue", headers=auth))
            card = queue.json().get("card") if queue is not None else None
            if card:
                body = {"card_id": card["id"], "version": card["version"], "rating": random.randint(1, 5)}
                await rec.call("rating", client.post("/api/v1/reviews", json=body, headers=auth))
        await rec.call("quiz submit", client.post(f"/api/v1/attempts/{attempt['id']}/submit", headers=auth))


async def run_rush(
    base: str, rush: Rush, tokens: list[str], studying: list[str], todo: list[tuple[float, list[Piece]]],
    args: argparse.Namespace,
) -> None:  # fmt: skip
    async with Client(base, connections=len(tokens) + len(studying) + 10) as client:
        stop = asyncio.Event()
        study = [asyncio.create_task(studier(client, rush.study, t, stop)) for t in studying]
        t0 = time.perf_counter()
        await asyncio.gather(
            *(
                submitter(client, rush, i, t, chosen, t0 + at, poll=args.poll, max_wait=args.max_wait)
                for i, (t, (at, chosen)) in enumerate(zip(tokens, todo, strict=True))
            )
        )
        stop.set()
        await asyncio.gather(*study)


async def warm_up(base: str, tokens: list[str], labs: list[str]) -> None:
    """Each lab's reference from every warm-up account at once (one account per worker), lab after lab:
    the workers' first gradings (their templates warming up) are not the rush's."""
    found, rush = pieces(labs), Rush()
    async with Client(base) as client:
        for lab in labs:
            right = [found[lab][0]]
            await asyncio.gather(*(submitter(client, rush, -1, t, right, 0.0, poll=0.2, max_wait=600) for t in tokens))
    failed = [f"{s.piece.lab}: {s.status}" for s in rush.sent if s.status != "graded"]
    if rush.labs.errors or failed:
        raise SystemExit(f"the warm-up failed: {rush.labs.errors[:3]} {failed[:5]}")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _postgres(url: str) -> str:
    """The SQLAlchemy URL of a PostgreSQL database (psycopg 3, as the app's settings read it)."""
    if url.startswith(("postgresql://", "postgres://")):
        return "postgresql+psycopg://" + url.split("://", 1)[1]
    if not url.startswith("postgresql"):
        raise SystemExit(f"--database-url must name a PostgreSQL database (postgresql://...), not {url.split(':')[0]}")
    return url


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--students", type=int, default=200, help="students submitting (default 200)")
    parser.add_argument("--window", type=float, default=60.0, help="seconds over which they arrive (default 60)")
    parser.add_argument("--labs", default=LABS, help=f"CPU labs to submit to, comma-separated (default {LABS})")
    parser.add_argument("--workers", type=int, default=2, help="grading workers (default 2)")
    parser.add_argument("--web", type=int, default=2, help="web processes (default 2)")
    parser.add_argument(
        "--studying", type=int, help="students answering quizzes and rating cards (default students/10)"
    )
    parser.add_argument(
        "--poll",
        type=float,
        default=0.0,
        help="seconds between a waiting student's polls (default: the server's poll_after_s, as its pages poll)",
    )
    parser.add_argument("--max-wait", type=float, default=1800.0, help="seconds a student waits for a verdict")
    parser.add_argument("--seed", type=int, default=27, help="who submits what, and when (default 27)")
    parser.add_argument("--chart", type=Path, help="write the queue depth over time to this .svg file")
    parser.add_argument("--capacity", action="store_true", help="print the capacity table from the measured rate")
    parser.add_argument("--rate", type=float, help="with --capacity: graded/min per worker; prints the table only")
    parser.add_argument("--database-url", help="an empty PostgreSQL database (default: a throwaway server)")
    parser.add_argument(
        "--grading-cpus",
        help="CPUs for the grading workers and their ranks alone, e.g. 1 or 2-3; the web processes, PostgreSQL "
        "and the load generator get the others (as a course runs workers on machines of their own). "
        "Default: everything shares every CPU",
    )
    parser.add_argument("--quick", action="store_true", help="a smoke run: 10 students over 10 s, 2 studying")
    args = parser.parse_args()
    if args.quick:
        args.students, args.window, args.studying = 10, 10.0, 2
    if args.studying is None:
        args.studying = max(2, args.students // 10)
    args.labs = [lab.strip() for lab in args.labs.split(",") if lab.strip()]
    for name in ("students", "workers", "web"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be at least 1")
    if args.window < 0 or args.poll < 0 or args.studying < 0:
        parser.error("--window, --poll and --studying cannot be negative")
    if args.rate is not None and (not args.capacity or args.rate <= 0):
        parser.error("--rate goes with --capacity and is graded submissions per minute per worker, above 0")
    if args.chart is not None and args.chart.suffix.lower() != ".svg":
        parser.error(f"--chart {args.chart}: only .svg charts are written")
    pieces(args.labs)  # unknown or GPU labs are refused before anything starts
    if args.database_url:
        args.database_url = _postgres(args.database_url)
    args.split = _split(parser, args.grading_cpus) if args.grading_cpus else None
    return args


def _split(parser: argparse.ArgumentParser, spec: str) -> tuple[set[int], set[int]]:
    """(the grading CPUs, the others) from ``--grading-cpus`` (``1``, ``0,2``, ``2-3``), both non-empty."""
    allowed = os.sched_getaffinity(0)
    try:
        chosen: set[int] = set()
        for part in spec.split(","):
            low, _, high = part.strip().partition("-")
            chosen |= set(range(int(low), int(high or low) + 1))
    except ValueError:
        parser.error(f"--grading-cpus {spec!r}: give CPU numbers, as 1 or 0,2 or 2-3")
    if not chosen or not chosen <= allowed or not allowed - chosen:
        parser.error(
            f"--grading-cpus {spec}: this process may use CPUs {sorted(allowed)}; name some of them for grading "
            "and leave at least one for the rest"
        )
    return chosen, allowed - chosen


def _on(cpus: set[int] | None) -> Any:
    """A ``preexec_fn`` that binds the child (and what it starts) to ``cpus``; None: no binding."""
    return None if cpus is None else (lambda: os.sched_setaffinity(0, cpus))


def main() -> int:
    args = parse()
    if args.rate is not None:
        print(
            f"workers for a p95 submit -> verdict under 60 s, at {args.rate:g} graded/min per worker "
            "(spread over the hour / all in its last 10 minutes; M/M/c):"
        )
        print("\n".join(capacity_table(args.rate)))
        return 0
    grading_cpus, other_cpus = args.split or (None, None)
    if other_cpus is not None:
        os.sched_setaffinity(0, other_cpus)  # this process and what it starts: PostgreSQL, the web processes
    tmp = Path(tempfile.mkdtemp(prefix="ringlab-deadline-"))
    with database(args.database_url, "ringlab_bench_deadline") as url, ExitStack() as stack:
        upgrade(url)
        engine = make_engine(url)
        stack.callback(engine.dispose)
        factory = make_sessionmaker(engine)
        sync_directory(CONTENT, factory)
        prefix = f"deadline{os.getpid()}-"
        tokens = make_students(url, args.students + args.studying + args.workers, prefix)
        todo = schedule(args)
        work = [(piece.lab, piece.code) for _, chosen in todo for piece in chosen]
        make_students(url, len(work), f"{prefix}first-")  # the back-to-back run before the rush: one job each
        rushing, studying, warming = (
            tokens[: args.students],
            tokens[args.students : -args.workers],
            tokens[-args.workers :],
        )
        with factory() as session:
            names = [f"{prefix}{i}" for i in range(args.students)]
            rush_users = list(session.scalars(select(User.id).where(User.username.in_(names))))
            first_names = [f"{prefix}first-{i}" for i in range(len(work))]
            found_first = {
                n: i for i, n in session.execute(select(User.id, User.username).where(User.username.in_(first_names)))
            }
            first_people = [(found_first[n], n) for n in first_names]
        env = {
            **os.environ,
            "DATABASE_URL": url,
            "RINGLAB_DATA_DIR": str(tmp),
            "RINGLAB_CONTENT_DIR": str(CONTENT),
            "RINGLAB_EMBEDDED_WORKER": "false",
            "RINGLAB_SYNC_CONTENT_ON_START": "false",
        }
        workers_log = stack.enter_context(open(tmp / "workers.log", "w"))
        workers = []
        for _ in range(args.workers):
            workers.append(
                subprocess.Popen(
                    [sys.executable, "-m", "app", "worker"],
                    cwd=REPO,
                    env=env,
                    stdout=workers_log,
                    stderr=workers_log,
                    preexec_fn=_on(grading_cpus),
                )
            )
            stack.callback(_stop, workers[-1])
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        web_log = stack.enter_context(open(tmp / "web.log", "w"))
        web = subprocess.Popen(
            [sys.executable, "-m", "app", "serve", "--port", str(port), "--workers", str(args.web)],
            cwd=REPO,
            env=env,
            stdout=web_log,
            stderr=web_log,
        )
        stack.callback(_stop, web)
        if not wait_for_workers(factory, args.workers):
            raise SystemExit(f"the grading workers did not start:\n{(tmp / 'workers.log').read_text()[-3000:]}")
        wait_ready(base + "/healthz", web, tmp / "web.log")
        asyncio.run(warm_up(base, warming, args.labs))
        time.sleep(3)  # the warm pools refill
        # The same submissions back to back before the rush as well as after it: this machine's speed
        # drifts within minutes, and the rush is compared with the two runs that bracket it.
        parts = {"grading workers": [w.pid for w in workers]}
        named = {"by_name": {"postgres": "PostgreSQL"}, "by_command": {"labs.host.template": "grading workers"}}
        cpu_before = cpu.usage(parts, **named)
        first = queued_at_once(factory, first_people, work, args.max_wait)
        cpu_first = cpu.between(cpu_before, cpu.usage(parts, **named))
        time.sleep(3)

        writes, stop = verdicts_written(factory), threading.Event()
        samples: list[tuple[float, int, int]] = []
        sampler = threading.Thread(target=sample_queue, args=(url, stop, samples), daemon=True)
        load = os.getloadavg()[0]
        sampler.start()
        rush = Rush(cpu_first=cpu_first)
        parts = {"grading workers": [w.pid for w in workers], "web processes": [web.pid]}
        cpu_before = cpu.usage(parts, **named)
        asyncio.run(run_rush(base, rush, rushing, studying, todo, args))
        rush.cpu = cpu.between(cpu_before, cpu.usage(parts, **named))
        ids = [s.id for s in rush.sent if s.id is not None]
        found = wait_graded(factory, ids, args.max_wait)
        stop.set()
        sampler.join()
        rush_audit = audit(found, ids, verdicts_written(factory) - writes)
        with factory() as session:
            stored = session.scalar(select(func.count()).where(Submission.user_id.in_(rush_users))) or 0
        _stop(web)
        parts = {"grading workers": [w.pid for w in workers]}
        cpu_before = cpu.usage(parts, **named)
        again, regraded, again_audit = back_to_back(factory, ids, args.max_wait)
        rush.cpu_again = cpu.between(cpu_before, cpu.usage(parts, **named))
    ok = summary(
        args, rush, found, samples, load, rush_audit, int(stored) - len(ids), (again, regraded, again_audit), first
    )
    if ok:
        shutil.rmtree(tmp, ignore_errors=True)
    else:
        print(f"  logs kept in {tmp}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
