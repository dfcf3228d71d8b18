"""A student signs up, opens the ring all-reduce lab, pastes a solution and watches it graded live.

The server is `ringlab serve` on SQLite, so its embedded worker (a child process, real
bubblewrap sandbox, real torch.distributed ranks) does the grading. The code editor is
CodeMirror 5 over the form's textarea; without JavaScript the plain textarea submits.
"""

from __future__ import annotations

import re
import secrets
import time

import pytest
from playwright.sync_api import Browser, Locator, Page, StorageState, expect

from tests.conftest import CONTENT_DIR

DONE = re.compile("graded|failed|error")


def _sign_up(page: Page) -> None:
    page.goto("/signup")
    page.get_by_label("Username").fill(f"lab{secrets.token_hex(3)}")
    page.get_by_label("Password").fill("a-long-password-1")
    page.get_by_role("button", name="Sign up").click()
    page.wait_for_url("**/")


@pytest.fixture(scope="module")
def student(browser: Browser, server: str) -> StorageState:
    """A signed-in student's browser state, shared by the editor tests: the server takes only
    RINGLAB_SIGNUP_LIMIT_PER_CLIENT (10) sign-ups an hour from one address, the whole suite's."""
    context = browser.new_context(base_url=server)
    _sign_up(context.new_page())
    state = context.storage_state()
    context.close()
    return state


def _editor(page: Page) -> Locator:
    """CodeMirror's input (a hidden textarea that has the focus), found by the name a screen reader says."""
    return page.get_by_role("textbox", name="Your code")


def _paste_code(page: Page, code: str) -> None:
    """Replace everything in the editor with `code`, as a paste does (no auto-indent)."""
    page.locator(".CodeMirror-lines").click()
    expect(_editor(page)).to_be_focused()
    page.keyboard.press("Control+A")
    page.keyboard.insert_text(code)


def test_submit_the_ring_lab_and_see_every_check_pass_without_reloading(page: Page) -> None:
    _sign_up(page)
    page.goto("/exercises")
    page.get_by_role("link", name="Ring all-reduce").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Ring all-reduce")
    marker = page.evaluate("window.__stays = 'same page'")  # a reload would lose it
    assert marker == "same page"

    _paste_code(page, (CONTENT_DIR / "labs" / "ring-allreduce" / "solution.py").read_text())
    page.get_by_role("button", name="Submit").click()
    result = page.locator("#lab-result")
    expect(result).to_have_attribute("data-status", "graded", timeout=60_000)
    expect(result.get_by_text("10/10 Passed")).to_be_visible()
    rows = result.locator("table.lab-checks tbody tr")
    expect(rows).to_have_count(4)
    expect(result.locator("tr.fail")).to_have_count(0)
    expect(result.get_by_role("heading", name="Bytes sent per rank")).to_be_visible()
    expect(result.locator("table.lab-volume")).to_contain_text("2(N-1)/N")
    # A mouse hovers: the picture's hint says so (a touch screen is told to open the table instead).
    expect(result.get_by_text("hover a cell for its exact count", exact=False)).to_be_visible()
    expect(result.get_by_text('"The numbers" under each picture gives every exact count.')).to_be_hidden()
    expect(page.locator("#lab-history")).to_contain_text("10/10")
    assert page.evaluate("window.__stays") == "same page"


def test_the_editor_highlights_python_indents_with_tab_and_submits_what_was_typed(
    page: Page, student: StorageState
) -> None:
    page.context.add_cookies(student["cookies"])
    page.goto("/labs/collectives-p2p")  # the editor holds the starter code, or this student's last submission
    editor = _editor(page)
    expect(page.locator(".CodeMirror")).to_be_visible()
    expect(page.locator("#lab-code")).to_be_hidden()  # the textarea stays in the form, behind the editor
    expect(page.locator(".CodeMirror .cm-keyword").first).to_be_visible()
    expect(page.get_by_text("press Esc, then Tab")).to_be_visible()

    page.get_by_text("Your code", exact=True).click()  # the label leads to the editor
    expect(editor).to_be_focused()
    page.keyboard.press("Control+A")
    page.keyboard.press("Delete")
    page.keyboard.type("def all_reduce(tensor):")
    page.keyboard.press("Enter")  # the Python mode indents the body by itself...
    page.keyboard.press("Shift+Tab")  # ...Shift+Tab takes that back, Tab indents 4 spaces again
    page.keyboard.press("Tab")
    page.keyboard.type('print("typed in CodeMirror")')
    typed = 'def all_reduce(tensor):\n    print("typed in CodeMirror")'
    expect(page.locator("#lab-code")).to_have_value(typed)  # the form's field follows the editor
    expect(page.locator(".CodeMirror .cm-keyword", has_text="def")).to_be_visible()
    expect(page.locator(".CodeMirror .cm-def", has_text="all_reduce")).to_be_visible()
    expect(page.locator(".CodeMirror .cm-string", has_text='"typed in CodeMirror"')).to_be_visible()

    page.keyboard.press("Escape")
    page.keyboard.press("Tab")  # Esc then Tab leaves the editor: the keyboard is not trapped
    expect(page.get_by_label("Or upload a .py file")).to_be_focused()
    expect(page.locator("#lab-code")).to_have_value(typed)

    page.get_by_role("button", name="Submit").click()
    result = page.locator("#lab-result")
    expect(result).to_have_attribute("data-status", DONE, timeout=60_000)
    expect(result.locator(".lab-output")).to_contain_text("typed in CodeMirror")  # the ranks ran it
    number = re.sub(r"\D", "", result.get_by_role("heading", level=2).inner_text())
    page.goto(f"/labs/submissions/{number}")  # the full page shows the stored code in the editor
    expect(page.locator("#lab-code")).to_have_value(typed)
    expect(page.locator(".CodeMirror-code")).to_contain_text("typed in CodeMirror")


def test_an_uploaded_py_file_is_loaded_into_the_editor(page: Page, student: StorageState) -> None:
    page.context.add_cookies(student["cookies"])
    page.goto("/labs/collectives-p2p")
    code = "import torch\n\n\ndef all_reduce(tensor):\n    return None  # uploaded\n"
    upload = page.get_by_label("Or upload a .py file")
    upload.set_input_files(files=[{"name": "mine.py", "mimeType": "text/x-python", "buffer": code.encode()}])
    expect(page.locator(".CodeMirror .cm-comment", has_text="# uploaded")).to_be_visible()
    expect(page.locator("#lab-code")).to_have_value(code)
    expect(upload).to_have_value("")  # sent once, as the editor's text


def test_without_javascript_the_plain_textarea_submits(browser: Browser, server: str, student: StorageState) -> None:
    context = browser.new_context(base_url=server, java_script_enabled=False, storage_state=student)
    page = context.new_page()
    try:
        page.goto("/labs/collectives-p2p")
        expect(page.locator(".CodeMirror")).to_have_count(0)
        expect(page.get_by_text("press Esc, then Tab")).to_be_hidden()
        code = "import torch\n\n# from a plain textarea\n"
        page.get_by_label("Your code").fill(code)
        page.get_by_role("button", name="Submit").click()
        page.wait_for_url("**/labs/submissions/*")
        expect(page.get_by_label("Your code")).to_have_value(code)
        # No script polls here: reload until graded, so no work is left queued for the next test.
        deadline = time.monotonic() + 60
        while not DONE.fullmatch(page.locator("#lab-result").get_attribute("data-status") or ""):
            assert time.monotonic() < deadline, "the submission was not graded within 60 s"
            time.sleep(0.5)
            page.reload()
    finally:
        context.close()


def test_the_editor_is_rebuilt_when_htmx_swaps_the_page_content(page: Page, student: StorageState) -> None:
    page.context.add_cookies(student["cookies"])
    page.goto("/labs/collectives-p2p")
    expect(page.locator(".CodeMirror")).to_have_count(1)
    page.evaluate("window.__old = document.getElementById('lab-code')")
    page.evaluate("htmx.ajax('GET', location.pathname, {target: '#main', select: '#main', swap: 'outerHTML'})")
    page.wait_for_function("document.getElementById('lab-code') !== window.__old")
    expect(page.locator("#lab-code + .CodeMirror")).to_have_count(1)  # the new textarea's own editor
    expect(page.locator(".CodeMirror")).to_have_count(1)
    expect(page.locator(".CodeMirror .cm-keyword").first).to_be_visible()
    page.locator(".CodeMirror-lines").click()
    page.keyboard.press("Control+End")
    page.keyboard.type("# after the swap")
    expect(page.locator("#lab-code")).to_have_value(re.compile("# after the swap$"))
