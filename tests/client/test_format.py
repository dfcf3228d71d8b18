"""What `ringlab labs` and `ringlab submit` print, from API bodies: exact text, no server."""

from __future__ import annotations

from typing import Any

from app.client import format as fmt

RING = {"id": "ring-allreduce", "title": "Ring all-reduce", "world_sizes": [2, 3, 4], "needs_gpu": False}


def finished(
    status: str, score: int, checks: list[dict[str, Any]], verdict: dict[str, Any] | None = None
) -> dict[str, Any]:
    return {
        "id": 12, "status": status, "score": score, "max_score": 10, "checks": checks,
        "verdict": verdict or {"status": "passed", "message": ""},
    }  # fmt: skip


def check(name: str, points: int, max_points: int, message: str = "") -> dict[str, Any]:
    return {"id": name, "name": name, "passed": points == max_points, "points": points, "max_points": max_points,
            "message": message}  # fmt: skip


def test_the_labs_table_lines_up_and_shows_the_best_score_or_a_dash() -> None:
    labs = [
        {**RING, "max_score": 10, "best_score": 7},
        {"id": "zero-1", "title": "ZeRO-1", "world_sizes": [2], "needs_gpu": True, "max_score": 12, "best_score": None},
    ]
    assert fmt.labs_table(labs).splitlines() == [
        "LAB             TITLE            RANKS    BEST",
        "ring-allreduce  Ring all-reduce  2, 3, 4  7/10",
        "zero-1          ZeRO-1           2 (GPU)  -",
    ]


def test_a_server_without_best_scores_still_lists_its_labs() -> None:
    assert fmt.labs_table([RING]).splitlines()[1].endswith("2, 3, 4  -")


def test_the_queue_line_says_the_position_and_the_wait_as_the_page_does() -> None:
    queued = {"status": "queued", "queue_position": 3, "estimated_wait_s": 42.0, "poll_after_s": 4.2}
    assert fmt.progress_line(queued) == "Queued: position 3 in the queue, about 45 s to your result."
    assert fmt.progress_line({**queued, "estimated_wait_s": None}) == "Queued: position 3 in the queue."
    assert fmt.progress_line({"status": "running", "poll_after_s": 0.5}) == "Grading now..."
    assert fmt.progress_line(finished("graded", 10, [])) is None


def test_polling_follows_the_servers_poll_after_within_bounds() -> None:
    assert fmt.next_poll_s({"poll_after_s": 4.2}) == 4.2
    assert fmt.next_poll_s({"poll_after_s": 0.01}) == fmt.POLL_MIN_S
    assert fmt.next_poll_s({"poll_after_s": 600}) == fmt.POLL_MAX_S
    assert fmt.next_poll_s({"poll_after_s": None}) == fmt.POLL_DEFAULT_S


def test_full_marks_print_every_check_and_the_total_and_exit_0() -> None:
    body = finished("graded", 10, [check("sums in place", 4, 4, "world sizes 2, 3, 4: ok"), check("neighbours", 6, 6)])
    assert fmt.result_lines(body) == [
        "PASS    4/4  sums in place",
        "             world sizes 2, 3, 4: ok",
        "PASS    6/6  neighbours",
        "Total: 10/10",
        "Full marks.",
    ]
    assert fmt.exit_status(body) == 0


def test_below_full_marks_says_which_check_failed_in_words_and_exits_1() -> None:
    body = finished(
        "graded", 4, [check("sums in place", 4, 4), check("neighbours", 0, 6, "rank 0 sent to rank 0\nfix it")]
    )
    lines = fmt.result_lines(body)
    assert lines[1:4] == ["FAIL    0/6  neighbours", "             rank 0 sent to rank 0", "             fix it"]
    assert lines[-1] == "Total: 4/10"
    assert fmt.exit_status(body) == 1


def test_code_that_could_not_run_gives_the_reason_and_exits_1() -> None:
    verdict = {"status": "compile_error", "message": "line 2: '(' was never closed"}
    body = finished("failed", 0, [check("sums in place", 0, 4)], verdict)
    assert fmt.result_lines(body)[:2] == [
        "Your code did not run to the end (compile error):",
        "  line 2: '(' was never closed",
    ]
    assert fmt.exit_status(body) == 1


def test_a_grader_error_is_not_the_students_and_exits_2() -> None:
    body = {"id": 3, "status": "error", "score": None, "max_score": 10, "checks": [], "verdict": {"message": "lost"}}
    lines = fmt.result_lines(body)
    assert "not in your code" in lines[0] and lines[1] == "  lost" and "submit again" in lines[-1]
    assert fmt.exit_status(body) == 2


def test_fetch_writes_the_statement_the_starter_and_the_public_files() -> None:
    detail = {"statement": "# Ring", "starter_code": "def f(): ...\n", "public_files": ["driver.py"]}
    assert fmt.lab_files(detail, {"driver.py": "import student\n"}) == {
        "statement.md": "# Ring",
        "starter.py": "def f(): ...\n",
        "driver.py": "import student\n",
    }


def test_a_held_poll_asks_for_the_servers_hold_within_the_clients_timeout() -> None:
    assert fmt.next_hold_s({"long_poll_s": 6.2}) == 6.2
    assert fmt.next_hold_s({"long_poll_s": 60}) == fmt.HOLD_MAX_S  # under the 30 s timeout of a request
    assert fmt.next_hold_s({"long_poll_s": None}) == 0.0  # an older server: a plain poll instead
    assert fmt.next_hold_s({}) == 0.0
