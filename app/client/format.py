"""What the client prints, from the API's JSON bodies: pure functions, no network and no files."""

from __future__ import annotations

from typing import Any

from app.labs.queue_view import describe
from labs.verdict import show_points

# Exit statuses of `ringlab submit`: scripts and CI can tell a lab to finish from a broken set-up.
FULL_MARKS, BELOW_FULL_MARKS, NOT_GRADED = 0, 1, 2
POLL_MIN_S, POLL_MAX_S, POLL_DEFAULT_S = 0.2, 30.0, 1.0
HOLD_MAX_S = 25.0  # a held request's longest hold: the client's timeout is 30 s
FIRST_HOLD_S = 10.0  # the first ask after submitting: held until the status changes, 10 s at most


def labs_table(labs: list[dict[str, Any]]) -> str:
    """One line per lab: id, title, world sizes (and whether it needs a GPU), the best score so far."""
    header = ("LAB", "TITLE", "RANKS", "BEST")
    rows = [header] + [
        (
            lab["id"],
            lab["title"],
            ", ".join(str(n) for n in lab["world_sizes"]) + (" (GPU)" if lab.get("needs_gpu") else ""),
            best(lab),
        )
        for lab in labs
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(len(header) - 1)]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(row[:-1], widths, strict=True)) + "  " + row[-1]
        for row in rows
    ).rstrip()


def best(lab: dict[str, Any]) -> str:
    """The student's best graded score as "7/10" or "7.5/10"; "-" when there is none (or the server does not say)."""
    score, top = lab.get("best_score"), lab.get("max_score")
    if score is None:
        return "-"
    return f"{show_points(score)}/{top}" if top is not None else show_points(score)


def progress_line(submission: dict[str, Any]) -> str | None:
    """While not done, the one line to show: the queue position and wait, or that grading runs."""
    status = submission.get("status")
    if status == "queued":
        position = submission.get("queue_position") or submission.get("position")
        where = f"Queued: position {position} in the queue" if position else "Queued"
        wait = submission.get("estimated_wait_s")
        return f"{where}, {describe(wait)} to your result." if wait is not None else f"{where}."
    if status == "running":
        return "Grading now..."
    return None


def next_poll_s(submission: dict[str, Any]) -> float:
    """How long to wait before asking again: the server's poll_after_s, kept between 0.2 and 30 s."""
    after = submission.get("poll_after_s")
    if not isinstance(after, int | float):
        return POLL_DEFAULT_S
    return min(POLL_MAX_S, max(POLL_MIN_S, float(after)))


def next_hold_s(submission: dict[str, Any]) -> float:
    """How long the server may hold the next request (``?wait=``, answered when the status changes): its
    long_poll_s, at most HOLD_MAX_S (under the client's timeout); 0 when it offers none (poll instead)."""
    hold = submission.get("long_poll_s")
    if not isinstance(hold, int | float) or hold <= 0:
        return 0.0
    return min(HOLD_MAX_S, float(hold))


def result_lines(submission: dict[str, Any]) -> list[str]:
    """The finished submission: the verdict's reason when the code did not run, each check, the total."""
    status = submission.get("status")
    verdict = submission.get("verdict") or {}
    lines = []
    if status == "error":
        lines.append("The grader could not finish this submission (a problem on the server, not in your code).")
        if verdict.get("message"):
            lines.append(f"  {verdict['message']}")
        lines.append("It does not count against you: submit again later.")
        return lines
    if status == "failed":
        lines.append(f"Your code did not run to the end ({verdict.get('status', 'failed').replace('_', ' ')}):")
        lines += _indented(verdict.get("message", ""), "  ")
    for check in submission.get("checks", []):
        mark = "PASS" if check.get("passed") else "FAIL"
        points = f"{show_points(check.get('points', 0))}/{check.get('max_points', 0)}"
        lines.append(f"{mark}  {points:>5}  {check.get('name', check.get('id', ''))}")
        lines += _indented(check.get("message", ""), " " * 13)
    lines.append(f"Total: {show_points(submission.get('score') or 0)}/{submission.get('max_score') or 0}")
    if exit_status(submission) == FULL_MARKS:
        lines.append("Full marks.")
    return lines


def _indented(text: str, prefix: str) -> list[str]:
    return [prefix + line for line in text.strip().splitlines() if line.strip()]


def exit_status(submission: dict[str, Any]) -> int:
    """0 only at full marks; 1 for judged code below them (graded, or stopped early); 2 if it was not graded."""
    status = submission.get("status")
    if status == "error" or status not in ("graded", "failed"):
        return NOT_GRADED
    score, top = submission.get("score"), submission.get("max_score")
    if top and score is not None and score >= top:
        return FULL_MARKS
    return BELOW_FULL_MARKS


def lab_files(detail: dict[str, Any], public: dict[str, str]) -> dict[str, str]:
    """The files `ringlab fetch` writes, by name: the statement, the starter code, the public files."""
    return {"statement.md": detail.get("statement", ""), "starter.py": detail.get("starter_code", ""), **public}
