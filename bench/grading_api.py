"""Click-to-verdict latency through the HTTP API, with `ringlab serve` and its embedded worker.

Starts `ringlab serve` on a fresh SQLite database and a free port (so the embedded worker
grades), registers a user through the API, submits N correct ring all-reduce solutions one
after another (each as soon as the previous verdict is in, or ``--every`` seconds apart), polls
each until graded, and prints the median and p90 latency from POST to verdict, the throughput, and a cold
``torch.multiprocessing.spawn`` of the same checks at the same world size, measured in the
same run.

By default the lab is graded with 4 ranks: the server runs on a copy of content/ whose
ring-allreduce lab lists ``world_sizes: [4]``. ``--world-sizes 2,3,4`` grades the lab as
shipped (three groups of ranks, one after another), against a cold run of each size.

    .venv/bin/python bench/grading_api.py [-n 30] [--cold 3] [--pool 2] [--poll 0.05] [--world-sizes 4] [--every 0]

``--every 2`` submits at 30 a minute (the throughput target) instead of back to back, and so
measures the latency a student sees at that load rather than at saturation.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._server import free_port, wait_ready
from bench.grading import CONTENT, LAB, measure_cold, percentile

REPO = Path(__file__).resolve().parents[1]


def call(base: str, method: str, path: str, body: Any = None, token: str | None = None) -> tuple[int, Any]:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(base + path, data=data, method=method)
    request.add_header("content-type", "application/json")
    if token:
        request.add_header("authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"null")


def grade_once(base: str, token: str, code: str, poll: float, lab: str = LAB) -> tuple[float, dict[str, Any]]:
    """Submit ``code`` to ``lab`` and poll until it is graded: (seconds from POST to verdict, the submission)."""
    started = time.perf_counter()
    status, created = call(base, "POST", f"/api/v1/labs/{lab}/submissions", {"code": code}, token)
    if status != 202:
        raise SystemExit(f"{lab}: submitting failed: {status} {created}")
    while True:
        _, body = call(base, "GET", f"/api/v1/submissions/{created['id']}", token=token)
        if body["status"] not in ("queued", "running"):
            return time.perf_counter() - started, body
        time.sleep(poll)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", type=int, default=30, help="submissions (default 30)")
    parser.add_argument("--cold", type=int, default=3, help="cold mp.spawn runs (default 3)")
    parser.add_argument("--pool", type=int, default=2, help="warm sandboxes in the worker (default 2)")
    parser.add_argument("--poll", type=float, default=0.05, help="seconds between result polls (default 0.05)")
    parser.add_argument("--world-sizes", default="4", help="world sizes the lab is graded at (default 4)")
    parser.add_argument("--every", type=float, default=0.0,
                        help="seconds from one submission to the next (default 0: back to back)")  # fmt: skip
    args = parser.parse_args()
    sizes = [int(n) for n in args.world_sizes.split(",")]
    code = (CONTENT / LAB / "solution.py").read_text()  # the bench only: never served

    with tempfile.TemporaryDirectory(prefix="ringlab-bench-") as tmp:
        content = Path(tmp) / "content"
        shutil.copytree(CONTENT.parent, content)
        lab_yaml = content / "labs" / LAB / "lab.yaml"
        text = lab_yaml.read_text()
        assert "world_sizes: [2, 3, 4]" in text, "the lab's world sizes moved: update this bench"
        lab_yaml.write_text(text.replace("world_sizes: [2, 3, 4]", f"world_sizes: {sizes}"))
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
        env.update(
            RINGLAB_DATA_DIR=tmp,
            RINGLAB_CONTENT_DIR=str(content),
            RINGLAB_EMBEDDED_WORKER="true",
            RINGLAB_LAB_SUBMIT_LIMIT=str(args.n + 10),
            RINGLAB_WORKER_POOL_SIZE=str(args.pool),
        )
        log = Path(tmp) / "server.log"
        with open(log, "w") as out:
            proc = subprocess.Popen([sys.executable, "-m", "app", "serve", "--port", str(port)], cwd=REPO, env=env,
                                    stdout=out, stderr=out)  # fmt: skip
            try:
                wait_ready(base + "/healthz", proc, log)
                user = {"username": "bench", "password": "a-long-bench-password"}
                call(base, "POST", "/api/v1/auth/register", user)
                token = call(base, "POST", "/api/v1/auth/token", user)[1]["access_token"]
                first, body = grade_once(base, token, code, args.poll)  # warms the worker (torch, checks)
                if body["status"] != "graded" or body["score"] != body["max_score"]:
                    raise SystemExit(f"the reference solution was not graded in full: {body}")
                time.sleep(3)  # let the warm pool refill
                latencies = []
                t0 = time.perf_counter()
                for _ in range(args.n):
                    latency, body = grade_once(base, token, code, args.poll)
                    if body["score"] != body["max_score"]:
                        raise SystemExit(f"a reference solution scored {body['score']}: {body['verdict']}")
                    latencies.append(latency)
                    time.sleep(max(0.0, args.every - latency))
                total = time.perf_counter() - t0
            finally:
                proc.terminate()
                proc.wait(timeout=30)
    # A cold run of every size, one after another, as the warm path grades them.
    runs = [measure_cold(code, n, args.cold) for n in sizes]
    cold = [sum(times) for times in zip(*runs, strict=True)]
    median, cold_median = statistics.median(latencies), statistics.median(cold)
    ranks = " then ".join(str(n) for n in sizes)
    print(f"lab {LAB} graded with {ranks} ranks, via HTTP API + embedded worker, {os.cpu_count()} CPUs")
    print(f"first submission (worker warming up): {first:.3f} s")
    pace = f"one every {args.every:g} s" if args.every else "back to back"
    print(
        f"click-to-verdict over {args.n}, {pace}: median {median:.3f} s  p90 {percentile(latencies, 0.9):.3f} s  "
        f"min {min(latencies):.3f} s  max {max(latencies):.3f} s  ({median / cold_median:.1%} of cold)"
    )
    print(f"cold mp.spawn of the same checks ({ranks} ranks): median {cold_median:.3f} s over {len(cold)} runs")
    print(f"throughput: {args.n / total * 60:.1f} graded submissions per minute")


if __name__ == "__main__":
    main()
