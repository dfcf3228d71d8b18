"""gpu-memory-profile: the judge over result trees built here from memory_allocated readings (no GPU needed),
and on a GPU the real grading of the reference, an alternative solution and every mutant."""

from __future__ import annotations

from typing import Any

import pytest

from labs.host.judge import Case
from labs.spec import COMMON_DIR, mutants
from labs.spec.mutants import Mutant

from .conftest import labs_dir
from .gpu_facts import NEEDS_GPU, has_gpu, judge, load, lost, rank
from .mutant_cases import assert_loses, assert_lost, mutant_params

torch = pytest.importorskip("torch")
LAB = "gpu-memory-profile"
FOLDER = labs_dir() / LAB

# Correct, written differently: the allocator's statistics instead of memory_allocated(), one reading per stage
# into a list, and the formula as 16 bytes per trainable parameter split up.
ALTERNATIVE = """
import torch


def _now(device):
    torch.cuda.synchronize(device)
    return torch.cuda.memory_stats(device)["allocated_bytes.all.current"]


def profile_memory(make_model, tokens, targets):
    readings = [_now(tokens.device)]
    model = make_model().cuda(tokens.device)
    readings.append(_now(tokens.device))
    adam = torch.optim.AdamW(model.parameters())
    loss = model(tokens, targets)
    readings.append(_now(tokens.device))
    loss.backward()
    loss = None
    readings.append(_now(tokens.device))
    adam.step()
    readings.append(_now(tokens.device))
    start, model_on, forward, backward, stepped = readings
    return dict(parameters=model_on - start, activations=forward - model_on, gradients=backward - model_on,
                optimizer_states=stepped - backward)


def chapter_formula(num_params, num_trainable):
    per_trainable = {"gradients": 4, "optimizer_states": 4 + 4}
    return {"parameters": num_params * 4, **{k: v * num_trainable for k, v in per_trainable.items()}}
"""


def configs() -> list[dict[str, Any]]:
    _, checks = load(LAB)
    return checks.configs(torch.Generator().manual_seed(5))


def readings(config: dict[str, Any]) -> dict[str, int]:
    """memory_allocated() at each stage of one step, as the caching allocator counts (512-byte blocks)."""
    _, checks = load(LAB)
    four_p = checks.formula(config)
    activations = 4 * config["batch"] * config["tokens"] * config["dim"] * 30 * config["layers"]
    start = 3 << 20  # the batch and whatever the rank holds already
    model = start + int(four_p["parameters"])
    forward = model + activations + 512  # the saved activations and the loss
    backward = model + int(four_p["gradients"])  # activations freed, the loss deleted, the gradients stay
    step = backward + int(four_p["optimizer_states"])
    return {"start": start, "model": model, "forward": forward, "backward": backward, "step": step}


def figures(m: dict[str, int]) -> dict[str, float]:
    """The reference's arithmetic over the readings."""
    return {
        "parameters": m["model"] - m["start"],
        "activations": m["forward"] - m["model"],
        "gradients": m["backward"] - m["model"],
        "optimizer_states": m["step"] - m["backward"],
    }


def formula(p: int, t: int, moments: int = 2, frozen_train: bool = False) -> dict[str, float]:
    trainable = p if frozen_train else t
    return {"parameters": 4 * p, "gradients": 4 * trainable, "optimizer_states": 4 * moments * trainable}


def tree(name: str, config: dict[str, Any]) -> dict[str, Any]:
    """What the reference (``name`` "solution") or a mutant returns, from the same readings."""
    from labs.authoring.public import load_public

    m = readings(config)
    driver = load_public(str(FOLDER / "checks.py"), "driver")
    p, t = driver.counts(config)
    mine, predicted = figures(m), formula(p, t)
    if name == "gradients_across_backward":
        mine["gradients"] = m["backward"] - m["forward"]
    elif name == "activations_after_backward":
        mine["activations"] = m["backward"] - m["model"]
    elif name == "zero_grad_before_reading":
        mine["optimizer_states"] = m["step"] - (m["backward"] - m["model"]) - m["backward"]
    elif name == "formula_counts_frozen":
        predicted = formula(p, t, frozen_train=True)
    elif name == "formula_one_moment":
        predicted = formula(p, t, moments=1)
    return {"figures": mine, "formula": predicted}


def cases() -> list[Case]:
    """The lab's cases with the grader's expected trees built from the same readings as the results."""
    _, checks = load(LAB)
    return [
        Case(check="parameters", fn="profile_memory", driver="profile", label=checks.label(c), inputs=[c],
             expected=[{"figures": figures(readings(c)), "formula": checks.formula(c)}])
        for c in configs()
    ]  # fmt: skip


def test_the_cases_are_a_full_model_and_one_with_frozen_embeddings() -> None:
    full, frozen = configs()
    assert not full["frozen"] and frozen["frozen"]
    _, checks = load(LAB)
    f, z = checks.formula(full), checks.formula(frozen)
    assert f["gradients"] == f["parameters"] and f["optimizer_states"] == 2 * f["parameters"]
    assert z["gradients"] < z["parameters"] and z["optimizer_states"] == 2 * z["gradients"]
    # Every tensor is a multiple of the allocator's 512-byte blocks: the measurement can equal 4P exactly.
    from labs.authoring.public import load_public

    driver = load_public(str(FOLDER / "checks.py"), "driver")
    for dim in (128, 256):  # every size checks.configs draws
        for vocab in (512, 1024):
            model = driver.build_model({**full, "dim": dim, "vocab": vocab, "layers": 1})
            assert all(p.numel() * 4 % 512 == 0 for p in model.parameters())
            assert all(p.numel() * 4 <= 1 << 20 for p in model.parameters())  # the small pool: no block rounding


def test_the_reference_gets_every_check() -> None:
    lab, checks = load(LAB)
    outcomes = judge(lab, checks, cases(), rank(*(tree("solution", c) for c in configs())))
    assert not lost(outcomes), {k: o.message for k, o in outcomes.items()}
    assert "the measurement is within 0.00% of 4P / 4P_t / 8P_t" in outcomes["formula"].message


@pytest.mark.parametrize("mutant", mutant_params(LAB))
def test_mutant_loses_its_checks(mutant: Mutant) -> None:
    lab, checks = load(LAB)
    outcomes = judge(lab, checks, cases(), rank(*(tree(mutant.name, c) for c in configs())))
    assert_lost(lost(outcomes), mutant)
    for check in mutant.loses:
        message = outcomes[check].message
        assert "MiB" in message and "right]" in message, message


def test_messages_say_what_was_measured_and_what_to_do() -> None:
    lab, checks = load(LAB)
    grads = judge(lab, checks, cases(), rank(*(tree("gradients_across_backward", c) for c in configs())))
    message = grads["gradients"].message
    assert "your measured gradients is -" in message and "the grader measured" in message
    assert "frees the activations" in message and "[0 of 2 right]" in message
    frozen = judge(lab, checks, cases(), rank(*(tree("formula_counts_frozen", c) for c in configs())))
    assert "embeddings frozen" in frozen["formula"].message and "the formula gives" in frozen["formula"].message
    assert frozen["formula"].fraction == pytest.approx(2 / 3)  # right on the full model, wrong twice when frozen


def test_only_the_graders_own_measurement_is_the_truth() -> None:
    """Whatever else a rank sends (a measurement of its own that agrees with its figures), a wrong figure stays
    wrong: the expected figures are measured by the grader outside the rank."""
    lab, checks = load(LAB)
    forged = [{**tree("gradients_across_backward", c), "measured": tree("gradients_across_backward", c)["figures"]}
              for c in configs()]  # fmt: skip
    outcomes = judge(lab, checks, cases(), rank(*forged))
    assert lost(outcomes) == {"gradients"}, {k: o.message for k, o in outcomes.items()}
    assert all(c.points > 0 for c in lab.spec.checks)  # every check judges a result against the grader's figures


def test_a_missing_key_or_an_error_is_said_and_each_check_holds_on_its_own() -> None:
    lab, checks = load(LAB)
    full, _ = configs()
    partial = tree("solution", full)
    del partial["figures"]["activations"]
    outcomes = judge(lab, checks, cases(), rank(partial, "profile_memory raised"))
    assert lost(outcomes) == {c.id for c in lab.spec.checks}
    assert "no number at 'activations'" in outcomes["activations"].message
    assert "[1 of 2 right]" in outcomes["parameters"].message
    assert "profile_memory raised" in outcomes["gradients"].message


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


@pytest.mark.skipif(not has_gpu(), reason=NEEDS_GPU)
@pytest.mark.parametrize("mutant", mutant_params(LAB))
def test_on_a_gpu_every_mutant_loses_its_checks(gpu_grader, mutant: Mutant) -> None:
    assert_loses(gpu_grader.grade(LAB, mutant.code), mutant)


def test_the_lab_is_gpu_only_and_refused_without_one(grader) -> None:
    lab, _ = load(LAB)
    assert lab.spec.needs_gpu and lab.spec.backends == ["nccl"] and lab.spec.world_sizes == [1]
    if not has_gpu():
        v = grader.grade(LAB, (FOLDER / "solution.py").read_text())
        assert v.status == "refused" and "nccl needs 1 GPU" in v.message


@pytest.mark.parametrize("lab_id", [LAB, "gpu-mixed-precision"])
def test_content_check_validates_a_gpu_lab_fully_without_a_gpu(tmp_path, lab_id: str) -> None:
    """Nothing is skipped for a GPU-only lab: its Python, mutants included, is parsed like any lab's."""
    import shutil

    from app.content.labs import load_lab_content

    folder = tmp_path / lab_id
    shutil.copytree(labs_dir() / lab_id, folder)
    shutil.copytree(labs_dir() / COMMON_DIR, tmp_path / COMMON_DIR)  # the shared helpers it names
    lab, problems = load_lab_content(folder, lambda p: p.name, {load(lab_id)[0].spec.exercise})
    assert lab is not None and problems == []
    mutant = sorted((folder / "mutants").glob("*.diff"))[0]
    solution = (folder / "solution.py").read_text()
    mutant.write_text(mutants.write("a syntax error", solution, solution + "\ndef broken(:\n", loses=["parameters"]))
    (folder / "driver.py").write_text((folder / "driver.py").read_text() + "\nreturn (\n")
    _, problems = load_lab_content(folder, lambda p: p.name, {load(lab_id)[0].spec.exercise})
    assert {p.path for p in problems} == {mutant.name, "driver.py"}, problems


def test_the_driver_takes_any_number_as_a_figure() -> None:
    import numpy

    from labs.authoring.public import load_public

    number = load_public(str(FOLDER / "checks.py"), "driver").number
    assert [number(numpy.int64(5)), number(torch.tensor(3)), number(2.5)] == [5.0, 3.0, 2.5]
    assert [number(True), number(None), number("12")] == ["True", "None", "'12'"]
