"""The content check's cache: the same problems with it as without, and an edit is never answered from it."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from app.content.check_cache import CheckCache
from app.content.loader import load_tree
from app.content.source import ContentError
from tests.conftest import CONTENT_DIR


def problems(root: Path, cache: CheckCache | None) -> list[str]:
    try:
        load_tree(root, cache=cache)
    except ContentError as exc:
        return [str(p) for p in exc.problems]
    return []


def test_a_cached_check_finds_what_an_uncached_one_finds_and_an_edit_is_checked_afresh(tmp_path: Path) -> None:
    root = tmp_path / "content"
    shutil.copytree(CONTENT_DIR, root, ignore=shutil.ignore_patterns("__pycache__"))
    checks = root / "labs" / "ring-allreduce" / "checks.py"
    checks.write_text(
        checks.read_text().replace('"ring-neighbours": ring_neighbours', '"ring-neighbors": ring_neighbours')
    )
    diff = root / "labs" / "ring-allreduce" / "mutants" / "averages.diff"
    diff.write_text(diff.read_text().replace("# loses:", "# loose:", 1))
    quiz = root / "quizzes" / "module-202.yaml"
    stray = "    prompt: |\n      It costs $5 and then $x^{2$.\n"
    quiz.write_text(quiz.read_text().replace("    prompt: |\n", stray, 1))
    expected = problems(root, None)
    # The checks contract, the mutant's header and a formula that does not render.
    assert any("ring-neighbors" in p for p in expected) and any("averages.diff" in p for p in expected)
    assert any("module-202.yaml" in p for p in expected), expected

    path = tmp_path / "cache.json"
    first = CheckCache(path)
    assert problems(root, first) == expected
    first.save()
    second = CheckCache(path)
    assert second.stored  # what the first run found was kept
    assert problems(root, second) == expected
    assert set(second.used) <= set(second.stored)  # answered from the cache, nothing computed anew

    checks.write_text(checks.read_text().replace('"ring-neighbors"', '"ring-neighbours"'))
    third = CheckCache(path)
    found = problems(root, third)
    assert not any("ring-neighbors" in p for p in found) and found == problems(root, None) != expected


@pytest.mark.parametrize("text", ["", "not json", '{"entries": []}', '{"other": 1}'])
def test_a_cache_that_cannot_be_read_is_an_empty_one(tmp_path: Path, text: str) -> None:
    path = tmp_path / "cache.json"
    path.write_text(text)
    cache = CheckCache(path)
    assert cache.stored == {} and cache.get("anything") is None
    cache.put("key", [])
    cache.save()
    assert CheckCache(path).stored == {"key": []}
