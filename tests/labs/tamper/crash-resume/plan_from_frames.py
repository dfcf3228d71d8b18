"""Reads the driver's fault plan from its stack frame (the ``faults`` of ``driver.run``) and, when it
says this rank dies inside the next checkpoint's save, kills itself before writing a byte. Imitates:
in_place_save. (Put before the script, so that it runs before ``main()``.)"""

import os
import signal
import sys

import torch


def _fault_plan():
    frame = sys._getframe()
    while frame is not None:
        if "faults" in frame.f_locals:
            return frame.f_locals["faults"]
        frame = frame.f_back
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
