"""How long `ringlab content check` takes on the whole content tree.

Runs the real command as a new process (what an author waits for) and the
loader in-process (the validation alone), and prints median and p90.

    .venv/bin/python bench/content_check.py [--runs 15]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TARGET_S = 0.5


def quantiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return statistics.median(ordered), ordered[min(len(ordered) - 1, round(0.9 * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    ringlab = REPO / ".venv" / "bin" / "ringlab"
    command = [str(ringlab)] if ringlab.exists() else [sys.executable, "-m", "app"]

    # As an author's Python runs: writing its bytecode cache (a PYTHONDONTWRITEBYTECODE here would make every
    # run compile again whatever changed since the cache was last written).
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    cli: list[float] = []
    for _ in range(args.runs):
        start = time.perf_counter()
        done = subprocess.run([*command, "content", "check"], cwd=REPO, capture_output=True, text=True, env=env)
        cli.append(time.perf_counter() - start)
        if done.returncode != 0:
            sys.exit(f"content check failed:\n{done.stderr}")

    sys.path.insert(0, str(REPO))
    from app.content.loader import load_tree

    inproc: list[float] = []
    for _ in range(args.runs):
        start = time.perf_counter()
        load_tree(REPO / "content")
        inproc.append(time.perf_counter() - start)

    print(done.stdout.strip())
    med, p90 = quantiles(cli)
    print(f"ringlab content check (new process): median {med:.3f} s, p90 {p90:.3f} s over {args.runs} runs")
    med_i, p90_i = quantiles(inproc)
    print(f"load_tree in-process (validation only): median {med_i:.3f} s, p90 {p90_i:.3f} s")
    print(f"target: under {TARGET_S} s -> {'met' if med < TARGET_S else 'NOT met'}")


if __name__ == "__main__":
    main()
