"""A fresh clone's first test run passes: without the seed documents, the tests that compare
content with them skip and say why (CI has them in ../shared/seeds)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TRACKED = ("app", "labs", "content", "migrations", "static", "templates", "tests", "pyproject.toml", "alembic.ini")


def test_seed_tests_skip_with_a_reason_where_the_seeds_are_not(tmp_path: Path) -> None:
    clone = tmp_path / "ringlab"  # nothing beside it: no ../shared/seeds
    for name in TRACKED:
        source = REPO / name
        if source.is_dir():
            shutil.copytree(source, clone / name, ignore=shutil.ignore_patterns("__pycache__", "vendor"))
        else:
            shutil.copy2(source, clone / name)
    env = {k: v for k, v in os.environ.items() if k != "RINGLAB_SEEDS_DIR"} | {"RINGLAB_TEST_BACKENDS": "sqlite"}
    seed_tests = sorted(str(p.relative_to(REPO)) for p in (REPO / "tests" / "content").glob("test_seed_*.py"))
    command = [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", *seed_tests]
    done = subprocess.run(command, cwd=clone, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "error" not in done.stdout.splitlines()[-1]
    assert "skipped" in done.stdout.splitlines()[-1]
    assert f"seed documents not found at {tmp_path / 'shared' / 'seeds'} (set RINGLAB_SEEDS_DIR)" in done.stdout
