"""A live Ringlab (uvicorn, in this process, on its own database per backend) and a real LTI platform.

The platform (``tests.lti.platform``, built on the independent ``lti1p3platform``) and Ringlab talk over
real HTTP: the platform fetches Ringlab's key set to check its token requests and deep-linking answers,
Ringlab fetches the platform's to check launches and posts scores to its gradebook.

``Agent`` is a browser's cookie jar over httpx: Ringlab's launch cookies are ``Secure`` (an LMS frame needs
``SameSite=None``), which a browser sends to ``http://localhost`` and Python's cookie jar does not.
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from app.accounts.models import User
from app.accounts.service import register
from app.content.courses import DEFAULT_COURSE
from app.courses import service as courses
from app.courses.models import CourseRole
from app.db import session_scope
from tests.conftest import BACKENDS, migrated_db_url
from tests.lti.live import Tool, serve
from tests.lti.platform import Member, Platform

INSTRUCTOR = ("prof", "instructor-password-1")


@pytest.fixture(scope="module", params=BACKENDS)
def tool(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Tool]:
    url = migrated_db_url(request.param, request, f"lti_{uuid.uuid4().hex[:8]}")
    with serve(url, Path(tmp_path_factory.mktemp("lti"))) as live:
        with session_scope(live.factory) as session:
            prof = register(*INSTRUCTOR, session=session)
            courses.enroll(prof.id, DEFAULT_COURSE, CourseRole.instructor, session=session)
        yield live


@pytest.fixture(scope="module")
def platform(tool: Tool) -> Iterator[Platform]:
    lms = Platform(tool.base).start()
    tool.register(lms)
    try:
        yield lms
    finally:
        lms.stop()


class Agent:
    """One browser: cookies kept as a browser keeps them (Secure ones included on localhost)."""

    def __init__(self, base: str):
        self.base = base
        self.http = httpx.Client(timeout=30)
        self.jar: dict[str, str] = {}

    def close(self) -> None:
        self.http.close()

    def _url(self, url: str) -> str:
        return url if url.startswith("http") else self.base + url

    def request(self, method: str, url: str, **kwargs: Any) -> httpx.Response:
        full = self._url(url)
        headers = dict(kwargs.pop("headers", {}))
        if urlsplit(full).netloc == urlsplit(self.base).netloc:
            if self.jar:
                headers["cookie"] = "; ".join(f"{k}={v}" for k, v in self.jar.items())
            if method != "GET" and "ringlab_csrf" in self.jar:
                headers.setdefault("x-csrf-token", self.jar["ringlab_csrf"])
        response = self.http.request(method, full, headers=headers, **kwargs)
        if urlsplit(full).netloc == urlsplit(self.base).netloc:
            for raw in response.headers.get_list("set-cookie"):
                name, _, rest = raw.partition("=")
                value = rest.split(";", 1)[0]
                if re.search(r"max-age=0\b", raw, re.I) or not value.strip('"'):
                    self.jar.pop(name, None)
                else:
                    self.jar[name] = value
        return response

    def get(self, url: str, **kwargs: Any) -> httpx.Response:
        return self.request("GET", url, **kwargs)

    def post(self, url: str, **kwargs: Any) -> httpx.Response:
        return self.request("POST", url, **kwargs)

    def follow(self, response: httpx.Response, limit: int = 10) -> httpx.Response:
        """Follow redirects within Ringlab (GET), as a browser would."""
        while response.status_code in (302, 303) and limit:
            location = response.headers["location"]
            if not location.startswith(("/", self.base)):
                return response
            response = self.get(location)
            limit -= 1
        return response


@pytest.fixture
def agent(tool: Tool) -> Iterator[Agent]:
    a = Agent(tool.base)
    yield a
    a.close()


def launch(agent: Agent, platform: Platform, member: Member, *, follow: bool = True, **kwargs: Any) -> httpx.Response:
    """The LMS opens Ringlab for ``member``: login initiation, the platform's authorization, the form post."""
    params = platform.login_params(member, **kwargs)
    to_platform = agent.get("/lti/login", params=params)
    assert to_platform.status_code == 302, to_platform.text
    action, fields = platform.authorize(to_platform.headers["location"])
    assert action == agent.base + "/lti/launch"
    landed = agent.post("/lti/launch", data=fields)
    return agent.follow(landed) if follow else landed


def form_action(page: httpx.Response, prefix: str = "/lti/") -> str:
    """The address of the page's first form posting to ``prefix`` (the header has a sign-out form too)."""
    found = re.search(rf'<form method="post" action="({re.escape(prefix)}[^"]*)"', page.text)
    assert found, page.text
    return found.group(1).replace("&amp;", "&")


def users(tool: Tool) -> int:
    return tool.count(User)


def eventually(check: Any, timeout: float = 20.0, every: float = 0.1) -> Any:
    """Wait for ``check()`` to return something truthy (a background sender is at work); fail after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"still {value!r} after {timeout} s")
        time.sleep(every)


LATER = timedelta(hours=2)  # past every back-off: a drain "now + LATER" retries whatever failed
