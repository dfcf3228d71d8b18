"""Public driver for crash-resume: how the grader launches your script.

Not secret: read it to see exactly what runs in each process. Each rank already holds torchrun's
variables for its place in the job (the grader spreads the ranks over several "nodes", so
``LOCAL_RANK`` is not ``RANK``); ``run`` adds the job's variables for this launch (and, once, leaves
some of torchrun's out), runs your file as ``__main__`` as torchrun would, and reports the exit
status and the tail of stderr.

The crash is not here. The grader delivers it from outside your processes, at a point it chooses
for each grading and never tells them: it watches ``CHECKPOINT_DIR`` and, when a checkpoint
``step-<n>.pt`` appears there, kills a rank with SIGKILL (no ``finally``, no ``atexit``, no flush),
as a machine that fails. Once per grading the rank writing a checkpoint is killed while it writes
it: the grader then cuts the file those bytes went to at half its size, puts it back under the
name it was created with if it had been renamed since, and removes the files created after it,
so that ``CHECKPOINT_DIR`` holds what a machine failing mid-write leaves. What is judged is read
by the grader itself, outside your processes, from the files your script leaves
(``FINAL_MODEL_PATH``, the checkpoints); the counts below are shown with its feedback only.
"""

from __future__ import annotations

import os
import tempfile
from typing import Any

import task
from torch.optim.optimizer import register_optimizer_step_post_hook


def run(script: Any, inputs: dict[str, Any]) -> dict[str, Any]:
    """Run the student's script once on this rank, with this launch's environment."""
    saved_env = dict(os.environ)
    shared = os.environ["RINGLAB_SHARED_DIR"]
    env = {k: str(v).format(shared=shared) for k, v in inputs["env"].items()}
    os.makedirs(env["CHECKPOINT_DIR"], exist_ok=True)
    os.environ.update(env)
    for name in inputs.get("unset", []):
        os.environ.pop(name, None)
    # A process torchrun starts finds its temporary directory in $TMPDIR; a forked rank would still use the
    # one its parent looked up first.
    tempfile.tempdir = None
    steps = [0]
    hook = register_optimizer_step_post_hook(lambda *_: steps.__setitem__(0, steps[0] + 1))
    task.requested.clear()
    try:
        status = script.run()
    finally:
        hook.remove()
        os.environ.clear()
        os.environ.update(saved_env)
    return {
        "exit": status,
        "stderr": script.stderr[-3000:],
        "optimizer_steps": steps[0],
        "batches": list(task.requested),
    }
