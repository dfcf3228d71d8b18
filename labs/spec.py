"""Lab metadata: what ``content/labs/<id>/lab.yaml`` may say, and where its files are.

Torch-free on purpose: the web process lists and shows labs through this module
and must never import torch. ``checks.py`` and ``solution.py`` are trusted files
that only the worker opens; nothing here reads them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from app.content.models import Due
from app.content.source import ContentError, Problem, parse_yaml, validation_problems

ID = Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9._-]*$", max_length=80)]
REQUIRED_FILES = ("lab.yaml", "statement.md", "starter.py", "checks.py", "solution.py")
DEFAULT_CONTENT = Path(__file__).resolve().parents[1] / "content" / "labs"


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, str_strip_whitespace=True)


class CheckSpec(Strict):
    id: ID
    title: Annotated[str, Field(min_length=1)]
    points: int = Field(ge=0, le=100)


class LabSpec(Strict):
    """One lab's ``lab.yaml``."""

    id: ID
    title: Annotated[str, Field(min_length=1)]
    exercise: ID
    world_sizes: list[Annotated[int, Field(ge=1, le=8)]] = Field(min_length=1)
    backends: list[Literal["gloo", "nccl"]] = Field(min_length=1)
    needs_gpu: bool = False
    time_limit_s: float = Field(gt=0, le=120)
    memory_limit_mb: int = Field(ge=64, le=16384)
    functions: list[Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")]] = Field(min_length=1)
    checks: list[CheckSpec] = Field(min_length=1)
    due: Due | None = None  # optional; a later submission is marked late, never refused

    @model_validator(mode="after")
    def _unique_checks(self) -> LabSpec:
        ids = [c.id for c in self.checks]
        dupes = sorted({i for i in ids if ids.count(i) > 1})
        if dupes:
            raise ValueError(f"duplicate check ids: {', '.join(dupes)}")
        if len(set(self.world_sizes)) != len(self.world_sizes):
            raise ValueError("world_sizes lists a size twice")
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


def load_lab(folder: Path) -> Lab:
    """Read and validate one lab folder; a ContentError lists every problem as ``path:line: message``."""
    folder = Path(folder)
    where = str(folder / "lab.yaml")
    missing = [name for name in REQUIRED_FILES if not (folder / name).is_file()]
    if missing:
        raise ContentError([Problem(str(folder / m), 1, f"missing lab file {m}") for m in missing])
    source = parse_yaml((folder / "lab.yaml").read_text(), where)
    if not isinstance(source.data, dict):
        raise ContentError([Problem(where, 1, "lab.yaml must be a mapping of fields")])
    try:
        spec = LabSpec.model_validate(source.data)
    except ValidationError as exc:
        raise ContentError(validation_problems(exc, source)) from None
    if spec.id != folder.name:
        raise ContentError([source.problem(("id",), f"id {spec.id!r} must match the folder name {folder.name!r}")])
    return Lab(spec, folder)


def load_labs(root: Path = DEFAULT_CONTENT) -> dict[str, Lab]:
    """Every lab under ``root`` (``content/labs``), by id; all problems reported at once."""
    labs: dict[str, Lab] = {}
    problems: list[Problem] = []
    for folder in sorted(p for p in Path(root).iterdir() if p.is_dir() and not p.name.startswith((".", "_"))):
        try:
            lab = load_lab(folder)
        except ContentError as exc:
            problems.extend(exc.problems)
            continue
        labs[lab.id] = lab
    if problems:
        raise ContentError(problems)
    return labs
