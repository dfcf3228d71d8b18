"""Labs are content: validated with the tree, synced in its transaction, versioned, and served from the
database, so a lab broken on disk never takes a page down and the last good version keeps serving."""

from __future__ import annotations

import shutil
from datetime import UTC, datetime
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from app.content import records as r
from app.content.loader import load_tree
from app.content.service import sync_directory
from app.content.source import ContentError
from app.content.sync import sync_tree
from app.labs import catalog
from tests.conftest import CONTENT_DIR
from tests.factories import PASSWORD, make_user

T1 = datetime(2026, 1, 2, tzinfo=UTC)
T2 = datetime(2026, 1, 3, tzinfo=UTC)
BROKEN_YAML = "id: ring-allreduce\ntitle: [unclosed\n"


def copy_content(tmp_path: Path) -> Path:
    root = tmp_path / "content"
    shutil.copytree(CONTENT_DIR, root, ignore=shutil.ignore_patterns("__pycache__"))
    return root


def test_the_repository_labs_are_synced_at_version_one(session: Session) -> None:
    labs = {row.id: row for row in session.scalars(select(r.Lab))}
    assert set(labs) == {p.name for p in (CONTENT_DIR / "labs").iterdir() if (p / "lab.yaml").is_file()}
    assert all(row.version == 1 and row.retired_at is None for row in labs.values())
    stored = session.scalars(select(r.LabVersion).where(r.LabVersion.lab_id == "ring-allreduce")).one()
    # Everything but mutants/: the recorded communication picture of the reference travels too.
    expected = {"lab.yaml", "statement.md", "starter.py", "checks.py", "solution.py", "reference-wire.json"}
    assert set(stored.files) == expected
    assert stored.files["checks.py"] == (CONTENT_DIR / "labs/ring-allreduce/checks.py").read_text()


def test_a_changed_lab_gets_a_new_version_and_keeps_the_old_one(session: Session, tmp_path: Path) -> None:
    root = copy_content(tmp_path)
    lab = root / "labs" / "ring-allreduce"
    (lab / "statement.md").write_text((lab / "statement.md").read_text() + "\nA new closing line.\n")
    (lab / "driver.py").write_text("DRIVER = 1\n")  # any other file of the folder travels with the version
    (lab / "mutants").mkdir(exist_ok=True)
    # A mutant added: authors' material, checked by the content check but never stored.
    (lab / "mutants" / "off_by_one.diff").write_text((lab / "mutants" / "averages.diff").read_text())
    report = sync_tree(load_tree(root), session=session, now=T1)
    assert report.updated == {"lab": 1}

    assert catalog.get_lab(session, "ring-allreduce").version == 2
    v1 = catalog.lab_version(session, "ring-allreduce", 1)
    v2 = catalog.lab_version(session, "ring-allreduce", 2)
    assert v1 is not None and v2 is not None
    assert "A new closing line." in v2.statement and "A new closing line." not in v1.statement
    assert v2.files["driver.py"] == "DRIVER = 1\n"
    assert not any(name.startswith("mutants") for name in v2.files)
    assert sync_tree(load_tree(root), session=session, now=T2).summary()["updated"] == {}  # same files: same version


def test_design_notes_are_never_part_of_a_version(session: Session, tmp_path: Path) -> None:
    """NOTES.md is for authors and the docs' catalogue: writing or changing it makes no new version."""
    root = copy_content(tmp_path)
    notes = root / "labs" / "ring-allreduce" / "NOTES.md"
    notes.write_text("# Design notes: ring-allreduce\n\nWhy the traffic bound is 1.25x.\n")
    assert sync_tree(load_tree(root), session=session, now=T1).summary()["updated"] == {}
    notes.write_text(notes.read_text() + "More.\n")
    assert sync_tree(load_tree(root), session=session, now=T2).summary()["updated"] == {}
    assert "NOTES.md" not in catalog.lab_version(session, "ring-allreduce", 1).files  # type: ignore[union-attr]


def test_a_removed_lab_is_retired_and_its_versions_kept(session: Session, tmp_path: Path) -> None:
    root = copy_content(tmp_path)
    shutil.rmtree(root / "labs" / "debugging-tools")  # no lab comes after it (tests/content/test_lab_order.py)
    assert sync_tree(load_tree(root), session=session, now=T1).retired == {"lab": 1}
    assert "debugging-tools" not in catalog.all_labs(session) and "ring-allreduce" in catalog.all_labs(session)
    assert catalog.lab_version(session, "debugging-tools", 1) is not None  # old submissions still show


def test_a_broken_lab_is_refused_with_path_and_line(
    session_factory: sessionmaker[Session], session: Session, tmp_path: Path
) -> None:
    root = copy_content(tmp_path)
    (root / "labs" / "ring-allreduce" / "lab.yaml").write_text(BROKEN_YAML)
    (root / "labs" / "collectives-p2p" / "driver.py").write_bytes(b"\xff\xfe not text")
    with pytest.raises(ContentError) as refused:
        sync_directory(root, session_factory)
    text = str(refused.value)
    assert "content/labs/ring-allreduce/lab.yaml:3: YAML syntax" in text
    assert "content/labs/collectives-p2p/driver.py:1: not UTF-8 text" in text
    assert catalog.get_lab(session, "ring-allreduce").version == 1  # nothing changed


def test_pages_and_grading_keep_the_last_good_lab_while_the_folder_is_broken(
    app, client: TestClient, session: Session, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    root = copy_content(tmp_path)
    (root / "labs" / "ring-allreduce" / "lab.yaml").write_text(BROKEN_YAML)
    app.state.settings.content_dir = root  # what the server was started with is now broken on disk
    for path in ("/labs", "/labs/ring-allreduce", "/labs/collectives-p2p", "/labs/ring-allreduce/starter.py",
                 "/exercises", "/exercises/ch35-exercises", "/api/v1/labs", "/api/v1/labs/ring-allreduce"):  # fmt: skip
        assert client.get(path).status_code == 200, path
    user = make_user(session, "labsync-student")
    token = client.post("/api/v1/auth/token", json={"username": user.username, "password": PASSWORD}).json()
    auth = {"Authorization": f"Bearer {token['access_token']}"}
    created = client.post("/api/v1/labs/ring-allreduce/submissions", json={"code": "x = 1\n"}, headers=auth)
    assert created.status_code == 202
    polled = client.get(f"/api/v1/submissions/{created.json()['id']}", headers=auth)
    assert polled.status_code == 200 and polled.json()["status"] == "queued"


def test_a_regrade_is_against_the_current_version(session: Session, tmp_path: Path) -> None:
    from app.labs import service
    from app.labs.models import Submission

    user = make_user(session, "labsync-regrade")
    row = Submission(user_id=user.id, lab_id="ring-allreduce", lab_version=1, code="x = 1\n", status="error",
                     gpus_needed=0, attempts=1, regrades=0, submitted_at=T1, queued_at=T1)  # fmt: skip
    session.add(row)
    root = copy_content(tmp_path)
    (root / "labs/ring-allreduce/checks.py").write_text(
        (root / "labs/ring-allreduce/checks.py").read_text() + "\n# fixed\n"
    )
    sync_tree(load_tree(root), session=session, now=T1)
    session.flush()
    assert service.regrade([row.id], "ring-allreduce", session=session, now=T2) == 1
    session.refresh(row)
    assert row.lab_version == 2 and row.status == "queued"
