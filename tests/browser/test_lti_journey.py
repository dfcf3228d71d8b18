"""A real browser launches Ringlab from a page of the LMS, inside the LMS's iframe (another site: the LMS on
127.0.0.1, Ringlab on localhost), makes the student's account there and lands in the course, signed in."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, expect
from sqlalchemy import select

from app.db import session_scope
from app.lti.models import ContextLink, Identity
from app.lti.models import Platform as LtiPlatform
from tests.lti.conftest import Tool, platform, tool  # noqa: F401 (the live Ringlab and LMS of tests/lti)
from tests.lti.platform import LEARNER, Member, Platform

pytestmark = pytest.mark.browser

GRACE = Member("lms-grace-b", "Grace Brewster", "Grace", "Brewster", "gb@example.edu", [LEARNER])


@pytest.fixture
def connected(tool: Tool, platform: Platform) -> Iterator[None]:  # noqa: F811 (the imported fixtures)
    with session_scope(tool.factory) as session:
        lms = session.scalars(select(LtiPlatform)).one()
        if session.scalars(select(ContextLink)).first() is None:
            session.add(
                ContextLink(platform_id=lms.id, context_id=platform.context_id, title="DT", course_id="default")
            )
    yield


@pytest.mark.parametrize("tool", ["sqlite"], indirect=True)  # the browser's part; both databases: test_round_trip
def test_a_student_launches_ringlab_inside_the_lms_page(
    browser: Browser,
    tool: Tool,  # noqa: F811
    platform: Platform,  # noqa: F811
    connected: None,
) -> None:
    context = browser.new_context()
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    try:
        page.goto(platform.page_url(GRACE, "link-1"))
        expect(page.locator("h1").first).to_be_visible()
        frame = page.frame_locator('iframe[title="Ringlab"]')
        # A first launch: Ringlab asks which account this LMS person is, inside the frame.
        make = frame.get_by_role("button", name="Make my Ringlab account")
        expect(make).to_be_visible(timeout=15000)
        make.click()
        # Signed in, in the course, still inside the LMS's page. The welcome page has a heading too: wait for
        # the frame to leave it before looking at the heading of the page it went to.
        inner = next(f for f in page.frames if f.url.startswith(tool.base))
        inner.wait_for_url(lambda url: "/lti/" not in url, timeout=15000)
        expect(frame.get_by_role("heading", level=1).first).to_be_visible(timeout=15000)
        assert page.url.startswith(platform.issuer)  # the LMS page stayed where it was
        cookies = {c["name"]: c for c in context.cookies(tool.base)}
        assert cookies["ringlab_session"]["sameSite"] == "None" and cookies["ringlab_session"]["secure"]
        with session_scope(tool.factory) as session:
            assert session.scalars(select(Identity).where(Identity.sub == GRACE.sub)).first() is not None
        assert not errors, errors
    finally:
        context.close()
