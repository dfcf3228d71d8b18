"""Public files labs share (``content/labs/_common/``): named in ``public_files`` by their plain names,
imported by drivers in the worker as in the ranks, read from a lab version's own copy, never patched."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from labs.authoring.public import load_public
from labs.spec import COMMON_DIR, DEFAULT_CONTENT, LabError, load_lab, precheck


def test_a_driver_imports_the_shared_helpers_by_their_plain_names_and_leaves_no_plain_name_behind() -> None:
    checks = DEFAULT_CONTENT / "zero-1" / "checks.py"
    driver = load_public(checks, "driver")
    assert "mlp.py" in load_lab(DEFAULT_CONTENT / "zero-1").spec.public_files
    assert not (DEFAULT_CONTENT / "zero-1" / "mlp.py").exists()  # it lives once, in the shared folder
    shared = load_public(checks, "mlp")
    assert shared.__file__ == str(DEFAULT_CONTENT / COMMON_DIR / "mlp.py")
    assert driver.build_model is shared.build_model and driver.shard is load_public(checks, "data_parallel").shard
    # The worker holds many labs (and versions of them): no plain name stays importable after the load.
    assert not {"mlp", "data_parallel", "heap"} & set(sys.modules)


def test_a_lab_version_uses_its_own_copy_of_a_shared_helper(tmp_path: Path) -> None:
    # A stored version is written out as one folder holding every file its ranks need (app.content.labs).
    version = tmp_path / "digest" / "lamb"
    shutil.copytree(DEFAULT_CONTENT / "lamb", version, ignore=shutil.ignore_patterns("mutants", "__pycache__"))
    helper = (DEFAULT_CONTENT / COMMON_DIR / "mlp.py").read_text() + "\nVERSION = 'as it was synced'\n"
    (version / "mlp.py").write_text(helper)
    lab = load_lab(version)
    assert lab.public_path("mlp.py") == version / "mlp.py"
    assert lab.public_sources()["mlp.py"] == helper  # what its ranks get
    assert load_public(version / "checks.py", "driver").mlp.VERSION == "as it was synced"
    assert not hasattr(load_public(DEFAULT_CONTENT / "lamb" / "checks.py", "driver").mlp, "VERSION")


def test_a_shared_helper_found_nowhere_is_a_lab_yaml_error(tmp_path: Path) -> None:
    folder = tmp_path / "lamb"
    shutil.copytree(DEFAULT_CONTENT / "lamb", folder, ignore=shutil.ignore_patterns("mutants", "__pycache__"))
    with pytest.raises(LabError) as refused:
        load_lab(folder)  # no _common/ beside this copy
    assert [str(p) for p in refused.value.problems] == [
        f"{folder / 'lab.yaml'}:1: public file mlp.py is listed but missing: not in the lab folder, nor in _common/"
    ]
    shutil.copytree(DEFAULT_CONTENT / COMMON_DIR, tmp_path / COMMON_DIR)
    assert load_lab(folder).public_path("mlp.py") == tmp_path / COMMON_DIR / "mlp.py"


def test_student_code_may_use_a_shared_helper_but_not_change_it() -> None:
    public = load_lab(DEFAULT_CONTENT / "zero-1").spec.public_files
    assert (
        precheck.check(
            "from mlp import build_model\nimport data_parallel\nx = data_parallel.shard\n", public_files=public
        )
        == []
    )
    found = precheck.check("import mlp\nmlp.build_model = lambda *a: None\n", public_files=public)
    assert [(f.line, f.rule) for f in found] == [(2, "public-modules")]
