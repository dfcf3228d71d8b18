"""Public driver for crash-resume: how the grader launches your script, crashes it and reads what it left.

Not secret: read it to see exactly what the grader does. Each rank already holds torchrun's
variables for its place in the job (the grader spreads the ranks over several "nodes", so
``LOCAL_RANK`` is not ``RANK``); ``run`` adds the lab's variables, arms the crash the grader
chose for this phase, and runs your file as ``__main__``, as torchrun would. It then reports
the exit status, how many optimizer steps ran and which batches were asked for, and (rank 0,
when the phase asks) the parameters your script saved at ``FINAL_MODEL_PATH``.

Crashes are ``SIGKILL``: the process ends at once, with no ``finally``, no ``atexit``, no flush.
``kill_after_step``: rank ``kill_rank`` is killed right after its ``kill_after_step``-th
``optimizer.step()``. ``kill_in_save_after_step``: the first ``torch.save`` that rank
``kill_rank`` starts after that many optimizer steps writes the first half of its bytes, then
the rank is killed, as if the machine died in the middle of writing the checkpoint.
"""

from __future__ import annotations

import io
import os
import signal
from typing import Any

import task
import torch
from torch.optim.optimizer import register_optimizer_step_post_hook

KILL = signal.SIGKILL


def _die() -> None:
    os.kill(os.getpid(), KILL)


class Faults:
    """Counts optimizer steps; kills this rank where the phase says."""

    def __init__(self, inputs: dict[str, Any], rank: int):
        mine = inputs.get("kill_rank") == rank
        self.after_step = inputs.get("kill_after_step") if mine else None
        self.in_save_after = inputs.get("kill_in_save_after_step") if mine else None
        self.steps = 0
        self.saves: list[str] = []

    def step_done(self, *_: Any) -> None:
        self.steps += 1
        if self.after_step is not None and self.steps == self.after_step:
            _die()

    def wrap_save(self, save: Any) -> Any:
        def faulty_save(obj: Any, f: Any, *args: Any, **kwargs: Any) -> Any:
            self.saves.append(os.fspath(f) if isinstance(f, str | os.PathLike) else type(f).__name__)
            if self.in_save_after is None or self.steps < self.in_save_after:
                return save(obj, f, *args, **kwargs)
            buffer = io.BytesIO()
            save(obj, buffer, *args, **kwargs)
            half = buffer.getvalue()[: len(buffer.getvalue()) // 2]
            if isinstance(f, str | os.PathLike):
                with open(f, "wb") as out:
                    out.write(half)
                    out.flush()
                    os.fsync(out.fileno())
            else:
                f.write(half)
                f.flush()
            _die()

        return faulty_save


def run(script: Any, inputs: dict[str, Any]) -> dict[str, Any]:
    """Run the student's script once on this rank, as this phase of the grading asks."""
    rank = int(os.environ["RANK"])
    saved_env = dict(os.environ)
    shared = os.environ["RINGLAB_SHARED_DIR"]
    env = {k: str(v).format(shared=shared) for k, v in inputs["env"].items()}
    os.makedirs(env["CHECKPOINT_DIR"], exist_ok=True)
    os.environ.update(env)
    for name in inputs.get("unset", []):
        os.environ.pop(name, None)
    faults = Faults(inputs, rank)
    hook = register_optimizer_step_post_hook(faults.step_done)
    save = torch.save
    torch.save = torch.serialization.save = faults.wrap_save(save)
    task.requested.clear()
    try:
        status = script.run()
    finally:
        torch.save = torch.serialization.save = save
        hook.remove()
        os.environ.clear()
        os.environ.update(saved_env)
    out: dict[str, Any] = {
        "exit": status,
        "stderr": script.stderr[-3000:],
        "optimizer_steps": faults.steps,
        "batches": list(task.requested),
    }
    if inputs.get("read_final") and rank == 0 and status == 0:
        out["params"] = read_final(env["FINAL_MODEL_PATH"])
    return out


def read_final(path: str) -> Any:
    """The model parameters the script saved at ``FINAL_MODEL_PATH`` (a DDP ``module.`` prefix dropped)."""
    try:
        state = torch.load(path, weights_only=True)
    except Exception as exc:  # reported as the result: the judge says what was wrong
        return f"could not load FINAL_MODEL_PATH ({path}): {type(exc).__name__}: {exc}"[:500]
    if not isinstance(state, dict):
        return f"FINAL_MODEL_PATH holds a {type(state).__name__}, not a state_dict"
    return {str(k).removeprefix("module."): v for k, v in state.items() if isinstance(v, torch.Tensor)}
