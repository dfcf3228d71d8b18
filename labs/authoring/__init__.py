"""The authoring API: everything a lab's ``checks.py`` (and a trusted helper beside it) may import.

A lab is written against this module alone (``from labs.authoring import Case, Facts, Outcome, ...``);
the content check refuses a ``checks.py`` that imports the engine from anywhere else, so the engine's
modules can change without breaking a lab. What a check may score is what the trusted side knows:
results the ranks returned, compared outside the sandbox with a reference computed here
(``Case.expected``, ``result``, ``case_failure``, ``compare``), and what the worker and the zygote observed
from outside the ranks (``GroupRun.wire``: bytes the kernel counted; ``memory_peak``: the rank's cgroup;
``GroupRun.files``: what a phase left on disk, read after its ranks exited). Never a value computed
inside a rank about itself: the student's code controls everything in its own process.

The guide, with a lab written from ``ringlab lab new`` to proven: docs/authoring-labs.md.
"""

from __future__ import annotations

from labs.authoring import layers, rules, scan, steps, tallies, training, wire
from labs.authoring.public import load_public, load_trusted
from labs.host.judge import (
    Case,
    Facts,
    GroupRun,
    Outcome,
    Phase,
    RankRun,
    case_failure,
    later,
    memory_peak,
    no_builtin_collectives,
    result,
    summarise_failures,
)
from labs.rank.trees import Tolerance, compare, off_by, tensor_difference
from labs.spec import UNJUDGED

__all__ = [
    "UNJUDGED",
    "Case",
    "Facts",
    "GroupRun",
    "Outcome",
    "Phase",
    "RankRun",
    "Tolerance",
    "case_failure",
    "compare",
    "later",
    "layers",
    "load_public",
    "load_trusted",
    "memory_peak",
    "no_builtin_collectives",
    "off_by",
    "result",
    "rules",
    "scan",
    "steps",
    "summarise_failures",
    "tallies",
    "tensor_difference",
    "training",
    "wire",
]
