"""Launches Ringlab must refuse, each with a clear page, writing no account and no score; and pages a
student's LMS role does not open."""

from __future__ import annotations

import html
import re

import pytest
from sqlalchemy import select

from app.db import session_scope
from app.lti.models import ContextLink, Identity, Outbox
from app.lti.models import Platform as LtiPlatform
from tests.lti.conftest import Agent, Tool, form_action, launch, users
from tests.lti.platform import LEARNER, Member, Platform

pytestmark = pytest.mark.postgres

MALLORY = Member("lms-mallory", "Mallory Mal", "Mallory", "Mal", "mal@example.edu", [LEARNER])


@pytest.fixture(scope="module", autouse=True)
def connected(tool: Tool, platform: Platform) -> None:
    """The LMS course is connected to the default course (as `ringlab lti link-context` does)."""
    with session_scope(tool.factory) as session:
        lms = session.scalars(select(LtiPlatform)).one()
        session.add(ContextLink(platform_id=lms.id, context_id=platform.context_id, title="DT", course_id="default"))


CASES = {
    "forged_signature": "signature",
    "unknown_kid": "public key",
    "expired": "expired",
    "wrong_audience": "not meant for Ringlab",
    "unknown_deployment": "deployment",
}


@pytest.mark.parametrize("tamper", sorted(CASES))
def test_a_tampered_launch_is_refused_and_writes_nothing(
    tamper: str, tool: Tool, platform: Platform, agent: Agent
) -> None:
    accounts, identities, owed = users(tool), tool.count(Identity), tool.count(Outbox)
    refused = launch(agent, platform, MALLORY, tamper=tamper)
    assert refused.status_code == 400, refused.text
    assert "could not open from your LMS" in refused.text
    assert CASES[tamper].lower() in refused.text.lower(), refused.text
    assert "ringlab_session" not in agent.jar
    assert (users(tool), tool.count(Identity), tool.count(Outbox)) == (accounts, identities, owed)


def test_a_replayed_launch_is_refused(tool: Tool, platform: Platform, agent: Agent) -> None:
    params = platform.login_params(MALLORY)
    _action, fields = platform.authorize(agent.get("/lti/login", params=params).headers["location"])
    first = agent.post("/lti/launch", data=fields)
    assert first.status_code == 303  # to the first launch's choices
    accounts = users(tool)
    again = agent.post("/lti/launch", data=fields)
    assert again.status_code == 400 and "nonce" in again.text.lower()
    # From another browser that stole the form too: no state cookie there, and the nonce is spent anyway.
    thief = Agent(tool.base)
    try:
        stolen = thief.post("/lti/launch", data=fields)
        assert stolen.status_code in (400, 401) and "ringlab_session" not in thief.jar
    finally:
        thief.close()
    assert users(tool) == accounts


def test_a_key_the_platform_rotated_is_fetched_once_more(tool: Tool, platform: Platform, agent: Agent) -> None:
    launch(agent, platform, MALLORY)  # the platform's key set is cached now
    platform.rotate_key()
    again = launch(Agent(tool.base), platform, MALLORY)
    assert again.status_code == 200 and "could not open" not in again.text


def test_an_unregistered_lms_is_refused_at_login(agent: Agent) -> None:
    refused = agent.get("/lti/login", params={"iss": "https://lms.example", "login_hint": "x", "client_id": "c"})
    assert refused.status_code == 400 and "ringlab lti add-platform" in refused.text


def test_a_student_role_opens_no_staff_page(tool: Tool, platform: Platform) -> None:
    own = Agent(tool.base)
    try:
        page = launch(own, platform, MALLORY)
        if "first time here" in page.text:
            page = own.follow(own.post(form_action(page), data={"choice": "new"}))
        assert page.status_code == 200 and "ringlab_session" in own.jar
        # A student cannot ask for deep linking (choosing what the LMS course links to) ...
        picker = launch(own, platform, MALLORY, message_type="LtiDeepLinkingRequest", resource_link_id=None)
        assert picker.status_code == 403 and "Only the course&#39;s staff" in picker.text
        # ... nor, signed in through the LMS, open the course's staff pages.
        for path in ("/instructor/lti", "/instructor/gradebook", "/instructor"):
            assert own.get(path + "?course=default").status_code == 403, path
    finally:
        own.close()


def test_a_browser_that_refuses_cookies_in_the_frame_is_offered_a_new_window(tool: Tool, platform: Platform) -> None:
    framed, own_tab = Agent(tool.base), Agent(tool.base)
    try:
        params = platform.login_params(MALLORY)
        _action, fields = platform.authorize(framed.get("/lti/login", params=params).headers["location"])
        framed.jar.clear()  # the frame's browser dropped the state cookie it was given
        refused = framed.post("/lti/launch", data=fields)
        assert refused.status_code == 401 and "Open in a new window" in refused.text
        again = re.search(r'href="(/lti/login\?[^"]+)" target="_blank"', refused.text)
        assert again, refused.text
        # The link starts the launch over in a tab of its own, where the cookie is first-party.
        restart = own_tab.get(html.unescape(again.group(1)))
        assert restart.status_code == 302 and restart.headers["location"].startswith(platform.auth_login_url)
        assert "lti1p3_new_window=1" in again.group(1)
    finally:
        framed.close()
        own_tab.close()
