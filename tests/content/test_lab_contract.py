"""The checks contract: each name that crosses between a lab's files is checked by the content check, at its line.

Each test breaks one thing in a copy of a real lab, as an author would by mistake, and reads what
``load_lab_content`` (the content check's lab validation) says: the file, the line and the fault.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from app.content.labs import load_lab_content
from labs.host.prove import unmatched_tolerances
from labs.spec import parse_spec
from labs.spec.contract import check

CONTENT = Path(__file__).resolve().parents[2] / "content"
REPO = CONTENT.parent


def lab_copy(tmp_path: Path, lab_id: str) -> Path:
    folder = tmp_path / lab_id
    shutil.copytree(CONTENT / "labs" / lab_id, folder, ignore=shutil.ignore_patterns("mutants", "__pycache__"))
    shutil.copytree(CONTENT / "labs" / "_common", tmp_path / "_common", dirs_exist_ok=True)  # the shared helpers
    return folder


def edit(folder: Path, name: str, old: str, new: str) -> int:
    """Replace ``old`` (once) in ``folder/name``; the line where ``new`` starts."""
    text = (folder / name).read_text()
    assert text.count(old) >= 1, old
    at = text.index(old)
    (folder / name).write_text(text[:at] + new + text[at + len(old) :])
    return text[:at].count("\n") + 1


def problems(folder: Path) -> list[str]:
    spec = parse_spec((folder / "lab.yaml").read_text(), "lab.yaml")
    lab, found = load_lab_content(folder, lambda p: str(p.relative_to(folder.parent)), {spec.exercise})
    assert (lab is None) == bool(found)
    return [str(p) for p in found]


@pytest.mark.parametrize("lab_id", sorted(p.parent.name for p in (CONTENT / "labs").glob("*/lab.yaml")))
def test_every_lab_in_the_repository_keeps_the_contract(tmp_path: Path, lab_id: str) -> None:
    assert problems(lab_copy(tmp_path, lab_id)) == []


def test_a_misspelt_rules_key_is_named_with_the_checks_there_are(tmp_path: Path) -> None:
    folder = lab_copy(tmp_path, "ring-allreduce")
    line = edit(
        folder, "checks.py", '"communication-volume": communication_volume', '"comm-volume": communication_volume'
    )
    assert problems(folder) == [
        f"ring-allreduce/checks.py:{line}: RULES names 'comm-volume', which is not a check in lab.yaml (its checks: "
        "communication-volume, no-builtin-collectives, ring-all-reduce, ring-neighbours)",
        # ... and so the check it meant is judged by nothing.
        f"ring-allreduce/lab.yaml:{_yaml_line(folder, 'id: communication-volume')}: check 'communication-volume' is "
        "judged by nothing in checks.py: no RULES entry, no Case and no parts key names it",
    ]


def _yaml_line(folder: Path, text: str) -> int:
    return next(i for i, line in enumerate((folder / "lab.yaml").read_text().splitlines(), 1) if text in line)


def test_a_rule_that_names_a_function_checks_py_lacks(tmp_path: Path) -> None:
    folder = lab_copy(tmp_path, "ring-allreduce")
    line = edit(folder, "checks.py", '"communication-volume": communication_volume', '"communication-volume": volume')
    assert problems(folder) == [
        f"ring-allreduce/checks.py:{line}: RULES['communication-volume'] is volume, which checks.py does not define"
    ]


def test_rules_built_by_code_cannot_be_checked_so_are_refused(tmp_path: Path) -> None:
    folder = lab_copy(tmp_path, "ring-allreduce")
    line = edit(folder, "checks.py", "RULES = {", "RULES = dict(**{")
    edit(
        folder,
        "checks.py",
        '    "no-builtin-collectives": no_builtin_collectives,\n}',
        '    "no-builtin-collectives": no_builtin_collectives,\n})',
    )
    assert problems(folder)[0] == (
        f'ring-allreduce/checks.py:{line}: RULES must be written out as a dict, {{"check-id": function, ...}}, so '
        "that its ids can be checked"
    )


def test_a_case_for_a_check_lab_yaml_does_not_have(tmp_path: Path) -> None:
    folder = lab_copy(tmp_path, "collectives-p2p")
    line = edit(folder, "checks.py", 'Case("all-reduce",', 'Case("allreduce",')
    found = problems(folder)
    assert found[0].startswith(
        f"collectives-p2p/checks.py:{line}: a Case judges 'allreduce', which is not a check in lab.yaml (its checks: "
    )
    assert found[1:] == [
        f"collectives-p2p/lab.yaml:{_yaml_line(folder, 'id: all-reduce')}: check 'all-reduce' is judged by nothing "
        "in checks.py: no RULES entry, no Case and no parts key names it"
    ]


def test_a_parts_key_for_an_unknown_check(tmp_path: Path) -> None:
    folder = lab_copy(tmp_path, "checkpoint-resharding")
    line = edit(folder, "checks.py", '"optimizer-state": ["optimizer"]', '"optimiser-state": ["optimizer"]')
    assert problems(folder)[0] == (
        f"checkpoint-resharding/checks.py:{line}: parts names 'optimiser-state', which is not a check in lab.yaml"
    )


def test_a_driver_function_the_driver_does_not_define_is_ours_not_the_students(tmp_path: Path) -> None:
    folder = lab_copy(tmp_path, "checkpoint-resharding")
    line = edit(folder, "checks.py", 'driver="resume",', 'driver="resumed",')
    found = problems(folder)
    assert found == [
        f"checkpoint-resharding/checks.py:{line}: a Case runs driver.resumed, which driver.py does not define: every "
        "student would get a runtime error"
    ]


def test_cases_missing_or_with_the_wrong_signature(tmp_path: Path) -> None:
    folder = lab_copy(tmp_path, "ring-allreduce")
    line = edit(folder, "checks.py", "def cases(world_size: int, gen: torch.Generator)", "def cases(world_size: int)")
    assert problems(folder) == [
        f"ring-allreduce/checks.py:{line}: cases() takes 1 positional parameters; the grader calls "
        "cases(world_size, gen)"
    ]
    edit(folder, "checks.py", "def cases(world_size: int)", "def make_cases(world_size: int, gen: torch.Generator)")
    assert problems(folder) == [
        "ring-allreduce/checks.py:1: defines neither cases(world_size, gen) nor phases(world_sizes, gen): the grader "
        "calls one of them to build the calls it runs"
    ]


def test_a_function_the_starter_or_the_solution_does_not_define(tmp_path: Path) -> None:
    folder = lab_copy(tmp_path, "ring-allreduce")
    edit(folder, "starter.py", "def ring_all_reduce(", "def ring_allreduce(")
    assert problems(folder) == [
        f"ring-allreduce/lab.yaml:{_yaml_line(folder, 'functions:')}: functions names ring_all_reduce, which "
        "starter.py does not define"
    ]


def test_an_import_checks_py_could_not_make_or_from_outside_the_authoring_api(tmp_path: Path) -> None:
    folder = lab_copy(tmp_path, "ring-allreduce")
    line = edit(folder, "checks.py", "from labs.authoring import Case,", "from labs.authoring import Cases,")
    assert problems(folder) == [
        f"ring-allreduce/checks.py:{line}: labs.authoring has no Cases: its names are listed in docs/authoring-labs.md"
    ]
    edit(folder, "checks.py", "from labs.authoring import Cases,", "from labs.host.judge import Case,")
    assert problems(folder) == [
        f"ring-allreduce/checks.py:{line}: imports labs.host.judge: a lab imports the engine from labs.authoring"
        " only (its names are listed in docs/authoring-labs.md)"
    ]


def test_a_syntax_error_is_one_problem_at_its_line(tmp_path: Path) -> None:
    folder = lab_copy(tmp_path, "ring-allreduce")
    line = edit(folder, "checks.py", "def cases(", "def cases((")
    found = problems(folder)
    assert len(found) == 1 and found[0].startswith(f"ring-allreduce/checks.py:{line}: not valid Python: "), found


def test_a_case_no_check_judges_is_spelt_out() -> None:
    """A setup call judged by no check of its own says so with ``UNJUDGED``; any other unknown id is a typo."""
    spec = parse_spec((CONTENT / "labs" / "ring-allreduce" / "lab.yaml").read_text(), "lab.yaml")
    body = (
        "from labs.authoring import UNJUDGED, Case\n\n\n"
        "def cases(world_size, gen):\n    return [Case(UNJUDGED, 'f', 'l', [], [])]\n"
    )
    texts = {"checks.py": body + "\nRULES = {'ring-all-reduce': cases, 'ring-neighbours': cases, "
             "'communication-volume': cases, 'no-builtin-collectives': cases}\n"}  # fmt: skip
    assert check(spec, lambda name: f"lab/{name}", {}, texts) == []
    texts["checks.py"] = texts["checks.py"].replace("Case(UNJUDGED,", "Case('setup',")
    assert [p.message for p in check(spec, lambda name: f"lab/{name}", {}, texts)] == [
        "a Case judges 'setup', which is not a check in lab.yaml (its checks: communication-volume, "
        "no-builtin-collectives, ring-all-reduce, ring-neighbours)"
    ]


def test_the_content_check_command_reports_a_contract_problem(tmp_path: Path) -> None:
    """End to end: the author's command, on a content tree with one typo, names it and changes nothing."""
    root = tmp_path / "content"
    shutil.copytree(CONTENT, root, ignore=shutil.ignore_patterns("mutants", "__pycache__"))
    line = edit(root / "labs" / "ring-allreduce", "checks.py", '"ring-neighbours":', '"ring-neighbors":')
    done = subprocess.run(
        [sys.executable, "-m", "app", "content", "check", str(root)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"labs/ring-allreduce/checks.py:{line}: RULES names 'ring-neighbors', which is not a check" in done.stderr


def test_a_tolerance_key_that_matches_no_result_path_is_found() -> None:
    expected = {"params": {"w": [1.0, 2.0]}, "loss": 0.5, "optimizer": [{"exp_avg": 0.1}]}
    tolerance = {"params": (1e-5, 0.0), 'params["w"]': (1e-4, 0.0), "optimizer[0]": (1e-3, 0.0)}
    assert unmatched_tolerances(tolerance, expected) == []
    assert unmatched_tolerances({"param": (1e-5, 0.0), "loss": (1e-6, 0.0), "los": (1e-6, 0.0)}, expected) == [
        "param",
        "los",
    ]
    assert unmatched_tolerances(None, expected) == []
