"""Every lab's reference solution, graded warm through the HTTP API and the worker, next to a cold run.

Starts ``ringlab serve`` (SQLite, embedded worker) on a copy of ``content/`` and a free
port, registers a student through the API, and for each lab: submits its reference
solution once to warm the worker, then ``-n`` times back to back (each as soon as the
previous verdict is in), polling each until graded. Prints per lab the median and p90
click-to-verdict time (all the lab's world sizes and phases: from the POST to the verdict the server
recorded, its ``finished_at``), the median a client saw polling every ``--poll`` seconds, next to a cold
``torch.multiprocessing.spawn`` doing the same work in the same run: for each group of
ranks, fresh processes that import torch, join a gloo group, run the same calls (the
lab's driver, or the student function) on the same inputs and check the results.

The recorded time does not depend on how often the bench polls; polling often does slow the grading
on a small machine (each poll is a request the web process answers beside the worker: every 20 ms
took a quarter of a 2-core machine), so the default is every 0.25 s. The lab page polls every 0.5 s
while a submission runs (``poll_after_s``).

    .venv/bin/python bench/labs.py [-n 10] [--cold 2] [--pool 2] [--labs ddp-from-scratch,zero-1]
"""

from __future__ import annotations

import argparse
import io
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._server import free_port, wait_ready
from bench.grading import percentile
from bench.grading_api import call, grade_once
from labs.host.prove import time_target

REPO = Path(__file__).resolve().parents[1]
CONTENT = REPO / "content"


def _cold_rank(
    rank: int,
    world_size: int,
    store: str,
    folder: str,
    code: str,
    blob: str,
    shared: str,
    ports: list[int] | None = None,
) -> None:
    import torch
    import torch.distributed as dist

    from labs.rank import trees

    torch.set_num_threads(1)
    os.environ["RINGLAB_SHARED_DIR"] = shared
    sys.path.insert(0, folder)  # the lab's public driver, as the ranks import it
    if ports:  # a script lab: torchrun's variables, rank 0 hosting the store as under a plain launcher
        from labs.rank.script import Script, torchrun_env

        os.environ.update(torchrun_env(rank, world_size, ports[0]))
        os.environ.pop("TORCHELASTIC_USE_AGENT_STORE")
        import driver as launcher

        for port, (name, _, _, inputs, *_) in zip(ports, torch.load(blob, weights_only=True), strict=True):
            os.environ["MASTER_PORT"] = str(port)  # each run a launch of its own: no store left from the last
            getattr(launcher, name)(Script(code), inputs[rank])
        return
    # A file store, as the engine's ranks meet (no port to race for, no TCP connect back-off).
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world_size)
    import types

    module = types.ModuleType("submission")
    sys.modules["submission"] = module
    exec(compile(code, "submission.py", "exec"), module.__dict__)
    for driver, fn, inplace, inputs, expected, tolerance in torch.load(blob, weights_only=True):
        args = inputs[rank]
        if driver:
            import driver as public

            out = getattr(public, driver)(module, args)
        else:
            returned = getattr(module, fn)(args)
            out = args if inplace else returned
        wrong = trees.compare(expected[rank], trees.plain(out), tolerance)
        if wrong:
            raise SystemExit(f"rank {rank}: {wrong}")
    dist.destroy_process_group()


def measure_cold(lab_id: str, code: str, repeats: int) -> list[float]:
    """Seconds per cold run of every group of ranks the lab grades, one after another."""
    import torch
    import torch.multiprocessing as mp

    from labs.host.grader import Grader, plan

    lab, checks = Grader.load_checks(CONTENT / "labs" / lab_id)
    times = []
    for repeat in range(repeats):
        groups = plan(checks, lab.spec.world_sizes, seed=repeat)
        with tempfile.TemporaryDirectory() as tmp:
            shared = os.path.join(tmp, "shared")
            os.mkdir(shared)
            public = os.path.join(tmp, "lab")  # the lab's public files as the ranks get them, shared helpers too
            os.mkdir(public)
            for name, text in lab.public_sources().items():
                Path(public, name).write_text(text, encoding="utf-8")
            started = time.perf_counter()
            for g in groups:
                blob = os.path.join(tmp, "cases.pt")
                buffer = io.BytesIO()
                torch.save([(c.driver, c.fn, c.inplace, c.inputs, c.expected, c.tolerance) for c in g.cases], buffer)
                Path(blob).write_bytes(buffer.getvalue())
                for attempt in (1, 2):
                    store = os.path.join(tmp, f"store-{id(g)}-{attempt}")  # a retry must not meet stale keys
                    ports = [free_port() for _ in g.cases] if lab.spec.entry == "script" else None
                    args = (g.world_size, store, public, code, blob, shared, ports)
                    attempt_started = time.perf_counter()
                    try:
                        mp.spawn(_cold_rank, args=args, nprocs=g.world_size, join=True)
                        break
                    except mp.ProcessExitedException as exc:
                        if g.expect_crash:  # a phase that kills a rank on purpose ends like this
                            break
                        # gloo now and then aborts a finished rank at exit ("terminate called without an
                        # active exception"); the run is timed again rather than the whole bench lost.
                        print(f"{lab_id}: cold run {attempt} failed ({exc}); timing it again", file=sys.stderr)
                        if attempt == 2:  # the cold path does not fit this lab: its figure is left out
                            print(f"{lab_id}: no cold figure ({exc})", file=sys.stderr)
                            return []
                        started += time.perf_counter() - attempt_started  # the failed attempt is not timed
            times.append(time.perf_counter() - started)
    return times


def recorded(posted: float, body: dict[str, Any]) -> float:
    """Seconds from the POST (wall clock) to the verdict the server recorded (``finished_at``, same machine)."""
    finished = datetime.fromisoformat(body["finished_at"].replace("Z", "+00:00"))
    return finished.timestamp() - posted


def target(lab: Any) -> float:
    """The lab's grading-time target, the one `ringlab lab test` warns about (``labs.host.prove.time_target``)."""
    return time_target(lab)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", type=int, default=10, help="graded submissions per lab (default 10)")
    parser.add_argument("--cold", type=int, default=2, help="cold mp.spawn runs per lab (default 2)")
    parser.add_argument("--pool", type=int, default=2, help="warm sandboxes in the worker (default 2)")
    parser.add_argument("--poll", type=float, default=0.25, help="seconds between result polls (default 0.25)")
    parser.add_argument(
        "--labs", default="", help="comma-separated lab ids (default: every CPU lab; name a GPU-only lab to time it)"
    )
    args = parser.parse_args()

    from labs.spec import load_labs

    labs = dict(sorted(load_labs(CONTENT / "labs").items()))
    chosen = [x for x in args.labs.split(",") if x] or [k for k, v in labs.items() if not v.spec.needs_gpu]
    rows = []
    with tempfile.TemporaryDirectory(prefix="ringlab-bench-") as tmp:
        content = Path(tmp) / "content"
        shutil.copytree(CONTENT, content)
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
        env.update(
            RINGLAB_DATA_DIR=tmp, RINGLAB_CONTENT_DIR=str(content), RINGLAB_EMBEDDED_WORKER="true",
            RINGLAB_LAB_SUBMIT_LIMIT=str(args.n + 10), RINGLAB_WORKER_POOL_SIZE=str(args.pool),
        )  # fmt: skip
        log = Path(tmp) / "server.log"
        with open(log, "w") as out:
            proc = subprocess.Popen([sys.executable, "-m", "app", "serve", "--port", str(port)], cwd=REPO, env=env,
                                    stdout=out, stderr=out)  # fmt: skip
            try:
                wait_ready(base + "/healthz", proc, log)
                user = {"username": "bench", "password": "a-long-bench-password"}
                call(base, "POST", "/api/v1/auth/register", user)
                token = call(base, "POST", "/api/v1/auth/token", user)[1]["access_token"]
                for lab_id in chosen:
                    code = (CONTENT / "labs" / lab_id / "solution.py").read_text()  # the bench only: never served
                    first, body = grade_once(base, token, code, args.poll, lab_id)
                    if body["status"] != "graded" or body["score"] != body["max_score"]:
                        raise SystemExit(f"{lab_id}: the reference solution was not graded in full: {body}")
                    time.sleep(2)  # let the warm pool refill
                    latencies, seen = [], []
                    for _ in range(args.n):
                        posted = time.time()
                        latency, body = grade_once(base, token, code, args.poll, lab_id)
                        if body["score"] != body["max_score"]:
                            raise SystemExit(f"{lab_id}: a reference solution scored {body['score']}")
                        latencies.append(recorded(posted, body))
                        seen.append(latency)
                    rows.append((lab_id, first, latencies, seen))
            finally:
                proc.terminate()
                proc.wait(timeout=30)
    print(f"{os.cpu_count()} CPUs, pool of {args.pool}, {args.n} graded submissions per lab, back to back")
    print(f"poll every {args.poll} s; median and p90: POST to the verdict recorded; seen: the median a poll saw it")
    header = f"{'lab':24} {'sizes':>10} {'first':>7} {'median':>7} {'p90':>7} {'seen':>7} {'cold':>7} {'of cold':>8}"
    print(header + "  target")
    for lab_id, first, latencies, seen in rows:
        # A GPU-only lab has no cold gloo counterpart here: its row compares with the target alone.
        cold_runs = 0 if labs[lab_id].spec.needs_gpu else args.cold
        colds = measure_cold(lab_id, (CONTENT / "labs" / lab_id / "solution.py").read_text(), cold_runs)
        cold = statistics.median(colds) if colds else float("nan")
        median = statistics.median(latencies)
        sizes = ",".join(map(str, labs[lab_id].spec.world_sizes))
        ok = "met" if median <= target(labs[lab_id]) and not median / cold > 0.15 else "MISSED"
        print(
            f"{lab_id:24} {sizes:>10} {first:>6.2f}s {median:>6.3f}s {percentile(latencies, 0.9):>6.3f}s "
            f"{statistics.median(seen):>6.3f}s {cold:>6.2f}s {median / cold:>8.1%}  {ok}",
            flush=True,
        )


if __name__ == "__main__":
    main()
