"""A warm grader shared by the lab tests: real bubblewrap, real torch.distributed ranks."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from labs.host import template
from labs.spec import COMMON_DIR, DEFAULT_CONTENT

# Set before any sandbox starts: a secret in the worker's environment that student code must never see.
# (Not DATABASE_URL itself: the rest of the suite, in the same process, reads that one.)
SECRET = "postgresql://ringlab:s3cret-in-worker-env@db/ringlab"
os.environ["RINGLAB_TEST_WORKER_SECRET"] = SECRET


# Zygotes forked from the torch-warm template (as root, the default) and started cold (otherwise).
MODES = ["fork", "cold"] if template.available() else ["cold"]
# The walls (bubblewrap, seccomp, control groups, a uid per rank) are the sandbox's, the same however a
# zygote starts: the wall tests take ``worker_grader``, in the worker's own mode (the first) alone, and
# tests/labs/test_grading.py grades in both. (Every mode tripled those tests' time: the cold one is slow.)


@pytest.fixture(scope="session")
def graders() -> Iterator[dict[str, object]]:
    """This test process's graders by mode, each made on first use and closed at the end."""
    made: dict[str, object] = {}
    yield made
    for g in made.values():
        g.close()  # type: ignore[attr-defined]


def _grader(graders: dict[str, object], mode: str) -> object:
    from labs.host.grader import Grader

    if mode not in graders:
        g = Grader(pool_size=2, fork_from_template=mode == "fork")
        assert (g.template is not None) == (mode == "fork")
        graders[mode] = g
    return graders[mode]


@pytest.fixture(scope="session", params=MODES)
def grader(request: pytest.FixtureRequest, graders: dict[str, object]) -> object:
    return _grader(graders, request.param)


@pytest.fixture(scope="session")
def worker_grader(graders: dict[str, object]) -> object:
    """A grader in the mode the worker itself uses: forking zygotes from the template where it can."""
    return _grader(graders, MODES[0])


@pytest.fixture(scope="module")
def one_grader() -> Iterator[object]:
    """A grader for one test module, forking zygotes from the warm template where it can: the lab
    tests pin what each mutant loses, and tests/labs/test_grading.py covers both zygote modes."""
    from labs.host.grader import Grader

    g = Grader(pool_size=2, fork_from_template=template.available())
    yield g
    g.close()


def solution(lab: str) -> str:
    return (DEFAULT_CONTENT / lab / "solution.py").read_text()


def starter(lab: str) -> str:
    return (DEFAULT_CONTENT / lab / "starter.py").read_text()


def labs_dir() -> Path:
    return DEFAULT_CONTENT


def lifted(lab: str, folder: Path, *rules: str) -> Path:
    """A copy of ``lab`` under ``folder`` whose lab.yaml lifts pre-check rules (all of them when none are
    named): for tests that prove a guarantee holds without the pre-check, which is only a speed bump."""
    from labs.spec import precheck

    copy = folder / lab
    shutil.copytree(DEFAULT_CONTENT / lab, copy)
    shutil.copytree(DEFAULT_CONTENT / COMMON_DIR, folder / COMMON_DIR, dirs_exist_ok=True)  # its shared helpers
    with (copy / "lab.yaml").open("a") as f:
        f.write(f"precheck:\n  allow: [{', '.join(rules or tuple(precheck.RULES))}]\n")
    return copy
