"""Pictures of pages as the browser tests go: artifacts to look at, not what the tests assert."""

from __future__ import annotations

import time
from pathlib import Path

from playwright.sync_api import Error, Page

TRANSIENT = "Unable to capture screenshot"  # Chromium's capture failing now and then on a busy machine


def picture(page: Page, path: Path, *, full_page: bool = True) -> None:
    """Save a picture of ``page`` at ``path`` (its folder made), trying once more if Chromium's capture fails
    for a moment; any other error, or the same one twice, is raised."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        page.screenshot(path=str(path), full_page=full_page)
    except Error as exc:
        if TRANSIENT not in str(exc):
            raise
        time.sleep(0.5)
        page.screenshot(path=str(path), full_page=full_page)
