"""The checkpoint-resharding lab on real gloo ranks: saved on 4, loaded on 2, each mutant losing its checks.

Runs the lab's public driver in forked ranks (no sandbox; ``tp_ranks``): the save phase on 4
ranks and the load phase on 2, sharing one scratch directory as the engine's phases do; compares
the load phase's results with ``driver.reference`` (one process) and judges the saved files with
``checks.files_verdict``, so each mutant is shown to lose exactly the checks it should
(``ringlab lab test`` only asks that it lose points).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from labs import trees
from labs.spec import DEFAULT_CONTENT

from . import tp_ranks

LAB = DEFAULT_CONTENT / "checkpoint-resharding"
PARTS = {"parameters": "params", "optimizer-state": "optimizer", "resumed-step": "resumed"}
LOSES = {
    "forgets_step": {"optimizer-state", "resumed-step"},
    "fresh_optimizer_state_dict": {"optimizer-state", "resumed-step"},
    "model_only": {"optimizer-state", "resumed-step"},
    "own_shard_files": {"parameters", "optimizer-state", "resumed-step"},
    "rank0_saves_alone": {"sharded-save", "parameters", "optimizer-state", "resumed-step"},
    "rank0_torch_save": {"sharded-save", "parameters", "optimizer-state", "resumed-step"},
}

# Correct, and written differently from solution.py: the recipe of the DCP tutorial, a Stateful
# object that DCP calls for its state dict on save and hands the loaded one back on load.
STATEFUL = """
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
from torch.distributed.checkpoint.stateful import Stateful


class AppState(Stateful):
    def __init__(self, model, optimizer):
        self.model, self.optimizer = model, optimizer

    def state_dict(self):
        model, optim = get_state_dict(self.model, self.optimizer)
        return {"model": model, "optim": optim}

    def load_state_dict(self, state):
        set_state_dict(self.model, self.optimizer, model_state_dict=state["model"], optim_state_dict=state["optim"])


def save_checkpoint(model, optimizer, path):
    dcp.save({"app": AppState(model, optimizer)}, checkpoint_id=path)


def load_checkpoint(model, optimizer, path):
    dcp.load({"app": AppState(model, optimizer)}, checkpoint_id=path)
"""

# Correct too: model and optimizer in two checkpoints of their own, with the separate getters and setters.
SEPARATE = """
import os

import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint import state_dict as sd


def save_checkpoint(model, optimizer, path):
    dcp.save(sd.get_model_state_dict(model), checkpoint_id=os.path.join(path, "model"))
    dcp.save(sd.get_optimizer_state_dict(model, optimizer), checkpoint_id=os.path.join(path, "optim"))


def load_checkpoint(model, optimizer, path):
    model_state = sd.get_model_state_dict(model)
    dcp.load(model_state, checkpoint_id=os.path.join(path, "model"))
    sd.set_model_state_dict(model, model_state)
    optim_state = sd.get_optimizer_state_dict(model, optimizer)
    dcp.load(optim_state, checkpoint_id=os.path.join(path, "optim"))
    sd.set_optimizer_state_dict(model, optimizer, optim_state)
"""


@pytest.fixture(scope="module")
def lab() -> tuple[Any, Any]:
    torch.set_num_threads(1)
    checks = tp_ranks.load_module(LAB / "checks.py", "ckpt_checks")
    return checks, tp_ranks.load_module(LAB / "driver.py", "ckpt_driver")


def lost_checks(lab: tuple[Any, Any], code: str, shared: Path, monkeypatch: pytest.MonkeyPatch) -> set[str]:
    """The checks a submission fails, judged as the lab's checks.py judges them (save on 4, load on 2)."""
    checks, driver = lab
    monkeypatch.setenv("RINGLAB_SHARED_DIR", str(shared))
    inputs = {"seed": 4242, "dims": checks.DIMS, "batch": checks.BATCH, "steps": checks.STEPS, "hyper": checks.HYPER}
    want = driver.reference(inputs)
    saving = ["setup"] + ["train"] * checks.STEPS + ["save"]
    first = tp_ranks.run(code, LAB / "driver.py", 4, [tp_ranks.Call(c, [inputs] * 4) for c in saving])
    loading = ("prepare", "load", "report", "resume")
    second = tp_ranks.run(code, LAB / "driver.py", 2, [tp_ranks.Call(c, [inputs] * 2) for c in loading])
    lost = set()
    saved = first.results[-1]
    assert all(isinstance(got, dict) for row in first.results[:-1] for got in row), first.results
    if any(isinstance(got, str) for got in saved) or checks.files_verdict(saved[0]["files"], 4)[1]:
        lost.add("sharded-save")
    tol = {key: checks.TOLERANCE for key in PARTS.values()}
    raised = any(isinstance(got, str) for row in second.results[:2] for got in row)
    for check, key in PARTS.items():
        row = second.results[3 if key == "resumed" else 2]
        for got in row:
            wrong = isinstance(got, str) or trees.compare(trees.select(want, [key]), trees.select(got, [key]), tol)
            if raised or wrong:
                lost.add(check)
    return lost


def test_reference_passes_every_check(lab: tuple[Any, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert lost_checks(lab, (LAB / "solution.py").read_text(), tmp_path, monkeypatch) == set()


@pytest.mark.parametrize("code", [STATEFUL, SEPARATE], ids=["stateful", "separate-checkpoints"])
def test_differently_written_solutions_pass_every_check(
    lab: tuple[Any, Any], code: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert lost_checks(lab, code, tmp_path, monkeypatch) == set()


@pytest.mark.parametrize("mutant", sorted(LOSES))
def test_mutant_loses_its_checks(
    lab: tuple[Any, Any], mutant: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    code = (LAB / "mutants" / f"{mutant}.py").read_text()
    assert code.startswith("# "), "a mutant's first line says what is wrong"
    assert lost_checks(lab, code, tmp_path, monkeypatch) == LOSES[mutant]


def test_every_mutant_is_listed() -> None:
    assert {p.stem for p in (LAB / "mutants").glob("*.py")} == set(LOSES)


def test_reference_is_plain_adamw_on_the_whole_batch(lab: tuple[Any, Any]) -> None:
    # The reference's "resumed" parameters are k + 1 uninterrupted AdamW steps of the unsharded MLP.
    checks, driver = lab
    inputs = {"seed": 9, "dims": checks.DIMS, "batch": checks.BATCH, "steps": checks.STEPS, "hyper": checks.HYPER}
    model = driver.build(9, checks.DIMS)
    opt = torch.optim.AdamW(model.parameters(), lr=checks.HYPER["lr"], weight_decay=checks.HYPER["weight_decay"])
    for x, y in driver.batches(9, checks.DIMS, checks.BATCH, checks.STEPS + 1):
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
    got = driver.reference(inputs)
    assert got["optimizer"]["0.weight"]["step"] == checks.STEPS
    for name, p in model.named_parameters():
        torch.testing.assert_close(got["resumed"][name], p.detach(), rtol=1e-12, atol=1e-14)


def test_files_verdict(lab: tuple[Any, Any]) -> None:
    checks, _ = lab
    state = checks.STATE_BYTES
    quarter = {f"__{r}_0.distcp": state // 4 + 40_000 for r in range(4)} | {".metadata": 17_000}
    assert checks.files_verdict(quarter, 4)[1] is None
    whole = checks.files_verdict({"checkpoint.pt": state + 8_000}, 4)[1]
    assert whole and "'checkpoint.pt'" in whole and "gathered" in whole
    empty = checks.files_verdict({".metadata": 2_000}, 4)[1]
    assert empty and "less than the model's parameters" in empty
    alone = checks.files_verdict({"__0_0.distcp": state // 4 + 40_000, ".metadata": 17_000}, 4)[1]
    assert alone and "only 1 file(s)" in alone and "4 ranks saved" in alone
