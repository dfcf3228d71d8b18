"""Trusted checks for checkpoint-resharding: saved on 4 ranks, loaded on 2, against one process.

Never mounted into the sandbox. The reference is ``driver.reference`` (the unsharded MLP
trained by one process for k + 1 AdamW steps on the whole batches), run here, outside the
sandbox, on this lab's own copy of the public driver.
"""

from __future__ import annotations

import itertools
from typing import Any

import torch

from labs import training
from labs.judge import Case, Facts, Outcome, Phase, case_failure, result
from labs.public import load_public

DIMS = [32, 128, 128, 8]  # 21,768 float64 parameters: 170 KiB, 510 KiB with AdamW's two moments
BATCH = 16  # global batch: equal shares on 4 and 2 ranks
STEPS = 3  # trained on 4 ranks before the save; one more on 2 ranks after the load
HYPER = {"lr": 0.01, "weight_decay": 0.1}
TOLERANCE = (1e-9, 1e-11)  # float64: sharded gradients are averaged in another order
PARAMETERS = sum(b * a + b for a, b in itertools.pairwise(DIMS))
STATE_BYTES = 3 * 8 * PARAMETERS  # parameters and both moments, float64
# One file may hold at most this share of the whole state: each of 4 ranks writes about a quarter
# (plus a few KiB of headers); a rank that gathered everything writes all of it.
LARGEST_SHARE = 0.5
# Every saving rank's own part is at least this big (a quarter of the model alone is 43 KiB).
PART_BYTES = 8 * PARAMETERS // 10
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
    save = saving("save", f"save_checkpoint on {save_on} ranks after {STEPS} steps", {})

    def loading(driver: str, label: str) -> Case:
        rows = [dict(inputs) for _ in range(load_on)]
        want = {"prepared": True} if driver == "prepare" else {"loaded": True}
        # Judged by no check of their own: a load_checkpoint that raised is reported by every check after it.
        return Case("load", "load_checkpoint", label, rows, [want] * load_on, driver=driver, measure=driver == "load")

    prepare = loading("prepare", f"the MLP with other weights sharded on {load_on} ranks, a fresh AdamW")
    load = loading("load", f"load_checkpoint on {load_on} ranks")
    report = Case(
        check="parameters",
        fn="load_checkpoint",
        driver="report",
        label=f"after load_checkpoint on {load_on} ranks",
        inputs=[dict(inputs) for _ in range(load_on)],
        expected=[{"params": expected["params"], "optimizer": expected["optimizer"]} for _ in range(load_on)],
        parts={"parameters": ["params"], "optimizer-state": ["optimizer"]},
        tolerance={"params": TOLERANCE, "optimizer": TOLERANCE},
    )
    resume = Case(
        check="resumed-step",
        fn="load_checkpoint",
        driver="resume",
        label=f"step {STEPS + 1} on {load_on} ranks after load_checkpoint",
        inputs=[dict(inputs) for _ in range(load_on)],
        expected=[{"resumed": expected["resumed"]} for _ in range(load_on)],
        parts={"resumed-step": ["resumed"]},
        tolerance={"resumed": TOLERANCE},
    )
    return [Phase("save", save_on, [setup, *train, save]), Phase("load", load_on, [prepare, load, report, resume])]


def sharded_save(facts: Facts) -> Outcome:
    """Every rank wrote its own part: no file holds most of the state, and the files hold at least the model."""
    groups = [g for g in facts.groups if g.phase == "save"]
    if not groups:
        return Outcome(False, "the save phase was not run")
    g = groups[0]
    for i in range(len(g.cases)):
        for r in range(g.world_size):
            why = case_failure(g, i, r)
            if why:
                return Outcome(False, f"{g.name}, rank {r}, {g.cases[i].label}: {why}")
    data, why = files_verdict(result(g, len(g.cases) - 1, 0)["files"], g.world_size)
    return Outcome(why is None, f"{g.name}: {why}" if why else data.pop("summary"), data)


def files_verdict(files: dict[str, int], ranks: int) -> tuple[dict[str, Any], str | None]:
    """The files ``ranks`` ranks' save left under ``path`` (name -> bytes) against a sharded save; None if right."""
    data: dict[str, Any] = {"files": files, "state_bytes": STATE_BYTES, "largest_share": LARGEST_SHARE}
    total = sum(files.values())
    if total < 8 * PARAMETERS:
        return data, (
            f"save_checkpoint wrote {total:,} bytes under path, less than the model's parameters alone"
            f" ({8 * PARAMETERS:,} bytes of float64): write the checkpoint into the directory it is given"
        )
    name, biggest = max(files.items(), key=lambda kv: kv[1])
    if biggest > LARGEST_SHARE * STATE_BYTES:
        return data, (
            f"the file {name!r} holds {biggest:,} bytes, {biggest / STATE_BYTES:.0%} of the whole model"
            f" and optimizer state ({STATE_BYTES:,} bytes), so one rank gathered and wrote (nearly) everything."
            " Each rank must write only its own shards: torch.distributed.checkpoint.save does that with the"
            " sharded state dicts of get_state_dict(model, optimizer)."
        )
    parts = [k for k, v in files.items() if v >= PART_BYTES]
    if len(parts) < ranks:
        return data, (
            f"only {len(parts)} file(s) under path hold {PART_BYTES:,} bytes or more, but {ranks} ranks saved:"
            " each rank must write its own shards, nobody's may be left out. torch.distributed.checkpoint.save"
            " is collective: every rank calls it, and each writes the shards it holds."
        )
    share = ", ".join(f"{k}: {v:,}" for k, v in sorted(files.items()))
    data["summary"] = f"{len(files)} files, the largest {biggest / STATE_BYTES:.0%} of the state ({share})"
    return data, None


def _optimizer_hint(g: Any, i: int, case: Case, r: int) -> str:
    got = result(g, i, r) or {}
    moments = got.get("optimizer") if isinstance(got, dict) else None
    if isinstance(moments, dict):
        states = [m for m in moments.values() if isinstance(m, dict)]
        if any("missing" in m.values() for m in states):
            return (
                "AdamW holds no state for some parameters after load_checkpoint: save the optimizer's state with the"
                " model's (get_state_dict(model, optimizer)) and load it into a state dict that already has every"
                " moment (a fresh optimizer's own state_dict() has none; get_state_dict initialises them), then"
                " set_state_dict."
            )
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


def load_failure(facts: Facts) -> str | None:
    """Why preparing the model or the student's ``load_checkpoint`` failed on some rank, or None."""
    for g in facts.groups:
        for i, case in enumerate(g.cases):
            if case.driver in ("prepare", "load"):
                for r in range(g.world_size):
                    why = case_failure(g, i, r)
                    if why:
                        return f"{g.name}, rank {r}, {case.label}: {why}"
    return None


def _judge(check: str, hint: training.Hint) -> Any:
    def rule(facts: Facts) -> Outcome:
        failed = load_failure(facts)
        if failed:
            return Outcome(False, f"{failed}. Nothing was loaded, so the model and AdamW kept their fresh state.")
        return training.judge(facts, check, hint, success="uninterrupted single-process training")

    return rule


RULES = {
    "sharded-save": sharded_save,
    "parameters": _judge("parameters", _parameters_hint),
    "optimizer-state": _judge("optimizer-state", _optimizer_hint),
    "resumed-step": _judge("resumed-step", _resumed_hint),
}
