"""What a process that forks ranks imports before any job: torch's distributed modules, a lab's ``preload``,
and the modules torch imports lazily on paths every rank takes. The warm template runs ``warm`` once; a zygote
started cold runs it itself, and each job imports its lab's ``preload`` where the template had not.
"""

from __future__ import annotations

import contextlib
import importlib
import sys

# Modules torch imports lazily on paths every rank takes (reading its inputs, a backward pass): the template
# imports them once, so no rank pays for them.
RANK_IMPORTS = ("torch.utils.serialization", "torch.profiler._cupti_monitor")


def warm(modules: list[str] | None = None) -> None:
    """Import what every rank needs, before any job: the expensive part of starting a rank."""
    import warnings

    warnings.filterwarnings("ignore", message="Failed to initialize NumPy")
    import torch.distributed as dist
    import torch.distributed.distributed_c10d  # noqa: F401

    assert dist.is_gloo_available()
    preload(modules or [])
    for name in RANK_IMPORTS:  # imported at every rank's first torch.load or backward otherwise
        with contextlib.suppress(ImportError):
            importlib.import_module(name)


def preload(modules: list[str]) -> None:
    """Import the modules a lab's code would import lazily (``lab.yaml``'s ``preload``)."""
    for name in modules:
        if name not in sys.modules:
            importlib.import_module(name)
