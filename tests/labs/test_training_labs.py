"""The training labs' drivers on real gloo ranks against their single-process references.

Faster than a sandboxed grading and independent of it: each lab's public driver runs on
N forked ranks with the reference solution (or a mutant) as ``submission``, and the lab's
own rules judge the results through the real judge. The wire is not measured here (that is
the sandbox's job, covered by grading the lab), so checks on bytes are left out.
"""

from __future__ import annotations

import importlib.util
import io
import multiprocessing
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from labs.host.judge import Facts, GroupRun, RankRun
from labs.spec import DEFAULT_CONTENT, load_lab
from labs.spec.mutants import Mutant

from .mutant_cases import lab_mutant_params

WIRE_CHECKS = {"communication"}


def _module(path: Path, name: str) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _rank(rank: int, n: int, store: str, folder: Path, code: Path, calls: list[Any], out: Any) -> None:
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=n)
    from labs.authoring.public import load_public  # the driver imports the lab's shared helpers by their plain names

    driver = load_public(folder, "driver")
    submission = _module(code, "submission")
    sys.modules["submission"] = submission
    results = {}
    for i, (name, inputs) in enumerate(calls):
        buffer = io.BytesIO()
        torch.save(getattr(driver, name)(submission, inputs[rank]), buffer)
        results[i] = buffer.getvalue()
    out.put((rank, results))
    dist.destroy_process_group()


def _run(lab: str, code: Path, sizes: list[int], tmp: Path) -> tuple[Facts, Any]:
    import torch

    folder = DEFAULT_CONTENT / lab
    checks = _module(folder / "checks.py", f"ringlab_test_checks_{lab.replace('-', '_')}")
    torch.set_num_threads(1)
    gen = torch.Generator().manual_seed(20261123)
    groups = [GroupRun(n, checks.cases(n, gen), [RankRun() for _ in range(n)]) for n in sizes]
    context = multiprocessing.get_context("fork")
    for g in groups:
        queue = context.Queue()
        calls = [(c.driver, c.inputs) for c in g.cases]
        store = str(tmp / f"store-{g.world_size}")
        ranks = [
            context.Process(target=_rank, args=(r, g.world_size, store, folder, code, calls, queue))
            for r in range(g.world_size)
        ]
        for p in ranks:
            p.start()
        for _ in ranks:
            r, results = queue.get(timeout=60)
            g.ranks[r] = RankRun(results=results)
        for p in ranks:
            p.join(timeout=30)
            assert p.exitcode == 0
        g.status = "finished"
    return Facts(groups), checks


def _scores(lab: str, code: Path, sizes: list[int], tmp: Path) -> dict[str, bool]:
    from labs.host import judge

    facts, checks = _run(lab, code, sizes, tmp)
    spec = load_lab(DEFAULT_CONTENT / lab).spec
    rules = getattr(checks, "RULES", {})
    return {
        c.id: (rules[c.id](facts) if c.id in rules else judge.correctness(facts, c.id)).passed
        for c in spec.checks
        if c.id not in WIRE_CHECKS
    }


LABS = ["ddp-from-scratch"]  # zero-1 judges memory the kernel measures in the sandbox: test_zero_1.py


@pytest.mark.parametrize("lab", LABS)
def test_reference_solution_passes_every_check_on_2_3_and_4_ranks(lab: str, tmp_path: Path) -> None:
    passed = _scores(lab, DEFAULT_CONTENT / lab / "solution.py", [2, 3, 4], tmp_path)
    assert passed and all(passed.values()), passed


@pytest.mark.parametrize(("lab", "mutant"), lab_mutant_params(LABS))
def test_mutant_fails_the_checks_its_header_names(lab: str, mutant: Mutant, tmp_path: Path) -> None:
    """The checks judged here, apart from the wire (a mutant whose only mistake is the bytes it sends loses
    nothing here: the sandboxed grading catches those), fail exactly as the mutant's header says."""
    code = tmp_path / "submission.py"
    code.write_text(mutant.code)
    passed = _scores(lab, code, [2], tmp_path)
    assert {c for c, ok in passed.items() if not ok} == mutant.loses - WIRE_CHECKS, passed
