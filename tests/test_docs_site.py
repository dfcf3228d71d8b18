"""The documentation site's lab catalogue, generated from ``content/labs/`` (docs/hooks/catalogue.py).

The generator is called on the real content and each page compared with the lab's ``lab.yaml`` as the
engine's loader reads it; then real ``mkdocs build`` runs, on a copy of the content, show that a check
added to a ``lab.yaml`` is on its built page and that a broken ``lab.yaml`` fails the build naming the
file and the line. The whole site, strictly, is the test command's ``docs`` step (scripts/test.sh).
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from labs.spec import load_lab

REPO = Path(__file__).resolve().parents[1]
CONTENT = REPO / "content"
HOOK = REPO / "docs" / "hooks" / "catalogue.py"
LAB = "ring-allreduce"
# A row of a page's checks table: | `id` | title | points |
CHECK_ROW = re.compile(r"^\| `(?P<id>[^`]+)` \| (?P<title>.+) \| (?P<points>\d+) \|$")


@pytest.fixture(scope="module")
def catalogue() -> Iterator[ModuleType]:
    """The hook module, loaded from its file as MkDocs loads it (docs/ is not a package)."""
    spec = importlib.util.spec_from_file_location("ringlab_docs_catalogue", HOOK)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    yield module
    del sys.modules[spec.name]


def lab_folders() -> list[Path]:
    return sorted(p for p in (CONTENT / "labs").iterdir() if p.is_dir() and not p.name.startswith((".", "_")))


def page_checks(page: str) -> list[tuple[str, int]]:
    """The ``(check id, points)`` rows of a lab page's "Checks" section, in order."""
    section = page.split("\n## Checks\n", 1)[1].split("\n## ", 1)[0]
    return [(m["id"], int(m["points"])) for line in section.splitlines() if (m := CHECK_ROW.match(line))]


def copy_content(tmp_path: Path) -> Path:
    """What the catalogue reads of the content, copied: the labs and the exercises."""
    content = tmp_path / "content"
    for kind in ("labs", "exercises"):
        shutil.copytree(CONTENT / kind, content / kind, ignore=shutil.ignore_patterns("__pycache__"))
    return content


def mkdocs_build(content: Path, site: Path) -> subprocess.CompletedProcess[str]:
    """The real site build (the repository's mkdocs.yml and hooks) into ``site``, reading ``content``.

    Not strict: other pages are not under test here, and the test command builds the site strictly.
    """
    env = {**os.environ, "RINGLAB_CONTENT_DIR": str(content), "NO_MKDOCS_2_WARNING": "1"}
    command = [sys.executable, "-m", "mkdocs", "build", "--no-strict", "-f", "mkdocs.yml", "-d", str(site)]
    return subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=120)


def test_every_lab_has_a_page_with_its_checks_and_points(catalogue: ModuleType) -> None:
    pages = catalogue.pages(catalogue.load(CONTENT))
    folders = lab_folders()
    assert len(folders) >= 24
    assert set(pages) == {"labs/index.md"} | {f"labs/{f.name}.md" for f in folders}
    for folder in folders:
        spec = load_lab(folder).spec
        page = pages[f"labs/{spec.id}.md"]
        assert page.startswith(f"# {spec.title}\n"), spec.id
        assert page_checks(page) == [(c.id, c.points) for c in spec.checks], spec.id
        assert f"| | **Total** | **{spec.max_score}** |" in page, spec.id
        row = next(line for line in pages["labs/index.md"].splitlines() if f"]({spec.id}.md)" in line)
        assert f"| {spec.max_score} |" in row, spec.id


def test_every_mutant_is_on_its_labs_page(catalogue: ModuleType) -> None:
    pages = catalogue.pages(catalogue.load(CONTENT))
    for folder in lab_folders():
        page = pages[f"labs/{folder.name}.md"]
        for diff in sorted((folder / "mutants").glob("*.diff")):
            assert f"| `{diff.name}` |" in page, f"{folder.name}: {diff.name}"


def test_a_new_check_shows_in_the_built_page(tmp_path: Path) -> None:
    content = copy_content(tmp_path)
    lab_yaml = content / "labs" / LAB / "lab.yaml"
    spec = load_lab(lab_yaml.parent).spec
    added = (
        "  - id: catalogue-probe\n"
        '    title: "A check added after the catalogue was last built"\n'
        "    points: 7\n"
    )  # fmt: skip
    lab_yaml.write_text(lab_yaml.read_text(encoding="utf-8").rstrip("\n") + "\n" + added, encoding="utf-8")
    assert [c.id for c in load_lab(lab_yaml.parent).spec.checks][-1] == "catalogue-probe"  # still a valid lab

    built = mkdocs_build(content, tmp_path / "site")

    assert built.returncode == 0, built.stderr
    html = (tmp_path / "site" / "labs" / LAB / "index.html").read_text(encoding="utf-8")
    row = re.search(r"<td><code>catalogue-probe</code></td>\s*<td>(.*?)</td>\s*<td[^>]*>(\d+)</td>", html)
    assert row is not None, "the new check has no row on the lab's built page"
    assert row.groups() == ("A check added after the catalogue was last built", "7")
    assert f"<strong>{spec.max_score + 7}</strong>" in html


def test_a_broken_lab_yaml_fails_the_build_naming_the_file(tmp_path: Path) -> None:
    content = copy_content(tmp_path)
    lab_yaml = content / "labs" / LAB / "lab.yaml"
    lines = lab_yaml.read_text(encoding="utf-8").splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if line.strip().startswith("points:"))
    lines[at] = lines[at].replace(lines[at].strip(), "points: many")
    lab_yaml.write_text("".join(lines), encoding="utf-8")

    built = mkdocs_build(content, tmp_path / "site")

    assert built.returncode != 0
    assert "the lab catalogue cannot be built" in built.stderr
    assert re.search(rf"{re.escape(str(lab_yaml))}:{at + 1}: checks\.0\.points: ", built.stderr), built.stderr
