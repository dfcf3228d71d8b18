"""A grading worker refuses a torch release the labs are not proven on (``app.labs.worker.torch_mismatch``)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from app.labs.worker import TORCH_SERIES, torch_mismatch

REPO = Path(__file__).resolve().parents[2]


def test_the_series_is_the_worker_extras_pin() -> None:
    pins = re.findall(r'"torch==([0-9.]+)"', (REPO / "pyproject.toml").read_text())
    assert pins and all(p.startswith(f"{TORCH_SERIES}.") for p in pins), pins


def test_the_pinned_release_and_its_builds_are_accepted() -> None:
    for version in (f"{TORCH_SERIES}.0", f"{TORCH_SERIES}.0+cpu", f"{TORCH_SERIES}.1+cu130", TORCH_SERIES):
        assert torch_mismatch(version) is None, version


def test_another_release_is_refused_with_what_to_do() -> None:
    for version in ("2.11.0+cu130", "2.14.1", "3.0.0", "2.1.3"):  # 2.1.3 shares a prefix with 2.13 as text
        problem = torch_mismatch(version, "2.13")
        assert problem is not None, version
        assert f"torch {version} is installed" in problem
        assert "torch==2.13.0" in problem and "RINGLAB_WORKER_ANY_TORCH=1" in problem


def test_a_worker_on_another_release_exits_before_grading(tmp_path: Path) -> None:
    """The real command, with the series it expects changed: it must refuse with the reason, exit 2."""
    code = (
        "import sys; import app.labs.worker as w; w.TORCH_SERIES = '1.0'; sys.exit(w.start(unsafe=False, pool_size=0))"
    )
    env = {"DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}", "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr[-2000:]
    assert "the labs are proven on torch 1.0" in done.stderr
