"""Trusted checks for checkpoint-resharding: saved on 4 ranks, loaded on 2, against one process.

Never mounted into the sandbox. The reference is ``driver.reference`` (the unsharded MLP
trained by one process for k + 1 AdamW steps on the whole batches), run here, outside the
sandbox, on this lab's own copy of the public driver.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

import torch

from labs.authoring import UNJUDGED, Case, Facts, Outcome, Phase, case_failure, load_public, result, scan, training

DIMS = [32, 128, 128, 8]  # 21,768 float64 parameters: 170 KiB, 510 KiB with AdamW's two moments
BATCH = 16  # global batch: equal shares on 4 and 2 ranks
STEPS = 3  # trained on 4 ranks before the save; one more on 2 ranks after the load
HYPER = {"lr": 0.01, "weight_decay": 0.1}
TOLERANCE = (1e-9, 1e-11)  # float64: sharded gradients are averaged in another order
CHECKPOINT = "checkpoint"  # the folder, in the phases' shared directory, that ``path`` names (driver.checkpoint_dir)
DRIVER = load_public(__file__, "driver")


def phases(world_sizes: list[int], gen: torch.Generator) -> list[Phase]:
    """Save on the first world size (4), load on the last (2), in one scratch directory."""
    save_on, load_on = world_sizes[0], world_sizes[-1]
    seed = int(torch.randint(0, 2**31 - 1, (1,), generator=gen))
    inputs = {"seed": seed, "dims": DIMS, "batch": BATCH, "steps": STEPS, "hyper": dict(HYPER)}
    expected = DRIVER.reference(inputs)
    model = f"an MLP {'-'.join(map(str, DIMS))} with AdamW"

    def saving(driver: str, label: str, want: dict[str, Any]) -> Case:
        rows = [dict(inputs) for _ in range(save_on)]
        # The save is measured: the result page draws who sent what to whom while saving.
        measure = driver == "save"
        return Case("sharded-save", "save_checkpoint", label, rows, [want] * save_on, driver=driver, measure=measure)

    setup = saving("setup", f"{model} sharded on {save_on} ranks", {"trained": 0})
    train = [saving("train", f"step {k} on {save_on} ranks", {"trained": k}) for k in range(1, STEPS + 1)]
    save = saving("save", f"save_checkpoint on {save_on} ranks after {STEPS} steps", {"saved": True})

    def loading(driver: str, label: str) -> Case:
        rows = [dict(inputs) for _ in range(load_on)]
        want = {"prepared": True} if driver == "prepare" else {"loaded": True}
        # Judged by no check of their own: a load_checkpoint that raised is reported by every check after it.
        return Case(UNJUDGED, "load_checkpoint", label, rows, [want] * load_on, driver=driver, measure=driver == "load")

    prepare = loading("prepare", f"the MLP with other weights sharded on {load_on} ranks, a fresh AdamW")
    load = loading("load", f"load_checkpoint on {load_on} ranks")
    rows = [dict(inputs) for _ in range(load_on)]
    held = {"params": expected["params"], "optimizer": expected["optimizer"]}
    label = f"after load_checkpoint on {load_on} ranks"
    # missing: what driver.held puts where AdamW holds no moment for a parameter
    report = Case("parameters", "load_checkpoint", label, rows, [held] * load_on, driver="report",
                  parts={"parameters": ["params"], "optimizer-state": ["optimizer"]},
                  tolerance={"params": TOLERANCE, "optimizer": TOLERANCE}, missing="missing")  # fmt: skip
    label, resumed = f"step {STEPS + 1} on {load_on} ranks after load_checkpoint", {"resumed": expected["resumed"]}
    resume = Case("resumed-step", "load_checkpoint", label, rows, [resumed] * load_on, driver="resume",
                  parts={"resumed-step": ["resumed"]}, tolerance={"resumed": TOLERANCE})  # fmt: skip
    return [
        Phase("save", save_on, [setup, *train, save], shares_dir=True),
        Phase("load", load_on, [prepare, load, report, resume], shares_dir=True),
    ]


def sharded_save(facts: Facts) -> Outcome:
    """Every rank wrote its own shards, judged by what the files under ``path`` hold (read as bytes, never loaded)."""
    g = next((g for g in facts.groups if g.phase == "save"), None)
    if g is None or g.status is None:
        return Outcome(False, "the save phase was not run")
    if failed := first_failure(facts, ("setup", "train", "save")):
        return Outcome(False, failed)
    state = saved_state(facts)
    if state is None:
        return Outcome(False, "the load phase, which holds the state the save must contain, was not planned")
    data, why = files_verdict(saved_files(g), state, g.world_size, truncated=g.files_truncated)
    return Outcome(why is None, f"{g.name}: {why}" if why else data.pop("summary"), data)


def saved_files(g: Any) -> dict[str, bytes]:
    """What the save phase ``g`` left under ``path`` (name -> bytes), read after its ranks exited."""
    return {path: data for path, data in g.files.items() if path.startswith(f"{CHECKPOINT}/")}


def saved_state(facts: Facts) -> dict[str, torch.Tensor] | None:
    """What the checkpoint must hold, from the load phase's expected report (the reference after step ``STEPS``)."""
    for g in facts.groups:
        for case in g.cases:
            if case.driver == "report":
                return checkpoint_tensors(case.expected[0])
    return None


def checkpoint_tensors(reference: dict[str, Any]) -> dict[str, torch.Tensor]:
    """The whole parameters and both AdamW moments of a reference report, by the label a message gives them."""
    state = {f"the parameter {name}": p for name, p in reference["params"].items()}
    for name, moments in reference["optimizer"].items():
        state |= {f"AdamW's {key} of {name}": moments[key] for key in ("exp_avg", "exp_avg_sq")}
    return state


def _rows(t: torch.Tensor, ranks: int, r: int) -> str:
    """Which rows of ``t`` rank ``r`` holds under FSDP2's ``Shard(0)`` (torch.chunk along dim 0)."""
    per = -(-t.shape[0] // ranks)
    return f"rows {r * per} to {min(t.shape[0], (r + 1) * per) - 1}"


def files_verdict(
    files: dict[str, bytes], state: dict[str, torch.Tensor], ranks: int, *, truncated: bool = False
) -> tuple[dict[str, Any], str | None]:
    """The files ``ranks`` ranks' save left under ``path`` (name -> bytes) against a sharded save; None if right.

    Rank r's shard of a tensor is its rows under FSDP2 (``torch.chunk(ranks)[r]``). Each file is
    attributed to the ranks whose shards it holds, by value (``scan.locate``), never by its name:
    a file holding the rows of two ranks was written by a process that gathered them, and every
    rank's rows of every parameter must be in some file. AdamW's moments count for the first rule
    only (whether they were saved at all is the optimizer-state check's business).
    """
    shards = {(label, r): t.chunk(ranks)[r] for label, t in state.items() for r in range(ranks)}
    where = scan.locate(files, shards, *TOLERANCE)
    holders: dict[str, set[int]] = {name: set() for name in files}
    for (_, r), names in where.items():
        for name in names:
            holders[name].add(r)
    data: dict[str, Any] = {
        "files": {name: len(content) for name, content in sorted(files.items())},
        "ranks_in_file": {name: sorted(rs) for name, rs in sorted(holders.items())},
    }
    cut = " (the grader read only part of the files: the phase left more than it keeps)" if truncated else ""
    if not files:
        return data, (
            f"save_checkpoint left no file under path{cut}: write the checkpoint into the directory it is given,"
            " every rank its own shards (torch.distributed.checkpoint.save)"
        )
    for name, rs in sorted(holders.items()):
        if len(rs) > 1:
            label = next(lb for (lb, r), names in where.items() if r == min(rs) and name in names)
            return data, (
                f"the file {name!r} holds the shards of ranks {_and(sorted(rs))} (for example rank {min(rs)}'s"
                f" {_rows(state[label], ranks, min(rs))} of {label}): one process wrote other ranks' shards, so"
                " it had gathered them. Each rank must write only the shards it holds:"
                " torch.distributed.checkpoint.save does that with the sharded state dicts of"
                " get_state_dict(model, optimizer)."
            )
    missing = [(label, r) for (label, r), names in where.items() if not names and label.startswith("the parameter")]
    if missing:
        absent = sorted({r for _, r in missing})
        parameters = sum(label.startswith("the parameter") for label in state)
        empty = [r for r in absent if sum(1 for _, m in missing if m == r) == parameters]
        if empty:
            return data, (
                f"no file under path holds any of rank{'s' if len(empty) > 1 else ''} {_and(empty)}'s shards of"
                f" the parameters{cut}: every rank must save the shards it holds."
                " torch.distributed.checkpoint.save is collective: every rank calls it, and each writes its own."
            )
        label, r = missing[0]
        return data, (
            f"rank {r}'s {_rows(state[label], ranks, r)} of {label} are in no file under path{cut}: the checkpoint"
            " must hold every rank's shard of every parameter (save the whole sharded state dict)."
        )
    mine = "; ".join(f"rank {r}: {', '.join(sorted(n for n, rs in holders.items() if r in rs))}" for r in range(ranks))
    data["summary"] = f"each of the {ranks} ranks' shards, and only that rank's, are in files of their own ({mine})"
    return data, None


def _and(items: list[int]) -> str:
    words = [str(i) for i in items]
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} and {words[-1]}"


def moments_saved(facts: Facts) -> bool:
    """Some of AdamW's moments are in the files the save phase left (found by value, never loaded)."""
    g, state = next((g for g in facts.groups if g.phase == "save"), None), saved_state(facts)
    if g is None or state is None:
        return False
    n = g.world_size
    moments: dict[Hashable, torch.Tensor] = {
        (label, r): t.chunk(n)[r] for label, t in state.items() if label.startswith("AdamW") for r in range(n)
    }
    return any(scan.locate(saved_files(g), moments, *TOLERANCE).values())


def _optimizer_hint(facts: Facts) -> training.Hint:
    def hint(g: Any, i: int, case: Case, r: int) -> str:
        got = result(g, i, r) or {}
        moments = got.get("optimizer") if isinstance(got, dict) else None
        if isinstance(moments, dict):
            states = [m for m in moments.values() if isinstance(m, dict)]
            if any(case.missing in m.values() for m in states):
                return _NOT_LOADED if moments_saved(facts) else _NEVER_SAVED
            steps = {float(m["step"]) for m in states if isinstance(m.get("step"), torch.Tensor)}
            if steps and steps != {float(STEPS)}:
                return (
                    f"AdamW's step count is {sorted(steps)} after the load, not {STEPS}: it sets the bias correction"
                    " 1 - beta^t of the next step, so it must be restored with the moments."
                )
        return (
            "Restore AdamW's state for the 2-rank sharding: both moments and the step count of every parameter,"
            " as saved by 4 ranks."
        )

    return hint


# AdamW holds no moments after the load: were they in the checkpoint (found by value in the save phase's files)?
_NOT_LOADED = (
    "AdamW's moments were saved (the checkpoint's files hold them) but not loaded: AdamW holds no state for some"
    " parameters after load_checkpoint. Load into a state dict that already has every moment (a fresh optimizer's"
    " own state_dict() has none; get_state_dict initialises them), then set_state_dict."
)
_NEVER_SAVED = (
    "AdamW's moments were never saved (the checkpoint's files hold none of them), so AdamW holds no state for some"
    " parameters after load_checkpoint: save the optimizer's state with the model's (get_state_dict(model,"
    " optimizer)) and load it back with set_state_dict."
)


def _parameters_hint(g: Any, i: int, case: Case, r: int) -> str:
    return (
        f"After load_checkpoint the model must hold the parameters saved after step {STEPS}, resharded for"
        f" {g.world_size} ranks: load with torch.distributed.checkpoint into the state dict of this model"
        " (get_state_dict gives this rank's shards) and apply it with set_state_dict; loading a file one rank"
        " saved, or the saving rank's own shard, does not reshard."
    )


def _resumed_hint(g: Any, i: int, case: Case, r: int) -> str:
    loaded = [j for j, c in enumerate(g.cases) if c.judges("parameters")]
    right = [case_failure(g, j, r, part=p) is None for j in loaded for p in ("parameters", "optimizer-state")]
    if all(right):
        return (
            "The loaded state is right, so the step itself went wrong: leave the optimizer's hyperparameters"
            " (param_groups) as they were saved."
        )
    return (
        "One more step equals uninterrupted training only when the parameters, both AdamW moments and the step"
        " count are all restored (see the parameters and optimizer-state checks)."
    )


def first_failure(facts: Facts, drivers: tuple[str, ...]) -> str | None:
    """Why a call of one of ``drivers`` failed on some rank (the first, with its phase and rank), or None."""
    for g in facts.groups:
        for i, case in enumerate(g.cases):
            if case.driver in drivers:
                for r in range(g.world_size):
                    if why := case_failure(g, i, r):
                        return f"{g.name}, rank {r}, {case.label}: {why}"
    return None


def _judge(check: str, hint: Callable[[Facts], training.Hint]) -> Any:
    def rule(facts: Facts) -> Outcome:
        failed = first_failure(facts, ("prepare", "load"))
        if failed:
            return Outcome(False, f"{failed}. Nothing was loaded, so the model and AdamW kept their fresh state.")
        return training.judge(facts, check, hint(facts), success="uninterrupted single-process training")

    return rule


RULES = {
    "sharded-save": sharded_save,
    "parameters": _judge("parameters", lambda facts: _parameters_hint),
    "optimizer-state": _judge("optimizer-state", _optimizer_hint),
    "resumed-step": _judge("resumed-step", lambda facts: _resumed_hint),
}
