"""gpu-mixed-precision: the judge on real runs of the public driver (on the CPU, float16 autocast there), and
on a GPU the real grading of the reference, an alternative solution and every mutant."""

from __future__ import annotations

import importlib.util
import re
from types import ModuleType
from typing import Any

import pytest

from labs.spec.mutants import Mutant

from .conftest import labs_dir
from .gpu_facts import NEEDS_GPU, has_gpu, judge, load, lost, rank
from .mutant_cases import assert_loses, mutant_params
from .mutant_cases import mutant as lab_mutant

torch = pytest.importorskip("torch")
LAB = "gpu-mixed-precision"
FOLDER = labs_dir() / LAB
# Read inside the rank (the driver's forward hooks, its benchmark): feedback, worth no points.
FEEDBACK_CHECKS = {"autocast-fp16", "memory"}
FEEDBACK = "This check is feedback: it is measured inside your own process, so it cannot count"
# Peak memory above the model's, as the GPU measures it: float16 activations about 0.6 of float32's.
BENCH = {
    "fp32": {"ms_per_step": 21.0, "peak_extra_bytes": 900 << 20},
    "amp": {"ms_per_step": 4.2, "peak_extra_bytes": 520 << 20},
}
SAME = {"fp32": BENCH["fp32"], "amp": {"ms_per_step": 20.5, "peak_extra_bytes": 900 << 20}}

# Correct, written differently: a list of the parameters, zeroing at the end (the driver starts with
# none), the loss computed inside autocast and returned as a float32 copy.
ALTERNATIVE = """
import torch
from torch.nn import functional


def amp_train_step(model, optimizer, scaler, x, y, max_norm):
    params = [p for group in optimizer.param_groups for p in group["params"]]
    with torch.autocast(x.device.type, torch.float16):
        logits = model(x)
        loss = functional.cross_entropy(logits, y)
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    torch.nn.utils.clip_grad_norm_(params, max_norm)
    scaler.step(optimizer)
    scaler.update()
    optimizer.zero_grad()
    return loss.float().detach().clone()
"""


def module(name: str, code: str) -> ModuleType:
    spec = importlib.util.spec_from_loader(f"submission_{name}", loader=None)
    assert spec is not None
    m = importlib.util.module_from_spec(spec)
    exec(compile(code, f"{name}.py", "exec"), m.__dict__)
    return m


def mutant(name: str) -> str:
    return lab_mutant(LAB, name).code


@pytest.fixture(scope="module")
def graded_here() -> tuple[Any, ModuleType, list[Any]]:
    """The lab's checks and cases, the reference computed by ``checks.cases`` on this machine's device."""
    lab, checks = load(LAB)
    with torch.random.fork_rng():
        cases = checks.cases(1, torch.Generator().manual_seed(11))
    return lab, checks, cases


def run_here(checks: ModuleType, cases: list[Any], code: str, bench: dict[str, Any] = BENCH) -> Any:
    """The public driver with ``code`` as the submission, in this process (no benchmark: ``bench`` instead)."""
    from labs.authoring.public import load_public

    driver = load_public(str(FOLDER / "checks.py"), "driver")
    try:
        tree = driver.train(module("s", code), {**cases[0].inputs[0], "benchmark": None})
    except Exception as exc:  # the student's error, as the rank would report it
        return rank(f"{type(exc).__name__}: {exc}")
    return rank({**tree, "benchmark": bench})


def test_the_reference_and_an_alternative_get_every_check(graded_here) -> None:
    lab, checks, cases = graded_here
    for code in ((FOLDER / "solution.py").read_text(), ALTERNATIVE):
        outcomes = judge(lab, checks, cases, run_here(checks, cases, code))
        assert not lost(outcomes), {k: o.message for k, o in outcomes.items()}
    message = outcomes["memory"].message
    assert "float32 21.00 ms" in message and "your AMP step 4.20 ms" in message and "520.0 MiB" in message
    table = outcomes["memory"].data["table"]
    assert table["rows"][2] == ["AMP / float32", "0.20x", "0.58x"]


@pytest.mark.parametrize("mutant", mutant_params(LAB))
def test_mutant_loses_its_checks(graded_here, mutant: Mutant) -> None:
    lab, checks, cases = graded_here
    bench = SAME if mutant.name == "no_autocast" else BENCH
    outcomes = judge(lab, checks, cases, run_here(checks, cases, mutant.code, bench))
    # On this machine's seed every check a mutant may lose is lost, the racy later losses included.
    expected = mutant.loses | mutant.may_lose
    assert lost(outcomes) == expected, {k: o.message for k, o in outcomes.items()}
    assert all(len(outcomes[c].message) > 40 for c in expected)
    # Every mutant fails a check that carries points: one judged from its results against the reference run.
    assert expected - FEEDBACK_CHECKS and all(lab.spec.check(c).points > 0 for c in expected - FEEDBACK_CHECKS)


def test_what_is_read_inside_the_rank_is_feedback_worth_no_points(graded_here) -> None:
    lab, checks, cases = graded_here
    assert {c.id for c in lab.spec.checks if c.points == 0} == FEEDBACK_CHECKS
    assert all("Feedback, no points" in lab.spec.check(c).title for c in FEEDBACK_CHECKS)
    assert lab.spec.max_score == 8
    for code, bench in (((FOLDER / "solution.py").read_text(), BENCH), (mutant("no_autocast"), SAME)):
        outcomes = judge(lab, checks, cases, run_here(checks, cases, code, bench))
        assert all(FEEDBACK in outcomes[c].message for c in FEEDBACK_CHECKS), {c: outcomes[c].message for c in outcomes}


def test_messages_name_the_step_and_say_what_to_do(graded_here) -> None:
    lab, checks, cases = graded_here
    scaled = judge(lab, checks, cases, run_here(checks, cases, mutant("returns_scaled_loss")))["losses"].message
    # The step with the largest error is named (every step's loss is scaled here).
    assert re.search(r"losses\[\d\] is ", scaled) and "not scaler.scale(loss)" in scaled
    clipped = judge(lab, checks, cases, run_here(checks, cases, mutant("clips_scaled_gradients")))
    assert "The first step's loss is right" in clipped["losses"].message
    assert "scaler.unscale_(optimizer) before clip_grad_norm_" in clipped["parameters"].message
    bf16 = judge(lab, checks, cases, run_here(checks, cases, mutant("bfloat16")))["autocast-fp16"].message
    assert "torch.bfloat16" in bf16 and "torch.float16" in bf16 and "dtype=torch.float16" in bf16
    overflow = judge(lab, checks, cases, run_here(checks, cases, mutant("steps_on_overflow")))["loss-scaling"]
    assert "skipped[4]" in overflow.message and "scaler.step(optimizer) skips the update" in overflow.message


def test_the_memory_check_holds_on_its_own(graded_here) -> None:
    """No figures (training failed): the memory check says so and points at the losses check."""
    lab, checks, cases = graded_here
    outcomes = judge(lab, checks, cases, rank("RuntimeError: boom"))
    assert lost(outcomes) == {c.id for c in lab.spec.checks}
    assert "did not run" in outcomes["memory"].message and "losses check" in outcomes["memory"].message


def test_the_reference_overflows_exactly_at_the_spike(graded_here) -> None:
    _, checks, cases = graded_here
    want = cases[0].expected[0]
    assert want["skipped"].tolist() == [int(i == checks.SPIKE_STEP) for i in range(checks.STEPS)]
    assert want["scales"][checks.SPIKE_STEP] == want["scales"][checks.SPIKE_STEP - 1] / 2
    assert want["scales"].max() > checks.INIT_SCALE  # and grew after growth_interval good steps


@pytest.fixture(scope="module")
def gpu_grader() -> Any:
    from labs.host.grader import Grader

    g = Grader(pool_size=0, gpus=True)
    yield g
    g.close()


@pytest.mark.skipif(not has_gpu(), reason=NEEDS_GPU)
def test_on_a_gpu_the_reference_and_an_alternative_get_full_marks(gpu_grader) -> None:
    for code in ((FOLDER / "solution.py").read_text(), ALTERNATIVE):
        v = gpu_grader.grade(LAB, code)
        assert v.status == "passed" and v.score == v.max_score, [c.message for c in v.checks]
    table = next(c for c in v.checks if c.id == "memory").data["table"]
    assert [row[0] for row in table["rows"]] == ["float32", "your AMP step", "AMP / float32"]


@pytest.mark.skipif(not has_gpu(), reason=NEEDS_GPU)
@pytest.mark.parametrize("mutant", mutant_params(LAB))
def test_on_a_gpu_every_mutant_loses_its_checks(gpu_grader, mutant: Mutant) -> None:
    v = gpu_grader.grade(LAB, mutant.code)
    assert v.score < v.max_score, [c.message for c in v.checks]  # points lost on a check judged outside the rank
    # Ten steps at lr 0.05 barely move the loss: for a mistake in the updates, whether the later losses drift past
    # the tolerance depends on the seed (on the CPU: no_zero_grad kept them in 2 seeds of 8), hence the headers'
    # "may lose: losses"; the parameters never.
    assert_loses(v, mutant)


def test_the_lab_is_gpu_only_and_refused_without_one(grader) -> None:
    lab, _ = load(LAB)
    assert lab.spec.needs_gpu and lab.spec.backends == ["nccl"]
    v = grader.grade(LAB, (FOLDER / "solution.py").read_text())
    if not has_gpu():
        assert v.status == "refused" and "nccl needs 1 GPU" in v.message
