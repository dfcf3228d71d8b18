"""A lab's version carries the shared public files it names (``content/labs/_common/``), so a worker grades
from the stored version alone, a change to a shared helper gives every lab that names it a new version, and
students read the helper from the lab page like the driver."""

from __future__ import annotations

import shutil
from datetime import UTC, datetime
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from app.content.loader import load_tree
from app.content.source import ContentError
from app.content.sync import sync_tree
from app.labs import catalog
from labs.spec import COMMON_DIR, load_labs
from tests.conftest import CONTENT_DIR

T1 = datetime(2026, 1, 2, tzinfo=UTC)
SHARED = CONTENT_DIR / "labs" / COMMON_DIR


def copy_content(tmp_path: Path) -> Path:
    root = tmp_path / "content"
    shutil.copytree(CONTENT_DIR, root, ignore=shutil.ignore_patterns("__pycache__"))
    return root


def test_a_version_holds_each_shared_helper_its_lab_names_under_its_plain_name(session: Session) -> None:
    zero = catalog.lab_version(session, "zero-1", 1)
    assert zero is not None
    assert {"mlp.py", "data_parallel.py", "heap.py"} <= set(zero.files)
    assert zero.files["mlp.py"] == (SHARED / "mlp.py").read_text()
    assert not any(name.startswith(COMMON_DIR) for name in zero.files)
    ring = catalog.lab_version(session, "ring-allreduce", 1)
    assert ring is not None and "mlp.py" not in ring.files  # only what a lab names travels with it


def test_a_changed_shared_helper_gives_each_lab_that_names_it_a_new_version(session: Session, tmp_path: Path) -> None:
    root = copy_content(tmp_path)
    helper = root / "labs" / COMMON_DIR / "heap.py"
    helper.write_text(helper.read_text() + "\n# a comment that changes the file\n")
    naming = {lab.id for lab in load_labs(root / "labs").values() if "heap.py" in lab.spec.public_files}
    assert {"zero-1", "fsdp-wrapping", "activation-checkpointing", "tiled-attention"} <= naming
    report = sync_tree(load_tree(root), session=session, now=T1)
    assert report.updated == {"lab": len(naming)}
    for lab_id in naming:
        latest = catalog.get_lab(session, lab_id)
        assert latest.version == 2 and latest.files["heap.py"] == helper.read_text()


def test_a_lab_naming_a_shared_helper_that_is_gone_is_refused_at_its_lab_yaml(tmp_path: Path) -> None:
    root = copy_content(tmp_path)
    (root / "labs" / COMMON_DIR / "transformer.py").unlink()
    with pytest.raises(ContentError) as refused:
        load_tree(root)
    assert (
        "content/labs/memory-estimate/lab.yaml:1: public file transformer.py is listed but missing: "
        "not in the lab folder, nor in _common/"
    ) in str(refused.value)


def test_the_lab_page_links_a_shared_helper_and_serves_it(client: TestClient) -> None:
    page = client.get("/labs/overlap-ddp").text
    assert 'href="/labs/overlap-ddp/public/mlp.py"' in page
    served = client.get("/labs/overlap-ddp/public/mlp.py")
    assert served.status_code == 200 and served.text == (SHARED / "mlp.py").read_text()
    assert client.get("/api/v1/labs/overlap-ddp").json()["public_files"] == ["driver.py", "data_parallel.py", "mlp.py"]
    assert client.get("/labs/ring-allreduce/public/mlp.py").status_code == 404  # a lab that does not name it
