"""Finds the driver's fault plan through torch's registry of global optimizer hooks (the driver's step
counter is a bound method of its ``Faults``) and, when the plan says this rank dies inside the next
checkpoint's save, kills itself before writing a byte: the checkpoint it would have half-written never
exists, so writing checkpoints in place is never caught. Imitates: in_place_save. (Put before the
script, so that it runs before ``main()``.)"""

import os
import signal

import torch
from torch.optim.optimizer import _global_optimizer_post_hooks


def _fault_plan():
    for hook in list(_global_optimizer_post_hooks.values()):
        owner = getattr(hook, "__self__", None)
        if owner is not None and hasattr(owner, "in_save_after"):
            return owner
    return None


def _install():
    """Wraps ``torch.save`` with closures only: the script's globals are gone once it has run."""
    plan, faulty_save, kill, me = _fault_plan(), torch.save, os.kill, os.getpid

    def save_or_die_cleanly(obj, f, *args, **kwargs):
        if plan is not None and plan.in_save_after is not None and plan.steps >= plan.in_save_after:
            kill(me(), signal.SIGKILL)
        return faulty_save(obj, f, *args, **kwargs)

    torch.save = save_or_die_cleanly


_install()
