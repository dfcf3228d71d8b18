"""A lean asynchronous HTTP client for a bench's simulated browsers (aiohttp).

A load generator standing for hundreds of browsers shares the machine with the server it measures, so
its own CPU is taken from that server. Measured on the 2-core machine (3,000 GETs of a JSON answer, 50
at once, against a bare Starlette route, 2026-11-27): httpx's ``AsyncClient`` 3.2-3.6 ms of CPU per
request, aiohttp 0.14-0.16 ms. The answer is read whole and handed back as a ``Reply``, which has what
the benches use of httpx's response (``status_code``, ``text``, ``json()``).
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any

import aiohttp

ERRORS = (aiohttp.ClientError, asyncio.TimeoutError)  # what a request may raise instead of answering


@dataclass
class Reply:
    status_code: int
    text: str

    def json(self) -> Any:
        return json.loads(self.text)


class Client:
    """``async with Client(base, connections=N) as client``: ``await client.get(url, headers=...)`` etc."""

    def __init__(self, base_url: str, *, connections: int = 100, timeout: float = 120.0) -> None:
        self.base_url = base_url
        self.connections = connections
        self.timeout = timeout
        self.session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> Client:
        self.session = aiohttp.ClientSession(
            base_url=self.base_url,
            connector=aiohttp.TCPConnector(limit=self.connections),
            timeout=aiohttp.ClientTimeout(total=self.timeout),
        )
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self.session is not None:
            await self.session.close()

    async def request(self, method: str, url: str, **kw: Any) -> Reply:
        assert self.session is not None, "use the client in an 'async with' block"
        async with self.session.request(method, url, **kw) as response:
            return Reply(response.status, await response.text())

    async def get(self, url: str, **kw: Any) -> Reply:
        return await self.request("GET", url, **kw)

    async def post(self, url: str, **kw: Any) -> Reply:
        return await self.request("POST", url, **kw)

    async def put(self, url: str, **kw: Any) -> Reply:
        return await self.request("PUT", url, **kw)
