"""The lab catalogue: ``labs/index.md`` and one page per lab, generated from ``content/labs/`` at build time.

An MkDocs hook (``hooks:`` in ``mkdocs.yml``). Each page is made from the files the grader reads,
through the engine's own loader (``labs.spec.load_lab`` and ``labs.spec.mutants.load``): the checks
and their points, the world sizes, the backend, the entry kind, the mutants, the public files, and
the lab's ``NOTES.md`` when it has one. A page cannot drift from its lab, and a lab folder the loader
refuses fails the build with the loader's ``path:line: message`` lines.

The content folder is the app's: ``RINGLAB_CONTENT_DIR`` if set, else ``content/`` (``app.paths``).
Nothing here imports torch: the loader is the web process's, which never does.
"""

from __future__ import annotations

import posixpath
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # `mkdocs` runs from .venv/bin: the project's packages from the checkout
    sys.path.insert(0, str(REPO))

from app.content.source import ContentError, parse_front_matter  # noqa: E402
from app.paths import setting_path  # noqa: E402
from labs.spec import COMMON_DIR, Lab, LabError, LabProblem, load_lab  # noqa: E402
from labs.spec import mutants as mutants_  # noqa: E402
from labs.spec.mutants import Mutant  # noqa: E402

SECTION = "Lab catalogue"  # the nav entry this hook fills with the index and a page per lab
FOLDER = "labs"  # where the pages land in the site: labs/index.md, labs/<lab-id>.md
NOTES = "NOTES.md"
FIGURES = "../reference/figures.md"  # measured grading times per lab (bench/labs.py prints them)
BACKENDS = {"gloo": "gloo", "nccl": "NCCL"}
KINDS = {
    "functions": "the ranks join the group and the grader calls the student's functions",
    "driver": "the lab's public `driver.py` owns the loop in every rank and calls the student's functions",
    "script": "the student writes a whole torchrun-style script; `driver.py` runs it on every rank",
}


@dataclass(frozen=True)
class Exercise:
    id: str
    number: str
    title: str  # empty when the exercise has none (its number and set name it)
    set_title: str


@dataclass(frozen=True)
class Entry:
    """One lab as the catalogue shows it: the loaded lab, its parsed mutants, its exercise and its notes."""

    lab: Lab
    mutants: list[Mutant]
    exercise: Exercise | None  # None when no exercise file has the lab's exercise id
    notes: str | None

    @property
    def kind(self) -> str:
        spec = self.lab.spec
        if spec.entry == "script":
            return "script"
        return "driver" if "driver.py" in spec.public_files else "functions"

    @property
    def backend(self) -> str:
        names = ", ".join(BACKENDS[b] for b in self.lab.spec.backends)
        return f"{names} (GPU only)" if self.lab.spec.needs_gpu else names


def content_dir() -> Path:
    """The content folder the app reads: ``RINGLAB_CONTENT_DIR`` (or ``.env``), else ``content/``."""
    return setting_path("content_dir")


def exercises(content: Path) -> dict[str, Exercise]:
    """Every exercise's id, number and title, from the front matter of ``exercises/<set>/*.md`` and the set's
    ``set.yaml``.

    A file that does not parse is left out: telling its author is ``ringlab content check``'s job, and
    the lab's page then shows the exercise id alone.
    """
    found = {}
    for folder in sorted(p for p in (content / "exercises").glob("*") if p.is_dir()):
        try:
            meta = yaml.safe_load((folder / "set.yaml").read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, yaml.YAMLError):
            meta = None
        set_title = str(meta.get("title", "")) if isinstance(meta, dict) else ""
        for path in sorted(folder.glob("*.md")):
            try:
                data = parse_front_matter(path.read_text(encoding="utf-8"), str(path))[0].data
            except (ContentError, UnicodeDecodeError):
                continue
            if isinstance(data.get("id"), str):
                number, title = str(data.get("number", "")), str(data.get("title", ""))
                found[data["id"]] = Exercise(data["id"], number, title, set_title)
    return found


def load(content: Path) -> list[Entry]:
    """Every lab under ``content/labs/``, in id order; a ``LabError`` lists every problem of every folder at once."""
    root = content / "labs"
    if not root.is_dir():
        raise LabError([LabProblem(str(root), 1, "no labs folder: set RINGLAB_CONTENT_DIR to a content folder")])
    known = exercises(content)
    entries, problems = [], []
    for folder in sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith((".", "_"))):
        try:
            lab = load_lab(folder)
            found = mutants_.load(lab)
        except LabError as exc:
            problems.extend(exc.problems)
            continue
        notes = folder / NOTES
        text = notes.read_text(encoding="utf-8") if notes.is_file() else None
        entries.append(Entry(lab, found, known.get(lab.spec.exercise), text))
    if problems:
        raise LabError(problems)
    return entries


def _escape(text: str) -> str:
    """``text`` safe in a Markdown table cell: pipes, emphasis and HTML escaped, code spans kept as written."""
    parts = re.split(r"(`[^`]*`)", " ".join(text.split()))
    return "".join(
        part if part.startswith("`") else re.sub(r"([\\*_\[\]|])", r"\\\1", part).replace("<", "&lt;") for part in parts
    )


def _code(names: Any) -> str:
    return ", ".join(f"`{n}`" for n in names)


def _exercise(entry: Entry) -> str:
    ex = entry.exercise
    if ex is None:
        return f"`{entry.lab.spec.exercise}`"
    where = f" ({ex.set_title})" if ex.set_title else ""
    return f"`{ex.id}`: " + _escape(" ".join(filter(None, (ex.number, ex.title))) + where)


def index_page(entries: list[Entry]) -> str:
    """``labs/index.md``: one row per lab."""
    total = sum(e.lab.spec.max_score for e in entries)
    lines = [
        f"# {SECTION}",
        "",
        f"Every lab of `content/labs/`: {len(entries)} labs, {total} points in all. Each page is generated from the",
        "lab's folder when the site is built, through the same loader the grader uses, so it always shows",
        "what grading does: the checks and their points, the world sizes it runs at, and the mutants",
        "(wrong solutions) the lab is proved against with `ringlab lab test`. How to write a lab:",
        "[Authoring labs](../authoring-labs.md).",
        "",
        "Kind: **functions**, the ranks call the student's functions; **driver**, the lab's public `driver.py`",
        "owns the loop and calls them; **script**, the student writes a whole torchrun-style script.",
        f"Grading time per lab is measured by `bench/labs.py`: see [Measured figures]({FIGURES}).",
        "",
        "| Lab | Exercise | World sizes | Backend | Points | Kind |",
        "|---|---|---|---|--:|---|",
    ]
    for e in entries:
        spec = e.lab.spec
        sizes = ", ".join(map(str, spec.world_sizes))
        lines.append(
            f"| [{_escape(spec.title)}]({spec.id}.md) `{spec.id}` | `{spec.exercise}` | {sizes} | {e.backend} "
            f"| {spec.max_score} | {e.kind} |"
        )
    return "\n".join(lines) + "\n"


def _public_files(entry: Entry) -> list[str]:
    lab = entry.lab
    rows = [
        "| File | From | What |",
        "|---|---|---|",
        "| `statement.md` | lab folder | the statement, shown on the lab's page |",
        "| `starter.py` | lab folder | the student's starting code: the file they edit and submit |",
    ]
    for name in lab.spec.public_files:
        shared = lab.public_path(name).parent != lab.folder
        what = "runs the student's code in every rank" if name == "driver.py" else "imported by the driver"
        rows.append(f"| `{name}` | {f'`{COMMON_DIR}/` (shared)' if shared else 'lab folder'} | {what}, read-only |")
    return rows


def _mutants(entry: Entry) -> list[str]:
    if not entry.mutants:
        return ["This lab has no mutants."]
    rows = ["| Mutant | The mistake | Loses |", "|---|---|---|"]
    order = [c.id for c in entry.lab.spec.checks]  # as lab.yaml lists them
    for m in entry.mutants:
        loses = _code(c for c in order if c in m.loses)
        if m.may_lose:
            loses += f"; may lose {_code(c for c in order if c in m.may_lose)}"
        if m.world_sizes:
            sizes = ", ".join(map(str, m.world_sizes))
            loses += f" (graded at world size{'s' if len(m.world_sizes) > 1 else ''} {sizes} only)"
        rows.append(f"| `{m.path.name}` | {_escape(m.mistake)} | {loses} |")
    return rows


_HEADING = re.compile(r"^(#{1,6})(\s)")
_FENCE = re.compile(r"^\s*(```|~~~)")
_LINK = re.compile(r"(\]\()([^)\s]+)")


def _notes(entry: Entry, repo_url: str | None) -> list[str]:
    """``NOTES.md`` as a section of this page: its headings moved below the section's, and its relative links
    sent to the repository (the docs site holds none of the lab's files).

    The section is titled by the notes' own heading when they open with their only top-level one, else
    "Design notes". Lines inside code fences are left as written.
    """
    assert entry.notes is not None
    lines = entry.notes.splitlines()
    outside: list[bool] = []
    fenced = False
    for line in lines:
        if _FENCE.match(line):
            fenced = not fenced
            outside.append(False)
        else:
            outside.append(not fenced)
    headings = [(i, len(m.group(1))) for i, line in enumerate(lines) if outside[i] and (m := _HEADING.match(line))]
    top = min((level for _, level in headings), default=1)
    first = next((i for i, line in enumerate(lines) if line.strip()), None)
    title = "Design notes"
    if headings and headings[0] == (first, top) and [lv for _, lv in headings].count(top) == 1:
        title = lines[headings[0][0]].lstrip("#").strip()
        lines[headings[0][0]] = ""
        top += 1
    shift = 3 - top  # the notes' top headings become ### under the section's ##
    folder = f"content/labs/{entry.lab.id}"
    blob = f"{repo_url.rstrip('/')}/blob/main/" if repo_url else None

    def link(m: re.Match[str]) -> str:
        target = m.group(2)
        path = posixpath.normpath(posixpath.join(folder, target))
        if blob is None or re.match(r"^([a-z][a-z0-9+.-]*:|#|/)", target) or path.startswith(".."):
            return m.group(0)
        return m.group(1) + blob + path

    out = [f"## {title}", ""]
    for line, plain in zip(lines, outside, strict=True):
        if plain:
            line = _HEADING.sub(lambda m: "#" * min(6, len(m.group(1)) + shift) + m.group(2), line)
            line = _LINK.sub(link, line)
        out.append(line)
    return out


def lab_page(entry: Entry, repo_url: str | None = None) -> str:
    """``labs/<lab-id>.md``: everything grading does with the lab, then its design notes when it has them."""
    lab, spec = entry.lab, entry.lab.spec
    after = ", ".join(f"[{a}]({a}.md)" for a in spec.after)
    limits = f"{spec.time_limit_s:g} s per run, {spec.memory_limit_mb} MB of memory per rank"
    if spec.gpu_memory_mb:
        limits += f", {spec.gpu_memory_mb} MB of GPU memory per rank"
    lines = [
        f"# {spec.title}",
        "",
        f"`content/labs/{lab.id}/`, {spec.max_score} points. Generated from the lab's folder when the site is built.",
        "",
        "| | |",
        "|---|---|",
        f"| Lab id | `{lab.id}` |",
        f"| Grades the exercise | {_exercise(entry)} |",
        f"| World sizes | {', '.join(map(str, spec.world_sizes))} |",
        f"| Backend | {entry.backend} |",
        f"| Kind | {entry.kind}: {KINDS[entry.kind]} |",
    ]
    if spec.functions:
        lines.append(f"| The student defines | {_code(spec.functions)} |")
    if after:
        lines.append(f"| Do first | {after} |")
    lines += [
        f"| Limits | {limits} |",
        f"| Grading time | measured per lab by `bench/labs.py`: [Measured figures]({FIGURES}) |",
    ]
    if spec.due:
        lines.append(f"| Due | {spec.due.isoformat()} |")
    lines += ["", "## Checks", "", "| Check | What it checks | Points |", "|---|---|--:|"]
    lines += [f"| `{c.id}` | {_escape(c.title)} | {c.points} |" for c in spec.checks]
    lines += [f"| | **Total** | **{spec.max_score}** |", ""]
    lines += [
        "## Mutants",
        "",
        "Wrong solutions, each `solution.py` with one mistake (`mutants/*.diff`). `ringlab lab test "
        f"{lab.id}` grades each and fails unless it loses exactly these checks.",
        "",
        *_mutants(entry),
        "",
        "## What a student gets",
        "",
        *_public_files(entry),
        "",
    ]
    if entry.notes is not None:
        lines += [*_notes(entry, repo_url), ""]
    return "\n".join(lines)


def pages(entries: list[Entry], repo_url: str | None = None) -> dict[str, str]:
    """The generated pages by their path in the docs: ``labs/index.md`` and ``labs/<lab-id>.md``."""
    found = {f"{FOLDER}/index.md": index_page(entries)}
    found.update({f"{FOLDER}/{e.lab.id}.md": lab_page(e, repo_url) for e in entries})
    return found


# MkDocs loads a hook module once per process (`mkdocs serve` rebuilds with it): each build starts here afresh.
_built: list[Entry] = []


def on_config(config: Any) -> Any:
    from mkdocs.exceptions import PluginError

    try:
        entries = load(content_dir())
    except LabError as exc:
        raise PluginError(f"the lab catalogue cannot be built: a lab folder is invalid\n{exc}") from None
    _built[:] = entries
    section = [f"{FOLDER}/index.md", *({e.lab.spec.title: f"{FOLDER}/{e.lab.id}.md"} for e in entries)]
    nav = config.nav if config.nav is not None else []
    for i, item in enumerate(nav):
        if isinstance(item, dict) and SECTION in item:
            nav[i] = {SECTION: section}
            break
    else:
        nav.append({SECTION: section})
    config.nav = nav
    return config


def on_files(files: Any, config: Any) -> Any:
    from mkdocs.structure.files import File

    for src_uri, text in pages(_built, config.repo_url).items():
        files.append(File.generated(config, src_uri, content=text))
    return files


def on_serve(server: Any, config: Any, builder: Any) -> Any:
    # `scripts/docs.sh` rebuilds when a lab or an exercise changes, as it does for the docs' own pages.
    for folder in ("labs", "exercises"):
        if (content_dir() / folder).is_dir():
            server.watch(str(content_dir() / folder))
    return server
