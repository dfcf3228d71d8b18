"""What the help page says about each status a student meets: one plain sentence each.

Kept beside the code's own lists (``labs.verdict.Status``, ``SubmissionStatus``); a test fails when
a status is added there and not explained here.
"""

from __future__ import annotations

from app.labs.models import SubmissionStatus

SUBMISSION_STATUSES: dict[str, str] = {
    SubmissionStatus.queued: "Waiting for a grading worker; the page shows its place in the queue and about how long.",
    SubmissionStatus.running: "A worker is running your code on its ranks now; the verdict is about a second away.",
    SubmissionStatus.graded: "It ran to the end and every check was judged: its result is the score, e.g. 6/10.",
    SubmissionStatus.failed: (
        "Your code stopped early or could not start (it did not parse, raised, crashed, hit a limit or "
        "deadlocked). If some checks could still be judged, the result is the score they earned, e.g. 6/10; "
        'if none could, it says "Could not run" and why. The message says where.'
    ),
    SubmissionStatus.error: "Our grader failed on every try. It never counts against you; staff can re-grade it.",
}

VERDICTS: dict[str, str] = {
    "passed": "Every check passed.",
    "failed": (
        "The code ran to the end and some check did not pass: a wrong value, too many bytes, a collective "
        "the lab rules out."
    ),
    "compile_error": "The file does not parse as Python; the message gives the line and column.",
    "not_allowed": (
        "The code reaches into the grader (stack frames, the garbage collector, the driver's module, ctypes, "
        "...) and was not run."
    ),
    "runtime_error": "Your code raised an exception; the traceback points at your line.",
    "crashed": "A rank ended without reporting: it exited, was killed by a signal, or closed its channel.",
    "time_limit": "A rank was still busy when the lab's time limit passed (an endless loop, or far too much work).",
    "deadlock": (
        "Every unfinished rank was waiting for another: a send without its receive, or collectives in a "
        "different order on different ranks."
    ),
    "memory_limit": "A rank used more memory than the lab allows.",
    "refused": "The sandbox could not be set up, so nothing ran; it is not counted against you.",
    "internal_error": "The grader itself failed; not your fault, and never counted.",
}
