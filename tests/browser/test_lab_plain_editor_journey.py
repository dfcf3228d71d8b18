"""A screen reader user works on a lab: the plain text editor is one key away from the code editor, its
text is the field's accessible value, and the verdict is read out once by the page's live region, which
polling never replaces.

CodeMirror 5 keeps its text out of the field that has the focus (a screen reader hears an empty box), so
the lab page offers the form's own textarea instead, behind a toggle button remembered by the browser.
"""

from __future__ import annotations

import re

from playwright.sync_api import Page, expect

from tests.browser.conftest import sign_up
from tests.conftest import CONTENT_DIR

LAB = "collectives-p2p"
TOGGLE = "Use a plain text editor (works with screen readers)"


def test_a_screen_reader_user_reads_edits_and_submits_lab_code_in_the_plain_editor(page: Page) -> None:
    sign_up(page, "sr")
    page.goto(f"/labs/{LAB}")
    starter = page.request.get(f"/labs/{LAB}/starter.py").text()
    expect(page.get_by_text("both ways are submitted and graded the same")).to_be_visible()
    expect(page.get_by_role("link", name="download the starter code")).to_have_attribute(
        "href", f"/labs/{LAB}/starter.py"
    )
    # Heard in the code editor: CodeMirror's focused field is empty, whatever the editor shows.
    code = page.get_by_role("textbox", name="Your code")
    page.get_by_text("Your code", exact=True).click()
    expect(code).to_be_focused()
    expect(code).to_have_value("")

    # The toggle sits between the editor and the link before it: one Tab either way (in the editor, Esc
    # first, as its hint says: there Tab and Shift+Tab indent).
    page.keyboard.press("Escape")
    page.keyboard.press("Shift+Tab")
    toggle = page.get_by_role("button", name=TOGGLE)
    expect(toggle).to_be_focused()
    page.keyboard.press("Shift+Tab")
    expect(page.get_by_role("link", name="download the starter code")).to_be_focused()
    page.keyboard.press("Tab")
    expect(toggle).to_be_focused()
    expect(toggle).to_have_attribute("aria-pressed", "false")
    page.keyboard.press("Space")
    expect(toggle).to_have_attribute("aria-pressed", "true")
    expect(page.locator(".CodeMirror")).to_be_hidden()
    page.keyboard.press("Tab")
    expect(code).to_be_focused()
    assert code.evaluate("e => e.tagName") == "TEXTAREA"  # the form's own field, not CodeMirror's
    assert code.input_value() == starter
    snapshot = code.aria_snapshot()
    assert snapshot.startswith('- textbox "Your code"') and "def all_reduce(tensor: torch.Tensor)" in snapshot
    expect(code).to_have_accessible_description(re.compile("^Tab moves to the next control.*indent with spaces"))

    # Edit it with the keyboard; Tab leaves the field (no trap, no indenting).
    solution = (CONTENT_DIR / "labs" / LAB / "solution.py").read_text()
    page.keyboard.press("Control+A")
    page.keyboard.insert_text(solution)
    assert code.input_value() == solution
    page.keyboard.press("Tab")
    expect(page.get_by_label("Or upload a .py file")).to_be_focused()

    # Every text the live region takes is recorded: the verdict must be said once, not once per poll.
    page.evaluate(
        """() => {
          window.__said = [];
          const region = document.getElementById("announcer");
          new MutationObserver(() => { if (region.textContent) window.__said.push(region.textContent); })
            .observe(region, {childList: true, characterData: true, subtree: true});
        }"""
    )
    page.get_by_role("button", name="Submit").focus()
    page.keyboard.press("Enter")
    result = page.locator("#lab-result")
    expect(result).to_have_attribute("data-status", "graded", timeout=120_000)
    expect(result.get_by_text("10/10 Passed")).to_be_visible()
    announcer = page.get_by_role("status").and_(page.locator("#announcer"))
    expect(announcer).to_have_text("10/10 Passed")
    page.wait_for_timeout(1000)  # a later poll or settle would say it again
    # The verdict is said once, not once per poll; before it, only a queue line if the job had to wait
    # (no worker up yet, or all busy), each line once: the running fragments say nothing.
    said = page.evaluate("window.__said")
    assert said[-1] == "10/10 Passed" and said.count("10/10 Passed") == 1
    assert all(t.startswith("Queued: position ") for t in said[:-1]) and len(set(said)) == len(said)
    expect(result).not_to_have_attribute("aria-live", "polite")  # replaced by each poll: not the live region

    # The choice is remembered; switching back gives the code editor the text typed in plain mode.
    page.reload()
    expect(toggle).to_have_attribute("aria-pressed", "true")
    expect(page.locator(".CodeMirror")).to_be_hidden()
    assert code.input_value() == solution  # the page now holds the last submission
    expect(announcer).to_have_text("")  # a verdict already on the page is not news
    code.press("Control+End")
    code.press_sequentially("# plain")
    toggle.click()
    expect(toggle).to_have_attribute("aria-pressed", "false")
    expect(page.locator(".CodeMirror")).to_be_visible()
    expect(page.locator("#lab-code")).to_be_hidden()
    # CodeMirror draws only the lines in view: ask the editor for its text.
    assert page.evaluate("document.querySelector('.CodeMirror').CodeMirror.getValue()") == solution + "# plain"
    page.reload()
    expect(toggle).to_have_attribute("aria-pressed", "false")
    expect(page.locator(".CodeMirror")).to_be_visible()
