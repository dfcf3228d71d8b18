"""Lab metadata: both labs load, files agree with lab.yaml, errors name a file and line."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from labs.spec import LabError, load_lab, load_labs, parse_spec
from labs.verdict import CheckResult, Verdict

from .conftest import labs_dir

REPO = Path(__file__).resolve().parents[2]


def test_both_labs_load_with_their_seed_exercises() -> None:
    labs = load_labs(labs_dir())
    assert labs["collectives-p2p"].spec.exercise == "ex-35-1"
    assert labs["ring-allreduce"].spec.exercise == "ex-35-2"
    assert labs["ring-allreduce"].spec.world_sizes == [2, 3, 4]
    assert labs["collectives-p2p"].spec.max_score == 10


@pytest.mark.parametrize("lab_id", ["collectives-p2p", "ring-allreduce"])
def test_starter_and_solution_define_exactly_the_student_functions(lab_id: str) -> None:
    lab = load_lab(labs_dir() / lab_id)
    for text in (lab.starter, lab.solution_path.read_text()):
        tree = ast.parse(text)
        public = {n.name for n in tree.body if isinstance(n, ast.FunctionDef) and not n.name.startswith("_")}
        assert public == set(lab.spec.functions)
    assert f"/exercises/ch35-exercises#{lab.spec.exercise})" in lab.statement  # links to its seed exercise


@pytest.mark.parametrize("lab_id", ["collectives-p2p", "ring-allreduce"])
def test_statement_quotes_its_seed_exercise(lab_id: str) -> None:
    lab = load_lab(labs_dir() / lab_id)
    seed = next(
        p for p in (REPO / "content" / "exercises").rglob("*.md") if f"id: {lab.spec.exercise}\n" in p.read_text()
    )
    exercise_text = seed.read_text().split("---", 2)[2].strip()
    assert exercise_text in lab.statement.replace("\n", " ")


def test_invalid_lab_yaml_is_reported_with_path_and_line(tmp_path: Path) -> None:
    folder = tmp_path / "bad-lab"
    folder.mkdir()
    for name in ("statement.md", "starter.py", "checks.py", "solution.py"):
        (folder / name).write_text("")
    (folder / "lab.yaml").write_text(
        "id: bad-lab\ntitle: Bad\nexercise: ex-1\nworld_sizes: [2]\nbackends: [gloo]\n"
        "time_limit_s: 5\nmemory_limit_mb: 256\nfunctions: [f]\nchecks:\n  - id: a\n    title: A\n    points: 1\n"
        "    colour: red\n"
    )
    with pytest.raises(LabError) as exc:
        load_lab(folder)
    assert str(exc.value) == f"{folder / 'lab.yaml'}:13: unknown field 'colour'"


def test_after_lists_each_lab_once_and_is_left_out_of_the_stored_spec_when_empty() -> None:
    base = (
        "id: lab-b\ntitle: B\nexercise: ex-1\nworld_sizes: [2]\nbackends: [gloo]\ntime_limit_s: 5\n"
        "memory_limit_mb: 256\nfunctions: [f]\nchecks:\n  - {id: a, title: A, points: 1}\n"
    )
    assert parse_spec(base + "after: [lab-a]\n", "lab.yaml").after == ["lab-a"]
    assert "after" not in parse_spec(base, "lab.yaml").model_dump(mode="json")  # old labs keep their version
    with pytest.raises(LabError) as exc:
        parse_spec(base + "after:\n  - lab-a\n  - lab-a\n", "lab.yaml")
    assert str(exc.value) == "lab.yaml:11: after: Value error, names lab-a more than once: list each lab once"


def test_missing_lab_file_is_reported(tmp_path: Path) -> None:
    (tmp_path / "x").mkdir()
    with pytest.raises(LabError, match=r"missing lab file lab\.yaml"):
        load_lab(tmp_path / "x")


def test_metadata_and_verdicts_never_import_torch() -> None:
    code = "import sys, labs.spec, labs.verdict, labs.host.pool, labs.host.sandbox; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True)
    assert out.stdout.strip() == "False"


def test_verdict_round_trips_through_json() -> None:
    v = Verdict("ring-allreduce", "failed", 4, 10, "wrong", [CheckResult("a", "A", 4, True, 4, "ok", {"x": [1]})])
    assert Verdict.from_json(v.to_json()) == v
