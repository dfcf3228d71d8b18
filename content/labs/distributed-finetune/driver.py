"""Public driver for distributed-finetune: how the grader launches your script on each rank.

Not secret: read it to see exactly what runs in each process. Each rank already holds torchrun's
variables (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT, ...); ``run`` adds the job's
variables for this launch (SEED, CORPUS_SIZE, CHECKPOINT_EVERY, CHECKPOINT_DIR, METRICS_PATH), runs
your file as ``__main__`` as torchrun would, and reports its exit status and the tail of its stderr.

One launch per grading is killed part-way: ``inputs["kill_at"]`` names an optimizer step, and once
every rank has taken that many ``optimizer.step()`` calls it ends with SIGKILL (no ``finally``, no
``atexit``, no flush), as a preempted job. The grader then launches your script again on the same
CHECKPOINT_DIR. What is judged is read by the grader after the ranks have exited: the file at
METRICS_PATH, what each rank printed, and how the launches ended.
"""

from __future__ import annotations

import os
import signal
from typing import Any

from torch.optim.optimizer import register_optimizer_step_post_hook


def run(script: Any, inputs: dict[str, Any]) -> dict[str, Any]:
    """Run the student's script once on this rank, with this launch's environment."""
    saved_env = dict(os.environ)
    shared = os.environ["RINGLAB_SHARED_DIR"]
    env = {k: str(v).format(shared=shared) for k, v in inputs["env"].items()}
    os.makedirs(env["CHECKPOINT_DIR"], exist_ok=True)
    os.environ.update(env)
    kill_at = inputs.get("kill_at")
    steps = [0]

    def count(*_: Any) -> None:
        steps[0] += 1
        if steps[0] == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)

    hook = register_optimizer_step_post_hook(count)
    try:
        status = script.run()
    finally:
        hook.remove()
        os.environ.clear()
        os.environ.update(saved_env)
    return {"exit": status, "stderr": script.stderr[-3000:], "optimizer_steps": steps[0]}
