"""The distributed-sampler lab, graded for real: properties, not one permutation, earn the marks.

Correct samplers written differently from the reference (a DistributedSampler subclass, numpy's
generator with contiguous shares) get full marks; each mutant loses exactly the checks it should
(``ringlab lab test`` only asks that it lose points); the starter's first try names its
NotImplementedError.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from labs import template

from .conftest import labs_dir

LAB = "distributed-sampler"
# World size 3: 48 is divisible, 50 and 61 are not, so padding and equal counts are both exercised.
SIZES = [3]
LOSES = {
    "drops_remainder": {"coverage", "equal-counts"},
    "generator_in_init": {"deterministic"},
    "ignores_epoch": {"epochs-differ"},
    "local_shuffle": {"epochs-differ"},
    "no_padding": {"equal-counts"},
    "seed_per_rank": {"coverage"},
    "strided_no_shuffle": {"epochs-differ", "deterministic"},
}
SUBCLASS = """
from torch.utils.data import DistributedSampler


class ShardedSampler(DistributedSampler):
    def __init__(self, dataset_size, num_replicas, rank, shuffle=True, seed=0):
        super().__init__(range(dataset_size), num_replicas=num_replicas, rank=rank, shuffle=shuffle, seed=seed)
"""
CONTIGUOUS = """
import numpy as np


class ShardedSampler:
    def __init__(self, dataset_size, num_replicas, rank, shuffle=True, seed=0):
        self.n, self.replicas, self.rank = dataset_size, num_replicas, rank
        self.shuffle, self.seed, self.epoch = shuffle, seed, 0
        self.per = -(-dataset_size // num_replicas)

    def __iter__(self):
        rng = np.random.default_rng([self.seed, self.epoch])
        order = list(rng.permutation(self.n)) if self.shuffle else list(range(self.n))  # numpy integers
        order += order[: self.per * self.replicas - self.n]
        yield from order[self.rank * self.per : (self.rank + 1) * self.per]

    def __len__(self):
        return self.per

    def set_epoch(self, epoch):
        self.epoch = epoch
"""


@pytest.fixture(scope="module")
def grader() -> Iterator[object]:
    from labs.grader import Grader

    g = Grader(pool_size=2, fork_from_template=template.available())
    yield g
    g.close()


def test_every_mutant_is_listed() -> None:
    assert {f.stem for f in (labs_dir() / LAB / "mutants").glob("*.py")} == set(LOSES)


@pytest.mark.parametrize("code", [SUBCLASS, CONTIGUOUS], ids=["distributed-sampler-subclass", "numpy-contiguous"])
def test_other_correct_samplers_get_full_marks(grader, code: str) -> None:
    v = grader.grade(LAB, code)
    assert v.status == "passed" and v.score == v.max_score, [(c.id, c.message) for c in v.checks]


@pytest.mark.parametrize("mutant", sorted(LOSES))
def test_mutant_loses_its_checks(grader, mutant: str) -> None:
    code = (labs_dir() / LAB / "mutants" / f"{mutant}.py").read_text()
    v = grader.grade(LAB, code, world_sizes=SIZES)
    assert {c.id for c in v.checks if not c.passed} == LOSES[mutant], [(c.id, c.message) for c in v.checks]


def test_starter_names_its_error(grader) -> None:
    v = grader.grade(LAB, (labs_dir() / LAB / "starter.py").read_text(), world_sizes=[2])
    messages = " ".join(c.message for c in v.checks)
    assert v.score == 0 and "NotImplementedError" in messages and "NameError" not in messages
    assert "Fix that error first" in messages
