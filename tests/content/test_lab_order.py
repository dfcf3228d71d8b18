"""``after:`` in lab.yaml: ids that name labs, never the lab itself, no cycles; errors name the file and line."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from app.content.loader import load_tree
from app.content.models import ContentTree
from app.content.source import ContentError
from app.labs.path import order
from tests.conftest import CONTENT_DIR


def edit(root: Path, lab_id: str, old: str, new: str) -> None:
    path = root / "labs" / lab_id / "lab.yaml"
    text = path.read_text()
    assert old in text, f"{lab_id}/lab.yaml no longer says {old!r}"
    path.write_text(text.replace(old, new, 1))


def test_unknown_labs_the_lab_itself_and_cycles_are_refused_at_their_lines(tmp_path: Path) -> None:
    root = tmp_path / "content"
    shutil.copytree(CONTENT_DIR, root, ignore=shutil.ignore_patterns("__pycache__"))
    block = "after:\n  - collectives-p2p\n  - no-such-lab\n  - ring-allreduce\n"
    edit(root, "ring-allreduce", "after: [collectives-p2p]\n", block)
    edit(root, "zero-1", "after: [ddp-from-scratch]", "after: [ddp-from-scratch, fsdp-wrapping]")
    # A lab broken in its own way is still a lab: naming it is not a second problem.
    edit(root, "tensor-parallel", "needs_gpu: false", "needs_gpu: false\ncolour: blue")
    with pytest.raises(ContentError) as refused:
        load_tree(root, check_markdown=False)
    assert [str(p) for p in refused.value.problems] == [
        "content/labs/fsdp-wrapping/lab.yaml:4: after: a cycle (fsdp-wrapping → zero-1 → fsdp-wrapping, each lab"
        " after the next), so none could be done first; remove a link",
        "content/labs/ring-allreduce/lab.yaml:6: after: there is no lab 'no-such-lab'; after names the ids of"
        " folders in content/labs",
        "content/labs/ring-allreduce/lab.yaml:7: after: lab 'ring-allreduce' cannot come after itself; list the"
        " labs to do before it",
        "content/labs/tensor-parallel/lab.yaml:8: unknown field 'colour'",
    ]


def test_a_longer_cycle_is_named_once_from_its_smallest_id(tmp_path: Path) -> None:
    root = tmp_path / "content"
    shutil.copytree(CONTENT_DIR, root, ignore=shutil.ignore_patterns("__pycache__"))
    edit(root, "collectives-p2p", "exercise: ex-35-1\n", "exercise: ex-35-1\nafter: [ddp-from-scratch]\n")
    with pytest.raises(ContentError) as refused:
        load_tree(root, check_markdown=False)
    assert [str(p) for p in refused.value.problems] == [
        "content/labs/collectives-p2p/lab.yaml:4: after: a cycle (collectives-p2p → ddp-from-scratch →"
        " ring-allreduce → collectives-p2p, each lab after the next), so none could be done first; remove a link"
    ]


def test_removing_a_lab_that_others_come_after_names_each_of_them(tmp_path: Path) -> None:
    root = tmp_path / "content"
    shutil.copytree(CONTENT_DIR, root, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.rmtree(root / "labs" / "collectives-p2p")
    with pytest.raises(ContentError) as refused:
        load_tree(root, check_markdown=False)
    assert [(p.path, p.line) for p in refused.value.problems] == [
        (f"content/labs/{lab}/lab.yaml", 4) for lab in ("pipeline-gpipe", "ring-allreduce", "tensor-parallel")
    ]
    assert all("there is no lab 'collectives-p2p'" in p.message for p in refused.value.problems)


def test_the_repository_labs_make_a_path_from_collectives_and_memory(content_tree: ContentTree) -> None:
    after = {lab.id: lab.spec.get("after", []) for lab in content_tree.labs}
    assert after["ring-allreduce"] == ["collectives-p2p"] and after["ddp-from-scratch"] == ["ring-allreduce"]
    assert all(after[lab] == ["ddp-from-scratch"] for lab in ("overlap-ddp", "grad-accumulation", "zero-1"))
    assert after["fsdp-wrapping"] == ["zero-1"]
    # Each GPU lab comes after the CPU lab that teaches the same thing.
    assert after["gpu-memory-profile"] == ["memory-estimate"] and after["gpu-mixed-precision"] == ["loss-scaling"]
    starts = sorted(lab for lab, before in after.items() if not before)
    assert starts == ["collectives-p2p", "memory-estimate"]
    path = order([(lab.id, after[lab.id]) for lab in content_tree.labs])
    assert path.index("collectives-p2p") < path.index("ring-allreduce") < path.index("ddp-from-scratch")
