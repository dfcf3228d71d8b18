"""The distributed-sampler lab, graded for real: properties, not one permutation, earn the marks.

Correct samplers written differently from the reference (a DistributedSampler subclass, numpy's
generator with contiguous shares) get full marks; each mutant loses exactly the checks it should
(its header's ``loses``, at world size 3: 48 is divisible, 50 and 61 are not, so padding and equal
counts are both exercised); the starter's first try names its NotImplementedError.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from labs.host import template
from labs.spec.mutants import Mutant

from .conftest import labs_dir
from .mutant_cases import assert_loses, mutant_params, sizes

LAB = "distributed-sampler"
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
    from labs.host.grader import Grader

    g = Grader(pool_size=2, fork_from_template=template.available())
    yield g
    g.close()


@pytest.mark.parametrize("code", [SUBCLASS, CONTIGUOUS], ids=["distributed-sampler-subclass", "numpy-contiguous"])
def test_other_correct_samplers_get_full_marks(grader, code: str) -> None:
    v = grader.grade(LAB, code)
    assert v.status == "passed" and v.score == v.max_score, [(c.id, c.message) for c in v.checks]


@pytest.mark.parametrize("mutant", mutant_params(LAB))
def test_mutant_loses_its_checks(grader, mutant: Mutant) -> None:
    v = grader.grade(LAB, mutant.code, world_sizes=sizes(mutant))
    assert_loses(v, mutant)


def test_starter_names_its_error(grader) -> None:
    v = grader.grade(LAB, (labs_dir() / LAB / "starter.py").read_text(), world_sizes=[2])
    messages = " ".join(c.message for c in v.checks)
    assert v.score == 0 and "NotImplementedError" in messages and "NameError" not in messages
    assert "Fix that error first" in messages
