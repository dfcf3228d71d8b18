"""``ringlab lab new``: straight out of the command, a lab passes the content check, is proven, and syncs.

As an author would: the commands run as processes on a temporary content tree (the repository's
content with the new labs added), one lab of each kind (functions, ``--driver``, ``--script``), and the
authoring guide's worked example (docs/examples/tree-broadcast, a ``--driver`` lab edited into a
binomial-tree broadcast) beside them, so the guide's example stays proven.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy.orm import Session

from app.content.loader import load_tree
from app.content.sync import sync_tree
from app.labs import catalog
from labs.host import scaffold
from tests.conftest import CONTENT_DIR

REPO = CONTENT_DIR.parent
KINDS = {"avg-functions": [], "avg-driver": ["--driver"], "avg-script": ["--script"]}
EXAMPLE = REPO / "docs" / "examples" / "tree-broadcast"


def ringlab(root: Path, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "RINGLAB_CONTENT_DIR": str(root)}
    return subprocess.run(
        [sys.executable, "-m", "app", *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout
    )


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The repository's content with one new lab of each kind, written by the command."""
    root = tmp_path_factory.mktemp("authoring") / "content"
    shutil.copytree(CONTENT_DIR, root, ignore=shutil.ignore_patterns("__pycache__"))
    for lab_id, flags in KINDS.items():
        title = f"Average ({lab_id})"
        # One size, not the default three, to keep the suite short: 3, as the traffic mutant shows from 3.
        args = ["--exercise", "ex-35-1", "--title", title, "--world-sizes", "3", *flags]
        done = ringlab(root, "lab", "new", lab_id, *args)
        assert done.returncode == 0, done.stderr
        assert f"wrote {root / 'labs' / lab_id / 'checks.py'}" in done.stdout
    shutil.copytree(EXAMPLE, root / "labs" / EXAMPLE.name)
    return root


def test_the_new_labs_pass_the_content_check_and_the_linters(root: Path) -> None:
    done = ringlab(root, "content", "check")
    assert done.returncode == 0, done.stderr
    labs = len(list(CONTENT_DIR.glob("labs/*/lab.yaml"))) + len(KINDS) + 1
    assert f"{labs} labs" in done.stdout, done.stdout
    folders = [str(root / "labs" / lab_id) for lab_id in [*KINDS, EXAMPLE.name]]
    config = str(REPO / "pyproject.toml")
    for command in (["check"], ["format", "--check"]):
        lint = subprocess.run(
            [str(REPO / ".venv/bin/ruff"), *command, "--config", config, *folders], capture_output=True, text=True
        )
        assert lint.returncode == 0, lint.stdout + lint.stderr


def test_the_new_labs_are_proven_by_lab_test(root: Path) -> None:
    done = ringlab(root, "lab", "test", *KINDS, EXAMPLE.name, "--no-record", timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "every lab proven" in done.stdout
    for lab_id in [*KINDS, EXAMPLE.name]:
        section = done.stdout.split(f"\n{lab_id}: ", 1)[1].split("\n\n", 1)[0]
        assert "solution.py" in section and "starter.py" in section and "WRONG" not in section
        # Every mutant the command wrote was graded, each losing exactly the checks its header names.
        assert section.count("mutants/") == len(list((root / "labs" / lab_id / "mutants").glob("*.diff"))) >= 4


def test_the_new_labs_sync_as_content(root: Path, session: Session) -> None:
    report = sync_tree(load_tree(root), session=session, now=datetime(2026, 11, 26, tzinfo=UTC))
    assert report.added.get("lab") == len(KINDS) + 1
    for lab_id in KINDS:
        version = catalog.lab_version(session, lab_id, 1)
        assert version is not None and version.spec.title == f"Average ({lab_id})"
        assert not any(name.startswith("mutants/") for name in version.files)  # authors' material stays out


def test_nothing_is_written_for_a_bad_id_world_sizes_or_an_existing_folder(root: Path) -> None:
    before = sorted(p.name for p in (root / "labs").iterdir())
    for args, says in [
        (["Bad_Id", "--exercise", "ex-35-1"], "'Bad_Id' is not a lab id"),
        (["fine-id", "--exercise", "ex-35-1", "--world-sizes", "2"], "needs a size of 3 or more"),
        (["fine-id", "--exercise", "ex-35-1", "--world-sizes", "2,x"], "--world-sizes takes numbers"),
        (["fine-id", "--exercise", "no-such-exercise"], "no exercise 'no-such-exercise'"),
        (["avg-driver", "--exercise", "ex-35-1"], "already exists"),
    ]:
        done = ringlab(root, "lab", "new", *args)
        assert done.returncode == 2 and says in done.stderr, (args, done.stderr)
    assert sorted(p.name for p in (root / "labs").iterdir()) == before


def test_each_template_mutant_is_one_edit_of_the_solution_it_is_written_against() -> None:
    for script in (False, True):
        files = scaffold.render("x", "ex", [2, 3, 4], driver=False, script=script)
        diffs = {name: text for name, text in files.items() if name.startswith("mutants/")}
        assert len(diffs) == 4
        for text in diffs.values():
            assert text.startswith("# mistake: ") and "\n# loses: " in text and "\n--- solution.py\n" in text
