"""The checkpoint-resharding lab on real gloo ranks: saved on 4, loaded on 2, each mutant losing its checks.

Runs the lab's public driver in forked ranks (no sandbox; ``tp_ranks``): the save phase on 4
ranks and the load phase on 2, sharing one scratch directory as the engine's phases do; compares
the load phase's results with ``driver.reference`` (one process) and judges the saved files, by their
bytes, with ``checks.files_verdict``, so each mutant is shown to lose exactly the checks it should
(its header's, as ``ringlab lab test`` checks them in the sandbox). One grade runs through the real sandbox: rank 0
writing the whole state as four files of equal size loses the sharded save there, judged from the
files the zygote read after the save phase.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from labs.host import template
from labs.rank import trees
from labs.spec import DEFAULT_CONTENT
from labs.spec.mutants import Mutant

from . import tp_ranks
from .mutant_cases import assert_lost, mutant_params

LAB = DEFAULT_CONTENT / "checkpoint-resharding"
PARTS = {"parameters": "params", "optimizer-state": "optimizer", "resumed-step": "resumed"}

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

# Gaming a check on file sizes: rank 0 gathers the whole state and writes its bytes as four files of equal
# size, named as DCP names its per-rank files, and loads them back correctly (so only the save is wrong).
FOUR_EQUAL_FILES = """
import io
import os

import torch
import torch.distributed as dist
from torch.distributed.checkpoint.state_dict import StateDictOptions, get_state_dict, set_state_dict

NAMES = [f"__{r}_0.distcp" for r in range(4)]


def save_checkpoint(model, optimizer, path):
    options = StateDictOptions(full_state_dict=True, cpu_offload=True)
    model_state, optim_state = get_state_dict(model, optimizer, options=options)
    if dist.get_rank() == 0:
        buffer = io.BytesIO()
        torch.save({"model": model_state, "optim": optim_state}, buffer)
        data = buffer.getvalue()
        quarter = -(-len(data) // 4)
        for r, name in enumerate(NAMES):
            with open(os.path.join(path, name), "wb") as f:
                f.write(data[r * quarter : (r + 1) * quarter])
    dist.barrier()


def load_checkpoint(model, optimizer, path):
    data = b"".join(open(os.path.join(path, name), "rb").read() for name in NAMES)
    state = torch.load(io.BytesIO(data), weights_only=True)
    options = StateDictOptions(full_state_dict=True)
    set_state_dict(model, optimizer, model_state_dict=state["model"], optim_state_dict=state["optim"], options=options)
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
    files = {
        p.relative_to(shared).as_posix(): p.read_bytes() for p in (shared / "checkpoint").rglob("*") if p.is_file()
    }
    state = checks.checkpoint_tensors(want)
    if any(isinstance(got, str) for got in saved) or checks.files_verdict(files, state, 4)[1]:
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


@pytest.mark.parametrize("mutant", mutant_params("checkpoint-resharding"))
def test_mutant_loses_its_checks(
    lab: tuple[Any, Any], mutant: Mutant, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert_lost(lost_checks(lab, mutant.code, tmp_path, monkeypatch), mutant)


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
    checks, driver = lab
    inputs = {"seed": 5, "dims": checks.DIMS, "batch": checks.BATCH, "steps": checks.STEPS, "hyper": checks.HYPER}
    state = checks.checkpoint_tensors(driver.reference(inputs))

    def raw(tensors: list[torch.Tensor], pad: int = 13) -> bytes:  # odd padding: values off the 8-byte grid
        return b"".join(b"\x07" * pad + t.contiguous().numpy().tobytes() for t in tensors)

    own = {f"c/__{r}_0.distcp": raw([t.chunk(4)[r] for t in state.values()]) for r in range(4)} | {"c/.metadata": b"x"}
    assert checks.files_verdict(own, state, 4)[1] is None
    whole = checks.files_verdict({"c/checkpoint.pt": raw(list(state.values()))}, state, 4)[1]
    assert whole and "'c/checkpoint.pt' holds the shards of ranks 0, 1, 2 and 3" in whole and "gathered" in whole
    data = raw(list(state.values()))
    quarter = -(-len(data) // 4)
    split = {f"c/__{r}_0.distcp": data[r * quarter : (r + 1) * quarter] for r in range(4)}
    assert "gathered" in (checks.files_verdict(split, state, 4)[1] or "")
    alone = checks.files_verdict({k: v for k, v in own.items() if "__0_" in k}, state, 4)[1]
    assert alone and "ranks 1, 2 and 3's shards of the parameters" in alone
    # Rank 2's rows of one parameter missing: named by rows.
    label = "the parameter 2.weight"
    partial = own | {"c/__2_0.distcp": raw([t.chunk(4)[2] for key, t in state.items() if key != label])}
    lost = checks.files_verdict(partial, state, 4)[1]
    assert lost and "rank 2's rows 64 to 95 of the parameter 2.weight" in lost, lost
    # Rank 1's moments wrong in its file, parameters right: not this check's business.
    params_only = own | {"c/__1_0.distcp": raw([t.chunk(4)[1] for key, t in state.items() if "parameter" in key])}
    assert checks.files_verdict(params_only, state, 4)[1] is None
    assert "no file under path" in (checks.files_verdict({}, state, 4)[1] or "")


def test_rank0_writing_four_equal_files_loses_the_sharded_save(
    lab: tuple[Any, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each of its files is about a quarter of the state, as each rank's own file would be: sizes cannot tell.
    assert lost_checks(lab, FOUR_EQUAL_FILES, tmp_path, monkeypatch) == {"sharded-save"}
    sizes = [p.stat().st_size for p in (tmp_path / "checkpoint").iterdir()]
    assert len(sizes) == 4 and max(sizes) - min(sizes) <= 1


def test_four_equal_files_graded_in_the_sandbox() -> None:
    from labs.host.grader import Grader

    with Grader(DEFAULT_CONTENT, pool_size=0, fork_from_template=template.available()) as grader:
        verdict = grader.grade("checkpoint-resharding", FOUR_EQUAL_FILES)
    lost = {c.id for c in verdict.checks if c.score < c.points}
    assert lost == {"sharded-save"}, [(c.id, c.message) for c in verdict.checks]
    message = verdict.check("sharded-save").message
    assert "holds the shards of ranks" in message and "gathered" in message, message
