"""Mutants as diffs (``labs.spec.mutants``): the header an author writes, the diff applied exactly, the authoring
errors named by file and line, and what a mutant's grading must show against its header."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from labs.spec import LabError, load_lab, mutants
from labs.spec.mutants import Check

FIXTURE = Path(__file__).parent / "fixtures" / "tree-lab"
REPO = Path(__file__).resolve().parents[2]
SOLUTION = (FIXTURE / "solution.py").read_text()
NO_ALL_REDUCE = SOLUTION.replace("    dist.all_reduce(total)\n", "")


@pytest.fixture
def lab(tmp_path: Path):  # type: ignore[no-untyped-def]
    """A copy of the engine's test lab (checks total, local, handoff; world sizes 2 and 3) to add mutants to."""
    shutil.copytree(FIXTURE, tmp_path / "labs" / "tree-lab")
    (tmp_path / "labs" / "tree-lab" / "mutants").mkdir()
    return load_lab(tmp_path / "labs" / "tree-lab")


def put(lab, name: str, text: str) -> Path:  # type: ignore[no-untyped-def]
    path = lab.folder / "mutants" / name
    path.write_text(text)
    return path


def problems(lab) -> list[str]:  # type: ignore[no-untyped-def]
    with pytest.raises(LabError) as exc:
        mutants.load(lab)
    return [str(p) for p in exc.value.problems]


def test_a_written_mutant_reads_back_with_its_header_and_code(lab) -> None:
    text = mutants.write(
        "never all-reduces: each rank's total is its own part",
        SOLUTION,
        NO_ALL_REDUCE,
        loses=["total"],
        may_lose=["handoff"],
        says=["expected", "total"],
        world_sizes=[2],
    )
    assert text.startswith(
        "# mistake: never all-reduces: each rank's total is its own part\n# loses: total\n# may lose: handoff\n"
        "# says: expected\n# says: total\n# world sizes: 2\n--- solution.py\n+++ solution.py\n@@ "
    )
    put(lab, "no_all_reduce.diff", text)
    (m,) = mutants.load(lab)
    assert (m.name, m.label) == ("no_all_reduce", "mutants/no_all_reduce.diff")
    assert m.mistake == "never all-reduces: each rank's total is its own part"
    assert m.loses == {"total"} and m.may_lose == {"handoff"} and m.says == ("expected", "total")
    assert m.world_sizes == (2,) and m.code == NO_ALL_REDUCE


def test_a_diff_that_no_longer_applies_names_the_file_and_the_hunks_line(lab) -> None:
    text = mutants.write("never all-reduces", SOLUTION, NO_ALL_REDUCE, loses=["total"])
    put(lab, "no_all_reduce.diff", text.replace(" def combine(", " def combine_all("))
    (found,) = problems(lab)
    hunk = text.splitlines().index(next(line for line in text.splitlines() if line.startswith("@@"))) + 1
    assert found.startswith(f"{lab.folder / 'mutants' / 'no_all_reduce.diff'}:{hunk}: the diff no longer applies")
    assert "def combine_all(" in found


@pytest.mark.parametrize(
    ("header", "line", "says"),
    [
        ("# mistake: never all-reduces\n", 1, "missing header line '# loses: ...'"),
        ("# loses: total\n", 1, "missing header line '# mistake: ...'"),
        ("# mistake: x\n# loses: total\n# lose: local\n", 3, "unknown header line '# lose: local': the keys are"),
        ("# mistake: x\n# loses: total, locals\n", 2, "'loses:' names locals, not a check of lab.yaml"),
        ("# mistake: x\n# loses: total\n# may lose: total\n", 3, "total in both 'loses:' and 'may lose:'"),
        ("# mistake: x\n# loses: total\n# world sizes: 4\n", 3, "must be some of the lab's world sizes (2, 3)"),
        ("# mistake: x\n# loses: total\n# world sizes: two\n", 3, "must be whole numbers"),
        ("# mistake: x\n# mistake: y\n# loses: total\n", 2, "'mistake:' given twice"),
        ("# mistake:\n# loses: total\n", 1, "'mistake:' is empty"),
    ],
)
def test_a_bad_header_is_an_authoring_error_at_its_line(lab, header: str, line: int, says: str) -> None:
    diff = mutants.write("x", SOLUTION, NO_ALL_REDUCE, loses=["total"]).split("--- ", 1)[1]
    put(lab, "bad.diff", header + "--- " + diff)
    found = problems(lab)
    assert any(p.startswith(f"{lab.folder / 'mutants' / 'bad.diff'}:{line}: ") and says in p for p in found), found


def test_a_mutant_must_lose_a_check_with_points_and_change_something(lab) -> None:
    text = (FIXTURE / "lab.yaml").read_text().replace("points: 2}", "points: 0}")
    (lab.folder / "lab.yaml").write_text(text)
    put(lab, "feedback_only.diff", mutants.write("x", SOLUTION, NO_ALL_REDUCE, loses=["local"]))
    put(lab, "same.diff", "# mistake: x\n# loses: total\n--- solution.py\n+++ solution.py\n")
    found = problems(load_lab(lab.folder))
    assert any("feedback_only.diff:2: 'loses:' names no check with points" in p for p in found), found
    assert any(("same.diff:3: " in p and "changes nothing" in p) or "one unified diff" in p for p in found), found


def test_a_copy_of_the_solution_left_in_mutants_is_refused(lab) -> None:
    put(lab, "old_style.py", "# the old way: a whole copy\n" + NO_ALL_REDUCE)
    assert problems(lab) == [
        f"{lab.folder / 'mutants' / 'old_style.py'}:1: not a mutant: mutants/ holds .diff files only"
    ]


def mutant(loses: set[str], may_lose: set[str] = frozenset(), says: tuple[str, ...] = ()) -> mutants.Mutant:
    return mutants.Mutant("m", Path("m.diff"), "x", frozenset(loses), frozenset(may_lose), says, None, "")


def graded(*checks: tuple[str, int, float, bool, str]) -> list[Check]:
    return [Check(*c) for c in checks]


def test_a_grading_matches_its_header_only_when_exactly_its_checks_fail() -> None:
    result = graded(("total", 4, 0, False, "total is wrong"), ("local", 2, 2, True, ""), ("feedback", 0, 0, False, "!"))
    assert mutants.mismatches(mutant({"total", "feedback"}, says=("is wrong",)), result) == []
    assert mutants.mismatches(mutant({"total"}, {"feedback"}), result) == []
    assert mutants.mismatches(mutant({"total"}), result) == ["also loses feedback, not in its 'loses:'"]
    assert mutants.mismatches(mutant({"total", "local", "feedback"}), result) == ["passes local, which it should lose"]
    assert mutants.mismatches(mutant({"total", "feedback"}, says=("local",)), result) == [
        "its failed checks' messages do not say 'local'"
    ]
    kept = graded(("total", 4, 4, False, "a failure that cost nothing"), ("local", 2, 1, True, ""))
    assert mutants.mismatches(mutant({"total"}), kept) == [
        "fails total but keeps all its points",
        "passes local but loses points on it",
    ]


def test_the_proofs_table_shows_why_a_row_is_wrong_in_the_graders_words(lab) -> None:
    """A row that is not as it must be prints its failed checks' messages whole (a flaky grading shows what it said
    the one time it went wrong); a row that is as it must be stays one line."""
    from labs.host.prove import Row, table
    from labs.verdict import CheckResult, Verdict

    said = "world size 2: rank 0's total is 3.0, not 6.0: " + "the ranks' parts were never summed " * 4
    checks = [CheckResult("total", "Total", 4, False, 0.0, said), CheckResult("local", "Local", 2, True, 2.0, "ok")]
    verdict = Verdict("tree-lab", "failed", 2.0, 6, "1 of 2 checks passed", checks, elapsed_s=0.5)
    wrong = mutant({"local"}, says=("in the ring",))
    rows = [
        Row("mutants/a.diff", "mutant", verdict, mutants.mismatches(wrong, checks), wrong),
        Row("mutants/b.diff", "mutant", verdict, [], mutant({"total"})),
    ]
    lines = table(load_lab(lab.folder), rows).splitlines()
    assert len(lines) == 4, lines
    assert "WRONG: passes local, which it should lose" in lines[1] and "do not say 'in the ring'" in lines[1]
    assert lines[2] == "    FAIL total 0/4: " + said
    assert lines[3].startswith("mutants/b.diff") and lines[3].endswith("ok: loses total")


MUTANTS = {
    "no_all_reduce.diff": ("never all-reduces: each rank's total is its own part", NO_ALL_REDUCE, ["total"]),
    "unscaled.diff": ("forgets the scale", SOLUTION.replace("local = x * scale", "local = x"), ["total", "local"]),
    "swapped.diff": (
        "returns local, total",
        SOLUTION.replace("return total, local", "return local, total"),
        ["total", "local"],
    ),
    "total_not_cloned.diff": (
        "all-reduces local itself: total is not a copy",
        SOLUTION.replace("total = local.clone()", "total = local"),
        ["local"],
    ),
}


def test_lab_test_proves_a_lab_whose_mutants_lose_their_checks_and_names_the_one_that_does_not(lab) -> None:
    """`ringlab lab test --verbose` on a small lab: the starter below full marks, four mutants losing what their
    headers say, one whose header is wrong named with the reason, and every message printed whole."""
    for name, (mistake, code, loses) in MUTANTS.items():
        put(lab, name, mutants.write(mistake, SOLUTION, code, loses=loses, says=["expected"]))
    doubled = SOLUTION.replace("local = x * scale", "local = x * scale * 2")
    put(lab, "doubled.diff", mutants.write("doubles the scale", SOLUTION, doubled, loses=["local"], world_sizes=[2]))
    env = {**os.environ, "RINGLAB_CONTENT_DIR": str(lab.folder.parents[1])}
    out = subprocess.run(
        [str(Path(sys.executable).with_name("ringlab")), "lab", "test", "tree-lab", "--no-record", "--verbose"],
        capture_output=True, text=True, cwd=REPO, env=env, timeout=300, check=False,
    )  # fmt: skip
    assert out.returncode == 1, out.stdout + out.stderr
    rows = {line.split()[0]: line for line in out.stdout.splitlines() if line.split()[:1] and "s  " in line}
    assert "passed" in rows["solution.py"] and rows["solution.py"].endswith("s  ok")
    assert (
        "below" in rows["starter.py"] and rows["starter.py"].endswith("s  ok") and "2/8" in rows["starter.py"]
    )  # handoff is the driver's
    for name, (_, _, loses) in MUTANTS.items():
        assert f"ok: loses {', '.join(loses)}" in rows[f"mutants/{name}"], out.stdout
    assert "WRONG: also loses total, not in its 'loses:'" in rows["mutants/doubled.diff"], out.stdout
    assert "    mistake: doubles the scale" in out.stdout
    # --verbose: each check's whole message, not cut at 60 characters.
    messages = [line for line in out.stdout.splitlines() if line.startswith("    FAIL total ")]
    assert messages and max(len(m) for m in messages) > 100, messages
    assert "NOT PROVEN: tree-lab" in out.stderr


def test_lab_test_names_a_diff_that_no_longer_applies_and_grades_nothing_of_that_lab(lab) -> None:
    text = mutants.write("never all-reduces", SOLUTION, NO_ALL_REDUCE, loses=["total"])
    put(
        lab,
        "no_all_reduce.diff",
        text.replace("    dist.all_reduce(total)", "    dist.all_reduce(total, async_op=False)"),
    )
    env = {**os.environ, "RINGLAB_CONTENT_DIR": str(lab.folder.parents[1])}
    out = subprocess.run(
        [str(Path(sys.executable).with_name("ringlab")), "lab", "test", "tree-lab", "--no-record"],
        capture_output=True, text=True, cwd=REPO, env=env, timeout=300, check=False,
    )  # fmt: skip
    assert out.returncode == 1, out.stdout + out.stderr
    assert f"{lab.folder / 'mutants' / 'no_all_reduce.diff'}:5: the diff no longer applies to solution.py" in out.stderr
    assert "solution.py  " not in out.stdout and "NOT PROVEN: tree-lab" in out.stderr


def test_a_tolerance_key_that_names_no_result_is_an_authoring_error(tmp_path: Path) -> None:
    """``ringlab lab test`` builds the lab's cases and names a tolerance key that holds nothing to it."""
    from labs.host.prove import tolerance_problems
    from labs.spec import COMMON_DIR, DEFAULT_CONTENT, load_lab

    assert tolerance_problems(load_lab(DEFAULT_CONTENT / "checkpoint-resharding")) == []
    copy = tmp_path / "checkpoint-resharding"
    shutil.copytree(DEFAULT_CONTENT / "checkpoint-resharding", copy, ignore=shutil.ignore_patterns("mutants"))
    shutil.copytree(DEFAULT_CONTENT / COMMON_DIR, tmp_path / COMMON_DIR)
    checks = copy / "checks.py"
    checks.write_text(checks.read_text().replace('tolerance={"resumed": TOLERANCE}', 'tolerance={"resume": TOLERANCE}'))
    problems = tolerance_problems(load_lab(copy))
    assert problems == [
        f"{copy / 'checks.py'}: tolerance key 'resume' (in the case step 4 on 2 ranks after load_checkpoint) is a"
        " prefix of no path of any case's expected result: the values it meant keep their dtype's default tolerance"
    ]


def test_a_built_case_is_held_to_the_checks_contract(tmp_path: Path) -> None:
    """A parts key, check id or driver function the content check cannot read (made before the ``Case``
    call) is still named by ``ringlab lab test``, from the cases the lab builds."""
    from labs.host.prove import case_problems
    from labs.spec import COMMON_DIR, DEFAULT_CONTENT, load_lab

    assert case_problems(load_lab(DEFAULT_CONTENT / "zero-1")) == []
    copy = tmp_path / "zero-1"
    shutil.copytree(DEFAULT_CONTENT / "zero-1", copy, ignore=shutil.ignore_patterns("mutants"))
    shutil.copytree(DEFAULT_CONTENT / COMMON_DIR, tmp_path / COMMON_DIR)
    checks = copy / "checks.py"
    text = checks.read_text()
    built = 'parts, tolerance = {"sharded-state": ["digest"]}'
    assert built in text and 'driver="memory"' in text
    checks.write_text(
        text.replace(built, 'parts, tolerance = {"sharded-states": ["digest"]}').replace(
            'driver="memory"', 'driver="memroy"'
        )
    )
    problems = case_problems(load_lab(copy))
    assert len(problems) == 2 and all(p.startswith(f"{checks}: the case ") for p in problems), problems
    assert "has parts 'sharded-states', which is not a check in lab.yaml" in problems[0]
    assert "runs driver.memroy, which driver.py does not define" in problems[1]
