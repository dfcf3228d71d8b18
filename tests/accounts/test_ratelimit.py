"""The sliding window, with a clock the test moves."""

from __future__ import annotations

from app.accounts.ratelimit import Limit, SlidingWindow


def test_window_allows_limit_then_says_how_long_to_wait() -> None:
    now = [1000.0]
    window = SlidingWindow(Limit(events=3, window_s=60), clock=lambda: now[0])
    for _ in range(3):
        assert window.retry_after("k") is None
        window.hit("k")
        now[0] += 1
    assert window.retry_after("k") == 57  # the first hit, at 1000, leaves at 1060; now is 1003
    assert window.retry_after("other") is None
    now[0] = 1060.5
    assert window.retry_after("k") is None  # the first hit has left the window


def test_reset_forgets_a_key() -> None:
    window = SlidingWindow(Limit(events=1, window_s=60))
    window.hit("k")
    assert window.retry_after("k") is not None
    window.reset("k")
    assert window.retry_after("k") is None
