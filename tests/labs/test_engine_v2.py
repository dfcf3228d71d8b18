"""The v2 lab contract on a small lab of the tests' own: public drivers, trees, phases, preloads."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.labs.conftest import MODES

FIXTURES = Path(__file__).parent / "fixtures"
LAB = "tree-lab"
SOLUTION = (FIXTURES / LAB / "solution.py").read_text()


@pytest.fixture(scope="module", params=MODES[:1])  # the worker's mode (tests/labs/conftest.py)
def tree_grader(request: pytest.FixtureRequest) -> Iterator[object]:
    from labs.host.grader import Grader

    g = Grader(FIXTURES, pool_size=1, fork_from_template=request.param == "fork")
    yield g
    g.close()


def test_reference_gets_full_marks_through_the_driver_and_both_phases(tree_grader) -> None:
    v = tree_grader.grade(LAB, SOLUTION)
    assert v.status == "passed", v.message
    assert v.score == v.max_score == 8
    # Every measured group's rank x peer byte matrix, from the kernel counters.
    assert set(v.data["wire"]) == {"world size 2", "world size 3"}
    assert all(sum(map(sum, m)) > 0 for m in v.data["wire"].values())


def test_a_wrong_leaf_is_named_by_its_path_and_other_checks_hold(tree_grader) -> None:
    code = SOLUTION.replace("return total, local", "total[3] += dist.get_rank() == 1\n    return total, local")
    v = tree_grader.grade(LAB, code)
    assert v.status == "failed"
    total = v.check("total")
    assert "rank 1" in total.message and "total[3] is" in total.message and "expected" in total.message
    # The same mistake at world size 3 is said once, not repeated.
    assert "(the same at world size 3)" in total.message
    # Partial credit: 3 of 5 rank results are right at world sizes 2 and 3 together: 3/5 of 4 points.
    assert total.score == 2.4
    assert v.check("local").passed and v.check("handoff").passed


def test_results_must_be_plain_data(tree_grader) -> None:
    code = SOLUTION.replace("return total, local", "return total, {1, 2}")
    v = tree_grader.grade(LAB, code)
    msg = v.check("local").message
    assert "WrongReturnType" in msg and "set" in msg, msg


def test_inputs_are_drawn_per_submission(tree_grader) -> None:
    # A submission that replays the outputs of one grade fails the next one.
    first = tree_grader.grade(LAB, SOLUTION, seed=1)
    assert first.passed
    replay = SOLUTION.replace("local = x * scale", "local = x * 0 + 1.2345")
    assert not tree_grader.grade(LAB, replay, seed=2).check("local").passed


def test_preloads_and_read_only_public_files(tree_grader) -> None:
    code = SOLUTION + (
        "\nimport sys, os, driver\n"
        "_real = combine\n"
        "def combine(x, scale):\n"
        "    assert 'torch._dynamo' in sys.modules, 'not preloaded'\n"
        "    try:\n"
        "        open(driver.__file__, 'a').write('# changed')\n"
        "    except OSError:\n"
        "        return _real(x, scale)\n"
        "    raise AssertionError('the public driver is writable')\n"
    )
    v = tree_grader.grade(LAB, code)
    assert v.passed, v.message


def test_phases_share_one_scratch_directory(tree_grader) -> None:
    # The one-rank load phase reads what the two ranks of the save phase wrote (other uids). A
    # submission that empties the shared directory when it is imported there breaks the handoff.
    code = SOLUTION + (
        "\nimport os, glob\n"
        "_parts = glob.glob(os.environ['RINGLAB_SHARED_DIR'] + '/part-*')\n"
        "if len(_parts) == 2:  # imported in the load phase, after the save phase wrote both\n"
        "    for f in _parts:\n"
        "        os.remove(f)\n"
    )
    v = tree_grader.grade(LAB, code, world_sizes=[2])
    assert v.check("total").passed
    handoff = v.check("handoff")
    assert not handoff.passed and "FileNotFoundError" in handoff.message, handoff.message


def test_a_group_that_does_not_share_the_scratch_directory_cannot_reach_it(tree_grader) -> None:
    # The lab's first group (no shares_dir) runs in the same job as the save and load phases, whose
    # directory already exists: its ranks see it, closed, and cannot plant anything there for the others.
    code = SOLUTION + (
        "\nimport os\n"
        "if not os.environ.get('RINGLAB_SHARED_DIR'):\n"
        "    assert os.path.isdir('/tmp/shared'), 'the job has no shared directory to try'\n"
        "    try:\n"
        "        open('/tmp/shared/planted', 'w').write('x')\n"
        "    except OSError:\n"
        "        pass\n"
        "    else:\n"
        "        raise AssertionError('a group that does not share the scratch directory wrote to it')\n"
    )
    v = tree_grader.grade(LAB, code, world_sizes=[2])
    assert v.check("total").passed, v.check("total").message
    assert v.check("handoff").passed, v.check("handoff").message
