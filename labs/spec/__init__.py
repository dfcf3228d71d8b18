"""Lab metadata: what ``content/labs/<id>/lab.yaml`` may say, and where its files are.

Torch-free on purpose: the web process lists and shows labs through this module
and must never import torch. ``checks.py`` and ``solution.py`` are trusted files
that only the worker opens; nothing here reads them. The engine stands below the
web app: this module needs nothing from ``app``, which turns a ``LabError`` into
its own content errors.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, time
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    model_validator,
)

from labs.spec.precheck import RULES as PRECHECK_RULES

ID = Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9._-]*$", max_length=80)]
NAME = Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")]
MODULE = Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")]
PUBLIC_FILE = Annotated[str, Field(pattern=r"^[a-z_][a-z0-9_]*\.py$")]
# The check of a case that no check judges by itself: a setup call (load a checkpoint before the calls that
# report on it) whose failure the later checks report. Spelt out so that any other check id a case names must
# be a check of lab.yaml (``labs.spec.contract``).
UNJUDGED = "(judged by no check)"

REQUIRED_FILES = ("lab.yaml", "statement.md", "starter.py", "checks.py", "solution.py")
# Engine module names a lab's public file may not shadow inside the ranks.
RESERVED_MODULES = {"submission", "labs", "torch"}
DEFAULT_CONTENT = Path(__file__).resolve().parents[2] / "content" / "labs"
# Public files several labs share live once, in this folder beside the labs (``content/labs/_common/``).
COMMON_DIR = "_common"


def _due(value: object) -> object:
    # A date alone means the end of that day, UTC; a time without a zone is UTC.
    if isinstance(value, str):
        try:
            value = date.fromisoformat(value.strip()) if len(value.strip()) == 10 else datetime.fromisoformat(value)
        except ValueError:
            return value  # pydantic reports it
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    if isinstance(value, date):
        return datetime.combine(value, time(23, 59, 59), UTC)
    return value


Due = Annotated[AwareDatetime, BeforeValidator(_due)]
"""A due date: ``2026-12-01`` (end of that day, UTC) or ``2026-12-01T17:00:00+01:00``."""


@dataclass(frozen=True, order=True)
class LabProblem:
    path: str
    line: int
    message: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.message}"


class LabError(Exception):
    """A lab folder is invalid; ``problems`` says where and why, each as ``path:line: message``."""

    def __init__(self, problems: list[LabProblem]):
        self.problems = sorted(problems)
        super().__init__("\n".join(str(p) for p in self.problems))


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, str_strip_whitespace=True)


def _distinct_cards(ids: list[str]) -> list[str]:
    twice = sorted({i for i in ids if ids.count(i) > 1})
    if twice:
        raise ValueError(f"names card {', '.join(twice)} more than once: list each card once")
    return ids


class CheckSpec(Strict):
    id: ID
    title: Annotated[str, Field(min_length=1)]
    points: int = Field(ge=0, le=100)
    # Markdown nudges, shown one by one to a student who keeps losing points on this check
    # (``hint_after``). Left out of the dump when empty: a lab without hints keeps its stored version.
    hints: list[Annotated[str, Field(min_length=1, max_length=2000)]] = Field(
        default_factory=list, max_length=5, exclude_if=lambda h: not h
    )
    # Flashcards that teach what this check tests, by card id: a student who fails it is offered them.
    # That each exists in a deck is the content check's (``card_problems``). Left out of the dump when empty.
    cards: Annotated[list[ID], AfterValidator(_distinct_cards)] = Field(
        default_factory=list, max_length=10, exclude_if=lambda c: not c
    )


def _precheck_rule(name: str) -> str:
    if name not in PRECHECK_RULES:
        raise ValueError(f"unknown pre-check rule {name!r}; the rules are {', '.join(PRECHECK_RULES)}")
    return name


class PrecheckSpec(Strict):
    """``precheck:`` in ``lab.yaml``: rules of the static pre-check (``labs.spec.precheck``) this lab lifts."""

    allow: list[Annotated[str, AfterValidator(_precheck_rule)]] = Field(default_factory=list)


def _once_each(ids: list[str]) -> list[str]:
    twice = sorted({i for i in ids if ids.count(i) > 1})
    if twice:
        raise ValueError(f"names {', '.join(twice)} more than once: list each lab once")
    return ids


class LabSpec(Strict):
    """One lab's ``lab.yaml``."""

    id: ID
    title: Annotated[str, Field(min_length=1)]
    exercise: ID
    # Labs to do before this one, by id (``after: [ring-allreduce]``): the path through the labs puts them
    # first. That they exist and form no cycle is the content check's (``app.content.lab_order``). Left out
    # of the dump when empty, as ``precheck``: a lab without it keeps its stored version.
    after: Annotated[list[ID], AfterValidator(_once_each)] = Field(default_factory=list, exclude_if=lambda a: not a)
    world_sizes: list[Annotated[int, Field(ge=1, le=8)]] = Field(min_length=1)
    backends: list[Literal["gloo", "nccl"]] = Field(min_length=1)
    needs_gpu: bool = False
    time_limit_s: float = Field(gt=0, le=120)
    memory_limit_mb: int = Field(ge=64, le=16384)
    # GPU memory each rank may take (NCCL only); unset: no cap beyond the device's.
    gpu_memory_mb: int | None = Field(default=None, ge=64, le=1 << 20)
    # ``function``: the ranks join the group and call the student's functions (through the driver).
    # ``script``: the student writes a whole torchrun-style script; each rank gets torchrun's
    # variables and the lab's driver runs the file as ``__main__`` (``labs.rank.script``).
    entry: Literal["function", "script"] = "function"
    functions: list[NAME] = Field(default_factory=list)  # at least one unless ``entry: script``
    # Files mounted read-only next to the student's module in every rank (``import driver``): public
    # code that owns the loop. Not secret, not trusted. Each is the lab folder's own file, or else the
    # one of that name in the folder labs share (``content/labs/_common/``, see ``public_path``).
    public_files: list[PUBLIC_FILE] = Field(default_factory=list)
    # Modules the warm template imports before any job, so no rank pays for a lazy import.
    preload: list[MODULE] = Field(default_factory=list)
    checks: list[CheckSpec] = Field(min_length=1)
    # Pre-check rules this lab's honest code needs lifted, e.g. ``precheck: {allow: [frames]}``. Left out of
    # the dump when empty, so a lab that does not set it keeps its stored version (the digest of that dump).
    precheck: PrecheckSpec = Field(default_factory=PrecheckSpec, exclude_if=lambda p: not p.allow)
    due: Due | None = None  # optional; a later submission is marked late, never refused
    # Graded submissions that lose points on a check before its first hint is offered (``checks[].hints``).
    hint_after: int = Field(default=2, ge=1, le=20, exclude_if=lambda n: n == 2)
    # When a student may compare their best submission with solution.py. Defaults left out of the dump,
    # as ``precheck``: labs that do not set them keep their stored version.
    reference: Literal["after_full_marks", "after_due", "never"] = Field(
        default="after_full_marks", exclude_if=lambda r: r == "after_full_marks"
    )

    @model_validator(mode="after")
    def _consistent(self) -> LabSpec:
        ids = [c.id for c in self.checks]
        dupes = sorted({i for i in ids if ids.count(i) > 1})
        if dupes:
            raise ValueError(f"duplicate check ids: {', '.join(dupes)}")
        if not self.functions and self.entry != "script":
            raise ValueError("functions must name at least one function the student defines")
        if self.entry == "script" and not self.public_files:
            raise ValueError("a script lab needs a public driver (public_files) to run the script")
        if len(set(self.world_sizes)) != len(self.world_sizes):
            raise ValueError("world_sizes lists a size twice")
        shadowing = sorted({f.removesuffix(".py") for f in self.public_files} & RESERVED_MODULES)
        if shadowing:
            raise ValueError(f"public_files may not be named {', '.join(shadowing)}.py")
        if "checks.py" in self.public_files or "solution.py" in self.public_files:
            raise ValueError("checks.py and solution.py are trusted and never public")
        if self.reference == "after_due" and self.due is None:
            raise ValueError("reference: after_due needs a due date (due:), or choose after_full_marks or never")
        return self

    @property
    def max_score(self) -> int:
        return sum(c.points for c in self.checks)

    def check(self, check_id: str) -> CheckSpec:
        return next(c for c in self.checks if c.id == check_id)


@dataclass(frozen=True)
class Lab:
    """A lab's metadata and its folder. ``checks_path`` and ``solution_path`` are worker-only."""

    spec: LabSpec
    folder: Path

    @property
    def id(self) -> str:
        return self.spec.id

    @property
    def statement(self) -> str:
        return (self.folder / "statement.md").read_text()

    @property
    def starter(self) -> str:
        return (self.folder / "starter.py").read_text()

    @property
    def checks_path(self) -> Path:
        return self.folder / "checks.py"

    @property
    def solution_path(self) -> Path:
        return self.folder / "solution.py"

    @property
    def mutants(self) -> list[Path]:
        """Realistic wrong solutions, each a diff against ``solution.py`` (``mutants/*.diff``; ``labs.spec.mutants``
        parses them)."""
        return sorted((self.folder / "mutants").glob("*.diff"))

    def public_path(self, name: str) -> Path:
        """Where the public file ``name`` is read from (see ``public_path``)."""
        return public_path(self.folder, name)

    def public_sources(self) -> dict[str, str]:
        """The public files' text by name, as the ranks get them."""
        return {name: self.public_path(name).read_text(encoding="utf-8") for name in self.spec.public_files}


def public_path(folder: Path, name: str) -> Path:
    """The lab folder's own file ``name``, or else the shared one beside the labs (``content/labs/_common/``).

    Helpers several labs need (a seeded MLP, a batch cut into shards...) live once in the shared
    folder, and a lab lists them in ``public_files`` by their plain name, as the ranks import them.
    A stored lab version carries its own copy of each (``app.content.labs``), so there the lab
    folder's file is found first, and a worker grades with the helpers of that version.
    """
    own = Path(folder) / name
    return own if own.is_file() else Path(folder).parent / COMMON_DIR / name


def _line_map(node: yaml.Node, loc: tuple[Any, ...], lines: dict[tuple[Any, ...], int]) -> None:
    lines.setdefault(loc, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            child = (*loc, key.value)
            lines[child] = key.start_mark.line + 1
            _line_map(value, child, lines)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _line_map(item, (*loc, i), lines)


def _line(lines: dict[tuple[Any, ...], int], loc: tuple[Any, ...]) -> int:
    while loc and loc not in lines:
        loc = loc[:-1]
    return lines.get(loc, 1)


def _describe(err: Any) -> str:
    where = ".".join(str(p) for p in err["loc"])
    if err["type"] == "extra_forbidden":
        return f"unknown field '{err['loc'][-1]}'"
    if err["type"] == "missing":
        return f"missing field '{where}'"
    return f"{where}: {err['msg']}" if where else err["msg"]


def parse_spec(text: str, where: str) -> LabSpec:
    """Validate ``lab.yaml`` text; a LabError names the line of every problem."""
    try:
        data = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))  # libyaml's: 10x pure Python
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        raise LabError([LabProblem(where, mark.line + 1 if mark else 1, f"YAML syntax: {exc.problem}")]) from None
    if not isinstance(data, dict):
        raise LabError([LabProblem(where, 1, "lab.yaml must be a mapping of fields")])
    try:
        return LabSpec.model_validate(data)
    except ValidationError as exc:
        lines = yaml_lines(text)  # parsed again for its line numbers only when there is a problem to place
        raise LabError([LabProblem(where, _line(lines, tuple(e["loc"])), _describe(e)) for e in exc.errors()]) from None


def load_lab(folder: Path) -> Lab:
    """Read and validate one lab folder; a LabError lists every problem as ``path:line: message``."""
    folder = Path(folder)
    where = str(folder / "lab.yaml")
    missing = [name for name in REQUIRED_FILES if not (folder / name).is_file()]
    if missing:
        raise LabError([LabProblem(str(folder / m), 1, f"missing lab file {m}") for m in missing])
    spec = parse_spec((folder / "lab.yaml").read_text(encoding="utf-8"), where)
    problems = [
        LabProblem(where, 1, f"public file {name} is listed but missing: not in the lab folder, nor in {COMMON_DIR}/")
        for name in spec.public_files
        if not public_path(folder, name).is_file()
    ]
    if spec.id != folder.name:
        problems.append(LabProblem(where, 1, f"id {spec.id!r} must match the folder name {folder.name!r}"))
    if problems:
        raise LabError(problems)
    return Lab(spec, folder)


def load_labs(root: Path = DEFAULT_CONTENT) -> dict[str, Lab]:
    """Every lab under ``root`` (``content/labs``), by id; all problems reported at once."""
    labs: dict[str, Lab] = {}
    problems: list[LabProblem] = []
    for folder in sorted(p for p in Path(root).iterdir() if p.is_dir() and not p.name.startswith((".", "_"))):
        try:
            lab = load_lab(folder)
        except LabError as exc:
            problems.extend(exc.problems)
            continue
        labs[lab.id] = lab
    if problems:
        raise LabError(problems)
    return labs


def yaml_lines(text: str) -> dict[tuple[Any, ...], int]:
    """Where each field and item of a ``lab.yaml`` text is: its location (``("checks", 0, "id")``) -> line."""
    lines: dict[tuple[Any, ...], int] = {}
    try:
        node = yaml.compose(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError:
        return lines
    if node is not None:
        _line_map(node, (), lines)
    return lines


def card_problems(text: str, where: str, spec: LabSpec, card_ids: set[str]) -> list[LabProblem]:
    """Each ``checks[].cards`` id of ``lab.yaml`` (its ``text``) that no deck has, at its line."""
    missing = [(i, j, check.id, card) for i, check in enumerate(spec.checks)
               for j, card in enumerate(check.cards) if card not in card_ids]  # fmt: skip
    lines = yaml_lines(text) if missing else {}
    return [
        LabProblem(where, _line(lines, ("checks", i, "cards", j)), f"check '{c}' names card '{k}', which is in no deck")
        for i, j, c, k in missing
    ]
