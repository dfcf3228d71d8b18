"""``ringlab lab new``: a complete, proven lab folder to start from.

The folder it writes is a working lab (average a tensor across the ranks, in place; judged by its
results against a mean computed outside the ranks and by the bytes each rank sends) with comments
where an author edits: ``ringlab content check`` passes on it and ``ringlab lab test`` proves it
straight away, so an author changes a proven lab one step at a time instead of starting from
nothing. The files are Jinja templates in ``labs/host/new_lab/`` (``<file>.j2``: no linter reads them as
code); the mutants are written as diffs against the rendered ``solution.py``, each from one edit, so
they fit it exactly.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from pathlib import Path

TEMPLATES = Path(__file__).with_name("new_lab")
ID_PATTERN = re.compile(r"^[a-z0-9][a-z0-9._-]*$")
MEASURED_FROM = 3  # the traffic mutant sends as much as an all-reduce at 2 ranks: it shows from 3


class ScaffoldError(ValueError):
    """What stops ``lab new`` before it writes anything: the message says what to change."""


@dataclass(frozen=True)
class Edit:
    """One mistake: ``old`` (text of the rendered solution.py) becomes ``new``."""

    name: str
    mistake: str
    loses: str
    old: str
    new: str
    says: str | None = None
    script: bool | None = None  # None: every kind of lab; else only script labs (True) or only the others


AVERAGE = "    dist.all_reduce(tensor)\n    tensor /= dist.get_world_size()\n"
EDITS = (
    Edit("sums_not_average", "returns the sum of the ranks' tensors: forgets to divide by the world size",
         "average, traffic", AVERAGE, "    dist.all_reduce(tensor)\n"),
    Edit("average_of_a_copy", "divides into a new tensor, so the caller's tensor keeps the sum",
         "average, traffic", AVERAGE, "    dist.all_reduce(tensor)\n    tensor = tensor / dist.get_world_size()\n",
         script=False),
    Edit("average_of_a_copy", "saves the sum: the mean went into a new tensor that is never saved",
         "average, traffic", AVERAGE, "    dist.all_reduce(tensor)\n    mean = tensor / dist.get_world_size()\n",
         script=True),
    Edit("only_rank_zero", "reduces to rank 0 only: the other ranks keep their own tensor, divided",
         "average, traffic", "    dist.all_reduce(tensor)\n", "    dist.reduce(tensor, dst=0)\n"),
    Edit("gather_then_mean", "gathers every rank's tensor and averages locally: right values, (N-1) times the bytes",
         "traffic", AVERAGE,
         "    gathered = [torch.empty_like(tensor) for _ in range(dist.get_world_size())]\n"
         "    dist.all_gather(gathered, tensor)\n    tensor.copy_(torch.stack(gathered).mean(dim=0))\n",
         says="gathering every rank's tensor"),
)  # fmt: skip


def render(
    lab_id: str, exercise: str, world_sizes: list[int], *, driver: bool, script: bool, title: str | None = None
) -> dict[str, str]:
    """The new lab's files by relative path (``mutants/<name>.diff`` included)."""
    import jinja2

    if title is not None and (not title.strip() or '"' in title or "\n" in title):
        raise ScaffoldError("--title must be one line of text without double quotes")
    if not ID_PATTERN.match(lab_id):
        raise ScaffoldError(f"'{lab_id}' is not a lab id: lowercase letters, digits, '.', '_' and '-'")
    if not world_sizes or any(n < 1 or n > 8 for n in world_sizes) or len(set(world_sizes)) != len(world_sizes):
        raise ScaffoldError("--world-sizes takes distinct sizes from 1 to 8, e.g. 2,3,4")
    if max(world_sizes) < MEASURED_FROM:
        raise ScaffoldError(
            f"--world-sizes needs a size of {MEASURED_FROM} or more: the example's traffic check tells an all-gather"
            " from an all-reduce only from 3 ranks (you can change the sizes once the lab is proven)"
        )
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        keep_trailing_newline=True,
        trim_blocks=True,  # a line holding only a block tag leaves no line behind
        lstrip_blocks=True,
        undefined=jinja2.StrictUndefined,
        autoescape=False,  # Python, YAML and Markdown sources, never HTML
    )
    values = {
        "id": lab_id,
        "title": title or lab_id.replace("-", " ").capitalize(),
        "exercise": exercise,
        "world_sizes": sorted(world_sizes),
        "driver": driver or script,
        "script": script,
    }
    names = ["lab.yaml", "statement.md", "starter.py", "solution.py", "checks.py"]
    names += ["driver.py"] if driver or script else []
    files = {name: env.get_template(f"{name}.j2").render(values) for name in names}
    for edit in EDITS:
        if edit.script is None or edit.script == script:
            files[f"mutants/{edit.name}.diff"] = mutant(files["solution.py"], edit)
    return files


def mutant(solution: str, edit: Edit) -> str:
    """The diff of ``solution`` with ``edit`` made, under its header."""
    if solution.count(edit.old) != 1:
        raise AssertionError(f"the template's solution.py has {solution.count(edit.old)} copies of {edit.old!r}")
    wrong = solution.replace(edit.old, edit.new)
    header = [f"# mistake: {edit.mistake}", f"# loses: {edit.loses}"]
    header += [f"# says: {edit.says}"] if edit.says else []
    diff = difflib.unified_diff(
        solution.splitlines(keepends=True), wrong.splitlines(keepends=True), "solution.py", "solution.py"
    )
    return "\n".join(header) + "\n" + "".join(diff)


def write(content: Path, files: dict[str, str], lab_id: str) -> Path:
    """Write the files into ``content/labs/<lab_id>``, which must not exist yet."""
    folder = content / "labs" / lab_id
    if folder.exists():
        raise ScaffoldError(f"{folder} already exists: choose another id, or remove the folder")
    for name, text in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return folder
