"""Public driver for accelerate: how the grader launches your script on each process.

Not secret: read it to see exactly what runs. ``run`` is the launcher. On 1 process it starts your file
as ``python train.py`` would: torchrun's variables (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR,
MASTER_PORT, ...) are removed, there is no process group. On N processes it starts it as
``accelerate launch --cpu --num_processes N train.py`` would: each process keeps torchrun's variables
for its place in the job, and gets Accelerate's own (``ACCELERATE_USE_CPU=True``, as ``--cpu`` sets it:
this machine has no GPU). Then come the job's settings (``task.settings()`` reads them), your file runs
as ``__main__``, and ``run`` reports the exit status, the tail of stderr and, on rank 0, what your
script saved at ``RESULT_PATH`` (a path of that process's own).

Each process of the grader runs as a user of its own, where every process of a real job is the same
user: ``save_state`` writes ``model.safetensors`` readable by its owner only, so after your script ends,
``run`` makes the files this process wrote in ``CHECKPOINT_DIR`` readable by the others, as they would
be on one machine. What is graded is computed outside your processes, from what ``run`` returns.
"""

from __future__ import annotations

import os
import stat
import tempfile
from typing import Any

import torch

TORCHRUN = (
    "RANK",
    "WORLD_SIZE",
    "LOCAL_RANK",
    "LOCAL_WORLD_SIZE",
    "GROUP_RANK",
    "GROUP_WORLD_SIZE",
    "ROLE_NAME",
    "ROLE_RANK",
    "ROLE_WORLD_SIZE",
    "MASTER_ADDR",
    "MASTER_PORT",
    "TORCHELASTIC_RESTART_COUNT",
    "TORCHELASTIC_MAX_RESTARTS",
    "TORCHELASTIC_RUN_ID",
    "TORCHELASTIC_USE_AGENT_STORE",
)
# What `accelerate launch --cpu` adds to each process's environment (accelerate.utils.launch), beside torchrun's.
ACCELERATE_LAUNCH = {
    "ACCELERATE_USE_CPU": "True",
    "ACCELERATE_MIXED_PRECISION": "no",
    "ACCELERATE_DYNAMO_BACKEND": "NO",
}
RESULT_KEYS = ("model", "eval_losses")


def run(script: Any, inputs: dict[str, Any]) -> dict[str, Any]:
    """Launch the student's script once on this process; what it saved (rank 0) and how it ended."""
    saved_env = dict(os.environ)
    rank = int(saved_env.get("RANK", "0"))
    shared = os.environ["RINGLAB_SHARED_DIR"]
    tempfile.tempdir = None  # a forked process would still use the folder its parent looked up first
    result_path = os.path.join(tempfile.mkdtemp(prefix="accelerate-"), "result.pt")
    env = {k: str(v).format(shared=shared) for k, v in inputs["env"].items()} | {"RESULT_PATH": result_path}
    if inputs["launcher"] == "python":
        for name in TORCHRUN:
            os.environ.pop(name, None)
    else:
        os.environ.update(ACCELERATE_LAUNCH)
    os.environ.update(env)
    try:
        status = script.run()
    finally:
        _reset_accelerate()
        os.environ.clear()
        os.environ.update(saved_env)
    _share(env["CHECKPOINT_DIR"])
    out: dict[str, Any] = {"exit": status, "stderr": script.stderr[-3000:]}
    if rank == 0:
        out["result"] = _result(result_path)
    return out


def _result(path: str) -> dict[str, Any]:
    """What the script saved at RESULT_PATH: its model and evaluation losses, or why there is nothing to read."""
    if not os.path.exists(path):
        return {"problem": "the script saved nothing at RESULT_PATH"}
    try:
        saved = torch.load(path, weights_only=True)
    except Exception as exc:  # the student's file: any error is theirs to read
        return {"problem": f"torch.load(RESULT_PATH) failed: {type(exc).__name__}: {str(exc)[:300]}"}
    if not isinstance(saved, dict) or any(key not in saved for key in RESULT_KEYS):
        return {"problem": f"RESULT_PATH holds no dict with the keys {', '.join(RESULT_KEYS)}"}
    out: dict[str, Any] = {}
    model, losses = saved["model"], saved["eval_losses"]
    if isinstance(model, dict) and all(type(v) in (torch.Tensor, torch.nn.Parameter) for v in model.values()):
        out["model"] = {str(k): v.detach().clone() for k, v in model.items()}  # a Parameter detaches to a Tensor
    else:
        out["problem"] = "'model' is not a state_dict of plain tensors"
    if type(losses) is torch.Tensor:
        out["eval_losses"] = losses.detach().clone()
    else:
        out["problem"] = f"'eval_losses' is a {type(losses).__name__}, not a tensor"
    return out


def _share(folder: str) -> None:
    """Make the files this process wrote under ``folder`` readable by the job's other processes."""
    for root, _, files in os.walk(folder):
        for name in files:
            path = os.path.join(root, name)
            try:
                info = os.stat(path)
                if info.st_uid == os.getuid():
                    os.chmod(path, stat.S_IMODE(info.st_mode) | 0o444)
            except OSError:
                pass


def _reset_accelerate() -> None:
    """Forget Accelerate's process-wide state, as the end of the process would (a later run starts afresh)."""
    try:
        from accelerate.state import AcceleratorState, GradientState
    except ImportError:
        return
    AcceleratorState._reset_state(reset_partial_state=True)
    GradientState._reset_state()
