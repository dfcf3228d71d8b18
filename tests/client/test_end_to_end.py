"""The real `ringlab` client against a real server and its embedded grading worker.

The client runs as a subprocess in an environment where `import torch` fails (and leaves a mark
if anything tries), signs in as a new student, fetches ring-allreduce, submits the reference
solution (exit 0, every check printed) and the starter (exit 1); a wrong token and a server that
is down each get one clear line and exit 2, never a traceback.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from labs.spec import load_labs
from tests.browser.conftest import _free_port, serve
from tests.conftest import CONTENT_DIR

RINGLAB = Path(sys.executable).with_name("ringlab")
PASSWORD = "a-long-password"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    # Not niced: on a busy test machine a niced worker's cold ranks can miss the lab's time limit.
    with serve(tmp_path_factory.mktemp("client-server"), RINGLAB_WORKER_NICE="0") as base:
        yield base


class Client:
    """`ringlab` as a student runs it: own home and config folder, and no torch to import."""

    def __init__(self, root: Path) -> None:
        self.cwd = root / "work"
        self.config = root / "config"
        self.torch_mark = root / "torch-was-imported"
        blocker = root / "no-torch"
        for folder in (self.cwd, self.config, blocker):
            folder.mkdir()
        (blocker / "torch.py").write_text(
            f"open({str(self.torch_mark)!r}, 'w').close()\nraise ImportError('the client must not import torch')\n"
        )
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("RINGLAB_") and k != "DATABASE_URL"}
        self.env.update(PYTHONPATH=str(blocker), XDG_CONFIG_HOME=str(self.config), HOME=str(root))

    def __call__(self, *args: str, stdin: str = "", **env: str) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [str(RINGLAB), *args], cwd=self.cwd, env={**self.env, **env}, input=stdin, capture_output=True,
            text=True, timeout=300, start_new_session=True,  # no terminal: the password prompt reads stdin
        )  # fmt: skip
        assert "Traceback" not in done.stderr, done.stderr
        return done


def register(base: str, username: str) -> None:
    body = json.dumps({"username": username, "password": PASSWORD}).encode()
    request = urllib.request.Request(
        base + "/api/v1/auth/register", data=body, headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        assert response.status == 201


def test_a_student_fetches_and_submits_a_lab_from_the_terminal(server: str, tmp_path: Path) -> None:
    ringlab = Client(tmp_path)
    register(server, "terminal_ada")

    not_yet = ringlab("labs")
    assert not_yet.returncode == 2 and "run ringlab login --server URL" in not_yet.stderr

    login = ringlab("login", "--server", server + "/", "--username", "terminal_ada", stdin=PASSWORD + "\n")
    assert login.returncode == 0, login.stderr
    assert f"signed in to {server} as terminal_ada" in login.stdout
    config = tmp_path / "config" / "ringlab" / "client.json"
    assert stat.S_IMODE(config.stat().st_mode) == 0o600
    assert json.loads(config.read_text())["server"] == server

    listed = ringlab("labs")
    assert listed.returncode == 0, listed.stderr
    ring_row = next(line for line in listed.stdout.splitlines() if line.startswith("ring-allreduce "))
    assert "Ring all-reduce" in ring_row and "2, 3, 4" in ring_row and ring_row.endswith("-")

    fetched = ringlab("fetch", "ring-allreduce")
    assert fetched.returncode == 0, fetched.stderr
    lab_dir = ringlab.cwd / "ring-allreduce"
    source = CONTENT_DIR / "labs" / "ring-allreduce"
    assert (lab_dir / "starter.py").read_text() == (source / "starter.py").read_text()
    assert (lab_dir / "statement.md").read_text() == (source / "statement.md").read_text()
    assert sorted(p.name for p in lab_dir.iterdir()) == ["starter.py", "statement.md"]  # no answer key
    again = ringlab("fetch", "ring-allreduce")
    assert again.returncode == 2 and "not overwritten (--force" in again.stderr
    assert ringlab("fetch", "ring-allreduce", "--force").returncode == 0

    with_driver = next(lab for lab in load_labs(CONTENT_DIR / "labs").values() if lab.spec.public_files)
    assert ringlab("fetch", with_driver.spec.id, "driven").returncode == 0
    for name in with_driver.spec.public_files:
        assert (ringlab.cwd / "driven" / name).read_text() == with_driver.public_path(name).read_text()

    (ringlab.cwd / "mine.py").write_text((source / "solution.py").read_text())
    full = ringlab("submit", "ring-allreduce", "mine.py")
    assert full.returncode == 0, full.stdout + full.stderr
    for spec in load_labs(CONTENT_DIR / "labs")["ring-allreduce"].spec.checks:
        assert f"PASS  {f'{spec.points}/{spec.points}':>5}  {spec.title}" in full.stdout
    assert "Total: 10/10" in full.stdout and "Full marks." in full.stdout

    starter = ringlab("submit", "ring-allreduce", "ring-allreduce/starter.py")
    assert starter.returncode == 1, starter.stdout + starter.stderr
    assert "Total: 0/10" in starter.stdout and "FAIL" in starter.stdout

    best = ringlab("labs")
    assert next(line for line in best.stdout.splitlines() if line.startswith("ring-allreduce ")).endswith("10/10")

    refused = ringlab("labs", RINGLAB_TOKEN="not-a-real-token")
    assert refused.returncode == 2
    assert refused.stderr.strip() == "error: the server refused the token; run ringlab login"

    down = f"http://127.0.0.1:{_free_port()}"
    unreachable = ringlab("submit", "ring-allreduce", "mine.py", RINGLAB_SERVER=down)
    assert unreachable.returncode == 2 and f"could not reach {down}/api/v1/labs/ring-allreduce/submissions" in (
        unreachable.stderr
    )
    missing = ringlab("submit", "ring-allreduce", "nope.py")
    assert missing.returncode == 2 and "cannot read nope.py" in missing.stderr

    assert not ringlab.torch_mark.exists(), "the client imported torch"
