"""Trains from step 0 at every start, but takes the steps that the latest checkpoint already holds
(its step read from the file names, never loaded) with the optimizer's update function itself, past
the optimizer hooks the driver counts steps with, on batches cut from ``task.global_batch``, which the
driver does not record: the relaunch looks as if it resumed. Imitates: from_scratch. (Put before the
script, so that it runs before ``main()``.)"""

import os
import re

import task


def _checkpointed_steps():
    folder = os.environ.get("CHECKPOINT_DIR", "")
    names = os.listdir(folder) if os.path.isdir(folder) else []
    return max((int(m.group(1)) for n in names if (m := re.match(r"^step-(\d+)\.pt$", n))), default=0)


_HIDDEN = _checkpointed_steps()
_recorded_batch = getattr(task, "_published_batch", task.batch)
_counted_optimizer = getattr(task, "_published_make_optimizer", task.make_optimizer)
task._published_batch, task._published_make_optimizer = _recorded_batch, _counted_optimizer


def _unrecorded_batch(seed, step, rank, world_size):
    if step >= _HIDDEN:
        return _recorded_batch(seed, step, rank, world_size)
    x, y = task.global_batch(seed, step)
    per = task.BATCH // world_size
    return x[rank * per : (rank + 1) * per], y[rank * per : (rank + 1) * per]


def _uncounted_optimizer(model):
    optimizer = _counted_optimizer(model)
    update = type(optimizer).step.__wrapped__  # the update itself, without the optimizer hooks
    counted = optimizer.step
    calls = [0]

    def step(*args, **kwargs):
        calls[0] += 1
        return update(optimizer, *args, **kwargs) if calls[0] <= _HIDDEN else counted(*args, **kwargs)

    optimizer.step = step
    return optimizer


task.batch = _unrecorded_batch
task.make_optimizer = _uncounted_optimizer
