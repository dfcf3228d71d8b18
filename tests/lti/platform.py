"""An LTI 1.3 platform (an LMS stand-in) that the tests launch Ringlab from, built on ``lti1p3platform``.

The package does the protocol where it has an API: the registration and the platform's signing
(``Registration``), the claims of a launch (``LTIAdvantageMessageLaunchAbstract``: user, context, resource
link, launch presentation, custom, AGS, NRPS and deep-linking settings), the access-token grant
(``get_access_token``), bearer-token checks (``validate_token``) and deep-linking answers
(``validate_deeplinking_resp``), each against the tool's key set fetched from ``{tool_url}/lti/jwks.json``.
This module adds what the package leaves to its user or gets wrong (each place says so): the HTTP endpoints,
the OIDC checks, the line items, scores and roster, and ``tamper``, which spoils one launch's id_token.

It is served over real HTTP by uvicorn in a thread on 127.0.0.1, on a port kept across ``stop()``/``start()``.
"""

from __future__ import annotations

import html
import re
import secrets
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from functools import cached_property
from typing import Any, TypeVar
from urllib.parse import urlencode

import httpx
import jwt
import uvicorn
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response
from lti1p3platform.deep_linking import LtiDeepLinking
from lti1p3platform.exceptions import (
    InvalidKeySetUrl,
    LtiDeepLinkingResponseException,
    LtiException,
    MissingRequiredClaim,
    PreflightRequestValidationException,
    UnsupportedGrantType,
)
from lti1p3platform.ltiplatform import LTI1P3PlatformConfAbstract
from lti1p3platform.membership import Context, ContextMembership, Status
from lti1p3platform.message_launch import LTIAdvantageMessageLaunchAbstract
from lti1p3platform.registration import Registration
from lti1p3platform.request import Request as LtiRequest
from lti1p3platform.request import TRequest
from lti1p3platform.score import ActivityProgress, GradeProgress
from lti1p3platform.utils import dataclass_to_dict
from starlette.concurrency import run_in_threadpool

MEMBERSHIP = "http://purl.imsglobal.org/vocab/lis/v2/membership#"
INSTRUCTOR = MEMBERSHIP + "Instructor"
LEARNER = MEMBERSHIP + "Learner"
TEACHING_ASSISTANT = "http://purl.imsglobal.org/vocab/lis/v2/membership/Instructor#TeachingAssistant"
CONTENT_DEVELOPER = MEMBERSHIP + "ContentDeveloper"
COURSE_OFFERING = "http://purl.imsglobal.org/vocab/lis/v2/course#CourseOffering"

LTI = "https://purl.imsglobal.org/spec/lti/claim/"
DL = "https://purl.imsglobal.org/spec/lti-dl/claim/"
AGS = "https://purl.imsglobal.org/spec/lti-ags/scope/"
LINEITEM = AGS + "lineitem"
LINEITEM_READONLY = AGS + "lineitem.readonly"
RESULT_READONLY = AGS + "result.readonly"
SCORE = AGS + "score"
MEMBERSHIPS = "https://purl.imsglobal.org/spec/lti-nrps/scope/contextmembership.readonly"
JWT_BEARER = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
TAMPERS = ("forged_signature", "unknown_kid", "expired", "wrong_audience", "unknown_deployment")
MEDIA = {
    "lineitem": "application/vnd.ims.lis.v2.lineitem+json",
    "lineitems": "application/vnd.ims.lis.v2.lineitemcontainer+json",
    "score": "application/vnd.ims.lis.v1.score+json",
    "results": "application/vnd.ims.lis.v2.resultcontainer+json",
    "members": "application/vnd.ims.lti-nrps.v2.membershipcontainer+json",
}
# The package's errors for a JWT it refuses (a missing "type" in a content item surfaces as KeyError).
REFUSALS = (LtiException, LtiDeepLinkingResponseException, InvalidKeySetUrl, jwt.PyJWTError, KeyError, TypeError)

T = TypeVar("T")


@dataclass
class Member:
    """A person in the LMS course."""

    sub: str
    name: str
    given_name: str
    family_name: str
    email: str
    roles: list[str]


def default_members() -> list[Member]:
    """The course's roster when none is given: an instructor, three learners and a teaching assistant."""
    return [
        Member("lms-prof", "Grace Hopper", "Grace", "Hopper", "grace@example.edu", [INSTRUCTOR]),
        Member("lms-ada", "Ada Lovelace", "Ada", "Lovelace", "ada@example.edu", [LEARNER]),
        Member("lms-alan", "Alan Turing", "Alan", "Turing", "alan@example.edu", [LEARNER]),
        Member("lms-edsger", "Edsger Dijkstra", "Edsger", "Dijkstra", "ed@example.edu", [LEARNER]),
        Member("lms-ta", "Barbara Liskov", "Barbara", "Liskov", "bl@example.edu", [TEACHING_ASSISTANT]),
    ]


# -- keys ------------------------------------------------------------------------------------------------


@dataclass
class KeyPair:
    """An RSA key pair in PEM, and its key id (the package's: the RFC 7638 thumbprint)."""

    private: str
    public: str

    @classmethod
    def generate(cls) -> KeyPair:
        """A fresh 2048-bit RSA pair (the package has no key generation of its own)."""
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        private = key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
        public = key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
        return cls(private.decode(), public.decode())

    @property
    def jwk(self) -> dict[str, Any]:
        return Registration.get_jwk(self.public)

    @cached_property
    def kid(self) -> str:
        return str(self.jwk["kid"])


# -- the package's pieces, configured -------------------------------------------------------------------


class _Registration(Registration):
    """The package's registration; ``tamper`` spoils what ``platform_encode_and_sign`` signs (one launch)."""

    def __init__(self, key: KeyPair, tamper: str | None = None, stranger: KeyPair | None = None) -> None:
        super().__init__()
        self.key, self.tamper, self.stranger = key, tamper, stranger
        self.set_platform_private_key(key.private).set_platform_public_key(key.public)

    def get_kid(self) -> str:
        # The package derives the kid from the private key at every signature (a ~50 ms key load); the same
        # thumbprint comes from the public key, once.
        return self.key.kid

    def platform_encode_and_sign(self, payload: dict[str, Any], expiration: int | None = None) -> str:
        if self.tamper is None:
            return super().platform_encode_and_sign(payload, expiration)
        now = int(time.time())
        claims = {**payload, "iat": now, "exp": now + (expiration or 300)}
        if self.tamper == "expired":
            claims["iat"], claims["exp"] = now - 7200, now - 3600
        elif self.tamper == "wrong_audience":
            claims["aud"] = claims["azp"] = "some-other-tool"
        elif self.tamper == "unknown_deployment":
            claims[LTI + "deployment_id"] = "deployment-nobody-registered"
        if self.tamper in ("forged_signature", "unknown_kid"):
            assert self.stranger is not None
            kid = self.get_kid() if self.tamper == "forged_signature" else self.stranger.kid  # never published
            return self.encode_and_sign(claims, self.stranger.private, {"kid": kid})
        return super().platform_encode_and_sign(claims)  # no expiration: keep the claims' own iat/exp


class _Conf(LTI1P3PlatformConfAbstract):
    """The package's platform configuration: one registration, the tool under test."""

    def init_platform_config(self, **kwargs: Any) -> None:
        self._given: Registration = kwargs["registration"]

    def get_registration_by_params(self, **kwargs: Any) -> Registration:
        return self._given


def _conf(registration: Registration) -> _Conf:
    conf = _Conf(registration=registration)
    conf.get_registration()
    return conf


class _Query(LtiRequest):
    """The package's request, built from the authorization request's query."""

    def build_metadata(self, request: Any) -> TRequest:
        return {"method": "GET", "get_data": dict(request), "form_data": {}, "headers": {}, "path": "/auth"}


@dataclass
class _Pending:
    """A launch the LMS has begun (login initiation sent) and not yet authorized."""

    member: Member
    message_type: str
    resource_link_id: str | None
    target_link_uri: str
    tamper: str | None
    roles: list[str]
    context_id: str
    used: bool = False


class _Launch(LTIAdvantageMessageLaunchAbstract):
    """The package's launch message for one pending launch; it answers the auto-submitting form."""

    def __init__(self, request: _Query, conf: _Conf, platform: Platform, pending: _Pending) -> None:
        super().__init__(request, conf)
        self.platform, self.pending = platform, pending

    def prepare_launch(self, preflight_response: dict[str, Any]) -> None:
        p, m, lms = self.pending, self.pending.member, self.platform
        context_url = lms.context_url(p.context_id)
        link = lms.resource_links.get(p.resource_link_id or "", {})
        self.set_launch_url(p.target_link_uri)
        self.set_user_data(m.sub, p.roles, full_name=m.name, email_address=m.email)
        self.set_extra_claims({"given_name": m.given_name, "family_name": m.family_name})
        self.set_launch_context_claim(p.context_id, [COURSE_OFFERING], lms.title_of(p.context_id), p.context_id.upper())
        self.set_launch_presentation_claim("iframe", lms.issuer + "/return")
        self.set_ags(context_url + "/lineitems", lms.lineitem_of(p.context_id, p.resource_link_id))
        self.set_nrps(context_url + "/memberships")
        if p.message_type == "LtiDeepLinkingRequest":
            self._deep_linking(lms.deep_linking_data(p.context_id))
            return
        self.set_extra_claims({LTI + "message_type": p.message_type})
        if p.resource_link_id:
            self.set_resource_link_claim(p.resource_link_id, title=link.get("title") or "Ringlab")
            if link.get("custom"):
                self.set_custom_parameters_claim(link["custom"])

    def _deep_linking(self, data: str) -> None:
        """The package's deep-linking settings, corrected: it offers "embed" (no target for an
        ltiResourceLink) and types ``data`` as a dict where the spec has an opaque string."""
        dl = LtiDeepLinking(self.platform.issuer + "/deep_link_return")
        claim = dl.get_lti_deep_linking_launch_claim(title="Add Ringlab activities", accept_types={"ltiResourceLink"})
        claim[DL + "deep_linking_settings"].update(accept_presentation_document_targets=["iframe", "window"], data=data)
        self._dl, self._deep_linking_launch_data = dl, claim

    def render_launch_form(self, launch_data: dict[str, Any], **kwargs: Any) -> Response:
        # Not the package's template: it lacks a no-JS button, escapes nothing, and its module imports
        # pkg_resources (gone from recent setuptools).
        fields = {"id_token": launch_data["id_token"], "state": launch_data["state"]}
        return HTMLResponse(auto_post(launch_data["launch_url"], fields, "Opening Ringlab"))


# -- serving ---------------------------------------------------------------------------------------------


def _bound_socket(port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    return sock


class ThreadedServer:
    """An ASGI app served by uvicorn in a daemon thread on 127.0.0.1, on one port across restarts."""

    def __init__(self, app: Any, port: int = 0) -> None:
        self.app = app
        self._socket: socket.socket | None = _bound_socket(port)  # holds the port until the first start
        self.port: int = self._socket.getsockname()[1]
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        if self._server is not None:
            return
        sock, self._socket = self._socket or _bound_socket(self.port), None
        config = uvicorn.Config(self.app, log_level="warning", lifespan="off", access_log=False)
        server = uvicorn.Server(config)
        thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
        thread.start()
        deadline = time.monotonic() + 20
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"nothing is serving on {self.url}")
            time.sleep(0.01)
        self._server, self._thread = server, thread

    def stop(self) -> None:
        """Stop serving and free the port (uvicorn closes the socket it was given)."""
        if self._server is not None and self._thread is not None:
            self._server.should_exit = True
            self._thread.join(timeout=10)
        self._server = self._thread = None
        if self._socket is not None:
            self._socket.close()
            self._socket = None


# -- the platform -------------------------------------------------------------------------------------------


class Platform:
    """An LMS with one course: launches Ringlab, grants its tokens, keeps a gradebook and a roster."""

    member_page_size = 2  # the roster's page size when the tool asks for no ``limit``: paging is exercised

    def __init__(
        self,
        tool_url: str,
        *,
        client_id: str = "ringlab-client",
        deployment_id: str = "deployment-1",
        context_id: str = "course-101",
        context_title: str = "Distributed Training 101",
        members: list[Member] | None = None,
        tool_jwks_url: str | None = None,
    ) -> None:
        self.tool_url = tool_url.rstrip("/")
        self.client_id, self.deployment_id = client_id, deployment_id
        self.context_id, self.context_title = context_id, context_title
        self.members = members if members is not None else default_members()
        self.tool_jwks_url = tool_jwks_url or self.tool_url + "/lti/jwks.json"
        self.lineitems: dict[str, dict[str, Any]] = {}
        self.scores: dict[str, list[dict[str, Any]]] = {}
        self.deep_link_items: list[dict[str, Any]] = []
        self.resource_links: dict[str, dict[str, Any]] = {}
        self.token_requests: list[str] = []
        self.jwks_fetches = 0  # of this platform's key set, by the tool
        self.tool_jwks_fetches = 0  # of the tool's key set, by this platform
        self._keys = [KeyPair.generate()]  # newest first: it signs
        self._stranger: KeyPair | None = None
        self._tool_jwks: Any = None
        self._pending: dict[str, _Pending] = {}
        self._people = {m.sub: m for m in self.members}
        self._contexts = {context_id}
        self._dl_data: dict[str, str] = {}  # deep-linking data sent -> its context
        self._seen: set[str] = set()  # deep-linking nonces and client-assertion jtis, each usable once
        self._lock = threading.Lock()
        self._http = httpx.Client(timeout=30)
        self._server = ThreadedServer(self._app())
        self.issuer = self._server.url
        self.auth_login_url = self.issuer + "/auth"
        self.token_url = self.issuer + "/token"
        self.jwks_url = self.issuer + "/jwks"

    def __enter__(self) -> Platform:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> Platform:
        self._server.start()
        return self

    def stop(self) -> None:
        self._server.stop()

    def rotate_key(self) -> None:
        """A new signing key; the key set serves it first and the old ones after it."""
        self._keys.insert(0, KeyPair.generate())

    # -- launches ---------------------------------------------------------------------------------------

    def login_params(
        self,
        member: Member,
        *,
        message_type: str = "LtiResourceLinkRequest",
        resource_link_id: str | None = "link-1",
        target_link_uri: str | None = None,
        tamper: str | None = None,
        roles: list[str] | None = None,
        context_id: str | None = None,
    ) -> dict[str, str]:
        """Begin a launch: what the LMS sends to the tool's login initiation URL."""
        if tamper is not None and tamper not in TAMPERS:
            raise ValueError(f"tamper must be one of {TAMPERS}, not {tamper!r}")
        link = self.resource_links.get(resource_link_id or "", {})
        target = target_link_uri or link.get("url") or self.tool_url + "/lti/launch"
        context = context_id or self.context_id
        hint = secrets.token_urlsafe(16)
        with self._lock:
            self._people.setdefault(member.sub, member)
            self._contexts.add(context)
            self._pending[hint] = _Pending(
                member, message_type, resource_link_id, target, tamper, list(roles or member.roles), context
            )
        return {
            "iss": self.issuer,
            "login_hint": member.sub,
            "target_link_uri": target,
            "lti_message_hint": hint,
            "client_id": self.client_id,
            "lti_deployment_id": self.deployment_id,
        }

    def authorize(self, auth_url: str) -> tuple[str, dict[str, str]]:
        """GET the authorization URL the tool redirected to: the form a browser would post to the tool."""
        answer = self._http.get(auth_url)
        if answer.status_code != 200:
            raise AssertionError(f"the platform refused the authorization ({answer.status_code}): {answer.text}")
        return read_form(answer.text)

    def page_url(self, member: Member, resource_link_id: str) -> str:
        """The course page that opens ``resource_link_id`` for ``member`` in an iframe."""
        with self._lock:
            self._people.setdefault(member.sub, member)
        query = urlencode({"user": member.sub, "link": resource_link_id})
        return f"{self.issuer}/course/{self.context_id}/page?{query}"

    # -- the gradebook ------------------------------------------------------------------------------------

    def latest_score(self, lineitem_id: str, sub: str) -> dict[str, Any] | None:
        """The last score posted for ``sub`` to a line item (its short id or its URL)."""
        posted = self.scores.get(lineitem_id.rstrip("/").rsplit("/", 1)[-1], [])
        mine = [s for s in posted if s.get("userId") == sub]
        return mine[-1] if mine else None

    def context_url(self, context_id: str) -> str:
        return f"{self.issuer}/contexts/{context_id}"

    def title_of(self, context_id: str) -> str:
        return self.context_title if context_id == self.context_id else context_id

    def lineitem_of(self, context_id: str, resource_link_id: str | None) -> str | None:
        """The URL of the resource link's line item (its first), if it has one."""
        prefix = self.context_url(context_id) + "/lineitems/"
        found = [
            li["id"]
            for li in self.lineitems.values()
            if resource_link_id and li.get("resourceLinkId") == resource_link_id and li["id"].startswith(prefix)
        ]
        return found[0] if found else None

    def deep_linking_data(self, context_id: str) -> str:
        """The opaque ``data`` of one deep-linking launch; the answer must echo it."""
        data = "dl-" + secrets.token_urlsafe(12)
        with self._lock:
            self._dl_data[data] = context_id
        return data

    def add_lineitem(self, context_id: str, body: dict[str, Any], lid: str | None = None) -> dict[str, Any]:
        """Store a line item (a new one, or ``lid`` replaced): the body as given, its ``id`` its URL."""
        lid = lid or "li-" + secrets.token_hex(4)
        item = {**{k: v for k, v in body.items() if k != "id"}, "id": f"{self.context_url(context_id)}/lineitems/{lid}"}
        self.lineitems[lid] = item
        self.scores.setdefault(lid, [])
        return item

    def _lineitems_in(self, context_id: str) -> dict[str, dict[str, Any]]:
        prefix = self.context_url(context_id) + "/lineitems/"
        return {lid: li for lid, li in self.lineitems.items() if li["id"].startswith(prefix)}

    # -- the package, configured for this platform ---------------------------------------------------------

    def _registration(self, key: KeyPair | None = None, pending: _Pending | None = None) -> _Registration:
        key = key or self._keys[0]
        tamper = pending.tamper if pending else None
        if tamper in ("forged_signature", "unknown_kid") and self._stranger is None:
            self._stranger = KeyPair.generate()
        reg = _Registration(key, tamper, self._stranger)
        reg.set_iss(self.issuer).set_client_id(self.client_id).set_deployment_id(self.deployment_id)
        reg.set_launch_url(self.tool_url + "/lti/launch").set_oidc_login_url(self.tool_url + "/lti/login")
        # Without a deep-linking launch URL the package silently sends a deep-linking launch as a plain one.
        reg.set_deeplink_launch_url(pending.target_link_uri if pending else self.tool_url + "/lti/launch")
        reg.set_tool_key_set_url(self.tool_jwks_url)
        if self._tool_jwks is not None:
            reg.set_tool_key_set(self._tool_jwks)
        return reg

    def _checked(self, check: Callable[[_Conf], T]) -> T:
        """Run a check of a JWT the tool signed; keep the tool's key set the package fetched for next time."""
        reg = self._registration()
        try:
            return check(_conf(reg))
        finally:
            fetched = reg.get_tool_key_set()
            if self._tool_jwks is None and fetched is not None:
                self.tool_jwks_fetches += 1
            self._tool_jwks = fetched

    def _with_tool_keys(self, check: Callable[[_Conf], T]) -> T:
        """``_checked``, fetching the tool's key set once more on an unknown key id (the tool may have rotated
        its key): the package caches the set on the registration and never refetches it."""
        try:
            return self._checked(check)
        except LtiException as exc:
            if "Unable to find public key" not in str(exc):
                raise
        self._tool_jwks = None
        return self._checked(check)

    def _token_allows(self, token: str, scopes: list[str]) -> bool | None:
        """Whether a bearer token grants one of ``scopes``; None when it is no valid token of ours.

        The package checks against the registration's one public key and raises on a bad signature; its
        tokens carry no kid, so each of our keys is tried (a token outlives a rotation)."""
        for key in self._keys:
            try:
                return _conf(self._registration(key)).validate_token(token, allowed_scopes=scopes)
            except jwt.InvalidSignatureError:
                continue
            except (jwt.PyJWTError, LtiException):
                return None
        return None

    # -- HTTP ---------------------------------------------------------------------------------------------

    def _app(self) -> FastAPI:
        app = FastAPI(title="Test LMS")
        app.add_api_route("/jwks", self._jwks, methods=["GET"])
        app.add_api_route("/auth", self._auth, methods=["GET"])
        app.add_api_route("/token", self._token, methods=["POST"])
        app.add_api_route("/contexts/{ctx}/lineitems", self._get_lineitems, methods=["GET"])
        app.add_api_route("/contexts/{ctx}/lineitems", self._post_lineitem, methods=["POST"])
        app.add_api_route("/contexts/{ctx}/lineitems/{lid}", self._get_lineitem, methods=["GET"])
        app.add_api_route("/contexts/{ctx}/lineitems/{lid}", self._put_lineitem, methods=["PUT"])
        app.add_api_route("/contexts/{ctx}/lineitems/{lid}/scores", self._post_score, methods=["POST"])
        app.add_api_route("/contexts/{ctx}/lineitems/{lid}/results", self._get_results, methods=["GET"])
        app.add_api_route("/contexts/{ctx}/memberships", self._get_members, methods=["GET"])
        app.add_api_route("/deep_link_return", self._deep_link_return, methods=["POST"])
        app.add_api_route("/course/{ctx}/page", self._course_page, methods=["GET"])
        app.add_api_route("/course/{ctx}/frame", self._course_frame, methods=["GET"])
        app.add_api_route("/return", self._return, methods=["GET"])
        return app

    def _jwks(self) -> JSONResponse:
        self.jwks_fetches += 1
        return JSONResponse({"keys": [key.jwk for key in self._keys]})

    # OIDC authorization ----------------------------------------------------------------------------------

    def _auth(self, request: Request) -> Response:
        query = dict(request.query_params)
        try:
            self._check_authorization(query)
            pending = self._take(query)
        except _Refusal as exc:
            return _refused(str(exc))
        launch = _Launch(_Query(query), _conf(self._registration(pending=pending)), self, pending)
        try:
            return launch.lti_launch()  # type: ignore[no-any-return]
        except PreflightRequestValidationException:
            return _refused("the authorization request lacks a nonce, a state or a redirect_uri")

    def _check_authorization(self, q: dict[str, str]) -> None:
        """Refuse a bad OIDC authorization request (the package checks only nonce, state and client_id)."""
        if q.get("client_id") != self.client_id:
            raise _Refusal(f"unknown client_id {q.get('client_id')!r}")
        if q.get("redirect_uri") != self.tool_url + "/lti/launch":
            raise _Refusal(f"redirect_uri {q.get('redirect_uri')!r} is not the tool's registered launch URL")
        if q.get("scope") != "openid" or q.get("response_type") != "id_token":
            raise _Refusal("not an OpenID Connect id_token request (scope=openid, response_type=id_token)")
        if q.get("response_mode") != "form_post":
            raise _Refusal("response_mode must be form_post")
        if not q.get("nonce") or not q.get("state"):
            raise _Refusal("the authorization request lacks a nonce or a state")

    def _take(self, q: dict[str, str]) -> _Pending:
        """The pending launch the lti_message_hint names, spent now (a hint authorizes one launch)."""
        with self._lock:
            pending = self._pending.get(q.get("lti_message_hint") or "")
            if pending is None:
                raise _Refusal("unknown lti_message_hint")
            if pending.used:
                raise _Refusal("lti_message_hint already used")
            if q.get("login_hint") != pending.member.sub:
                raise _Refusal("login_hint is not the user this launch was begun for")
            pending.used = True
        return pending

    # the access-token grant (RFC 7523 client assertion) --------------------------------------------------------

    async def _token(self, request: Request) -> Response:
        form = {k: v for k, v in (await request.form()).items() if isinstance(v, str)}
        return await run_in_threadpool(self._grant, form)

    def _grant(self, form: dict[str, str]) -> JSONResponse:
        if form.get("grant_type") != "client_credentials":
            return _oauth_error("unsupported_grant_type", "grant_type must be client_credentials", 400)
        if form.get("client_assertion_type") != JWT_BEARER or not form.get("client_assertion"):
            return _oauth_error("invalid_request", f"a client_assertion of type {JWT_BEARER} is required", 400)
        try:
            claims = self._with_tool_keys(lambda conf: conf.tool_validate_and_decode(form["client_assertion"]))
        except REFUSALS as exc:
            return _oauth_error("invalid_client", f"client assertion refused: {exc}", 401)
        refusal = self._assertion_refusal(claims)
        if refusal is not None:
            return _oauth_error("invalid_client", refusal, 401)
        try:
            granted = self._checked(lambda conf: conf.get_access_token(form))
        except (MissingRequiredClaim, UnsupportedGrantType, *REFUSALS) as exc:
            return _oauth_error("invalid_request", str(exc) or type(exc).__name__, 400)
        if not granted["scope"]:
            return _oauth_error("invalid_scope", f"none of the scopes {form.get('scope')!r} is offered", 400)
        self.token_requests.append(granted["scope"])
        return JSONResponse(dict(granted), headers={"Cache-Control": "no-store"})

    def _assertion_refusal(self, claims: dict[str, Any]) -> str | None:
        """What the package leaves unchecked in a client assertion: iss, sub, aud, exp, a replayed jti."""
        if claims.get("iss") != self.client_id or claims.get("sub") != self.client_id:
            return "the assertion's iss and sub must both be the client id"
        if self.token_url not in _as_list(claims.get("aud")):
            return f"the assertion's aud must be the token URL {self.token_url}"
        if "exp" not in claims:
            return "the assertion has no exp"
        with self._lock:
            jti = claims.get("jti")
            if jti is not None and ("jti:" + str(jti)) in self._seen:
                return "the assertion's jti was used before"
            if jti is not None:
                self._seen.add("jti:" + str(jti))
        return None

    # AGS ------------------------------------------------------------------------------------------------

    def _bearer(self, request: Request, ctx: str, scopes: list[str]) -> Response | None:
        """A refusal unless the request's bearer token grants one of ``scopes`` (and the context exists)."""
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return _oauth_error("invalid_token", "a bearer access token is required", 401)
        allowed = self._token_allows(token.strip(), scopes)
        if allowed is None:
            return _oauth_error("invalid_token", "the access token is not valid here", 401)
        if not allowed:
            return _oauth_error("insufficient_scope", f"the access token grants none of {scopes}", 403)
        if ctx not in self._contexts:
            return JSONResponse({"error": f"no context {ctx!r}"}, status_code=404)
        return None

    def _get_lineitems(self, ctx: str, request: Request) -> Response:
        if (refused := self._bearer(request, ctx, [LINEITEM, LINEITEM_READONLY])) is not None:
            return refused
        q = request.query_params
        wanted = {"resourceLinkId": q.get("resource_link_id"), "resourceId": q.get("resource_id"), "tag": q.get("tag")}
        found = [
            li for li in self._lineitems_in(ctx).values() if all(v is None or li.get(k) == v for k, v in wanted.items())
        ]
        return JSONResponse(found, media_type=MEDIA["lineitems"])

    async def _post_lineitem(self, ctx: str, request: Request) -> Response:
        if (refused := self._bearer(request, ctx, [LINEITEM])) is not None:
            return refused
        body, refusal = await _json_body(request, MEDIA["lineitem"])
        refusal = refusal or _lineitem_refusal(body)
        if refusal is not None:
            return JSONResponse({"error": refusal}, status_code=400 if "content type" not in refusal else 415)
        return JSONResponse(self.add_lineitem(ctx, body), status_code=201, media_type=MEDIA["lineitem"])

    def _get_lineitem(self, ctx: str, lid: str, request: Request) -> Response:
        if (refused := self._bearer(request, ctx, [LINEITEM, LINEITEM_READONLY])) is not None:
            return refused
        item = self._lineitems_in(ctx).get(lid)
        if item is None:
            return JSONResponse({"error": "no such line item"}, status_code=404)
        return JSONResponse(item, media_type=MEDIA["lineitem"])

    async def _put_lineitem(self, ctx: str, lid: str, request: Request) -> Response:
        if (refused := self._bearer(request, ctx, [LINEITEM])) is not None:
            return refused
        if lid not in self._lineitems_in(ctx):
            return JSONResponse({"error": "no such line item"}, status_code=404)
        body, refusal = await _json_body(request, MEDIA["lineitem"])
        refusal = refusal or _lineitem_refusal(body)
        if refusal is not None:
            return JSONResponse({"error": refusal}, status_code=400 if "content type" not in refusal else 415)
        return JSONResponse(self.add_lineitem(ctx, body, lid), media_type=MEDIA["lineitem"])

    async def _post_score(self, ctx: str, lid: str, request: Request) -> Response:
        if (refused := self._bearer(request, ctx, [SCORE])) is not None:
            return refused
        if lid not in self._lineitems_in(ctx):
            return JSONResponse({"error": "no such line item"}, status_code=404)
        score, refusal = await _json_body(request, MEDIA["score"])
        if refusal is not None:
            return JSONResponse({"error": refusal}, status_code=415 if "content type" in refusal else 400)
        refusal = _score_refusal(score)
        if refusal is not None:
            return JSONResponse({"error": refusal}, status_code=400)
        self.scores.setdefault(lid, []).append(score)
        return Response(status_code=204)

    def _get_results(self, ctx: str, lid: str, request: Request) -> Response:
        if (refused := self._bearer(request, ctx, [RESULT_READONLY])) is not None:
            return refused
        item = self._lineitems_in(ctx).get(lid)
        if item is None:
            return JSONResponse({"error": "no such line item"}, status_code=404)
        latest: dict[str, dict[str, Any]] = {}
        for score in self.scores.get(lid, []):
            latest[score["userId"]] = score
        wanted = request.query_params.get("user_id")
        results = [_result(item["id"], s) for user, s in latest.items() if wanted in (None, user)]
        return JSONResponse(results, media_type=MEDIA["results"])

    # NRPS -----------------------------------------------------------------------------------------------

    def _get_members(self, ctx: str, request: Request) -> Response:
        if (refused := self._bearer(request, ctx, [MEMBERSHIPS])) is not None:
            return refused
        try:
            limit = max(1, int(request.query_params.get("limit") or self.member_page_size))
            page = max(1, int(request.query_params.get("page") or 1))
        except ValueError:
            return JSONResponse({"error": "limit and page must be whole numbers"}, status_code=400)
        url = self.context_url(ctx) + "/memberships"
        body = dataclass_to_dict(ContextMembership(id=url, context=Context(ctx, ctx.upper(), self.title_of(ctx))))
        body["members"] = [_member_json(m) for m in self.members[(page - 1) * limit : page * limit]]
        headers = {}
        if page * limit < len(self.members):
            # Quoted rel: the package's own generate_next_link writes rel=next, which pylti1p3 does not follow.
            headers["Link"] = f'<{url}?{urlencode({"limit": limit, "page": page + 1})}>; rel="next"'
        return JSONResponse(body, headers=headers, media_type=MEDIA["members"])

    # deep linking ---------------------------------------------------------------------------------------

    async def _deep_link_return(self, request: Request) -> Response:
        token = (await request.form()).get("JWT")
        if not isinstance(token, str) or not token:
            return _refused("no JWT in the deep-linking response")
        try:
            items, context_id = await run_in_threadpool(self._deep_link_answer, token)
        except _Refusal as exc:
            return _refused(str(exc))
        for item in items:
            self._add_content_item(context_id, item)
        return HTMLResponse(_page("Added to the course", f"<p>{len(items)} items added</p>"))

    def _deep_link_answer(self, token: str) -> tuple[list[dict[str, Any]], str]:
        """The content items of a valid deep-linking response, and the context its data names."""

        def check(conf: _Conf) -> list[dict[str, Any]]:
            return conf.set_accepted_deeplinking_types(["ltiResourceLink"]).validate_deeplinking_resp({"JWT": token})

        try:
            items = self._with_tool_keys(check)
        except REFUSALS as exc:
            raise _Refusal(f"deep-linking response refused: {exc}") from exc
        claims = jwt.decode(token, options={"verify_signature": False})  # verified by the package just above
        context_id = self._deep_link_context(claims)
        return items, context_id

    def _deep_link_context(self, claims: dict[str, Any]) -> str:
        """What the package leaves unchecked in a deep-linking response; the context of its ``data``."""
        if claims.get("iss") != self.client_id:
            raise _Refusal("the response's iss must be the client id")
        if self.issuer not in _as_list(claims.get("aud")):
            raise _Refusal("the response's aud must be this platform")
        if "exp" not in claims or "iat" not in claims:
            raise _Refusal("the response lacks iat or exp")
        if claims.get(LTI + "deployment_id") != self.deployment_id:
            raise _Refusal("the response names another deployment")
        context_id = self._dl_data.get(str(claims.get(DL + "data")))
        if context_id is None:
            raise _Refusal("the response does not echo the data of a deep-linking launch")
        nonce = claims.get("nonce")
        with self._lock:
            if not nonce or ("nonce:" + str(nonce)) in self._seen:
                raise _Refusal("the response's nonce is missing or was used before")
            self._seen.add("nonce:" + str(nonce))
        return context_id

    def _add_content_item(self, context_id: str, item: dict[str, Any]) -> None:
        """A resource link for an ltiResourceLink item, with a line item bound to it when it asks for one."""
        self.deep_link_items.append(item)
        link_id = "link-" + secrets.token_hex(4)
        self.resource_links[link_id] = {
            "url": item.get("url"),
            "title": item.get("title"),
            "custom": dict(item.get("custom") or {}),
            "context_id": context_id,
        }
        line = item.get("lineItem")
        if isinstance(line, dict):
            fields = {k: line[k] for k in ("scoreMaximum", "label", "resourceId", "tag") if k in line}
            fields["label"] = fields.get("label") or item.get("title") or link_id
            self.add_lineitem(context_id, {**fields, "resourceLinkId": link_id})

    # the course page ------------------------------------------------------------------------------------

    def _course_page(self, ctx: str, user: str, link: str) -> Response:
        if user not in self._people:
            return _refused(f"no user {user!r} in this LMS", 404)
        title = html.escape(self.title_of(ctx))
        frame = html.escape(f"/course/{ctx}/frame?{urlencode({'user': user, 'link': link})}")
        body = (
            f"<main><h1>{title}</h1>"
            f'<iframe title="Ringlab" src="{frame}" width="1000" height="700" '
            'allow="clipboard-write; fullscreen"></iframe></main>'
        )
        return HTMLResponse(_page(self.title_of(ctx), body))

    def _course_frame(self, ctx: str, user: str, link: str) -> Response:
        member = self._people.get(user)
        if member is None:
            return _refused(f"no user {user!r} in this LMS", 404)
        params = self.login_params(member, resource_link_id=link, context_id=ctx)
        return HTMLResponse(auto_post(self.tool_url + "/lti/login", params, "Opening Ringlab"))

    def _return(self, request: Request) -> Response:
        q = request.query_params
        said = html.escape(q.get("lti_errormsg") or q.get("lti_msg") or "")
        title = html.escape(self.context_title)
        return HTMLResponse(_page(self.context_title, f"<h1>Back in {title}</h1><p>{said}</p>"))


# -- small pieces ------------------------------------------------------------------------------------------------


class _Refusal(Exception):
    """A request the platform refuses, with the reason it answers."""


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _refused(reason: str, status: int = 400) -> HTMLResponse:
    return HTMLResponse(_page("Refused", f"<h1>Refused</h1><p>{html.escape(reason)}</p>"), status_code=status)


def _oauth_error(error: str, description: str, status: int) -> JSONResponse:
    headers = {"WWW-Authenticate": f'Bearer error="{error}"'} if status in (401, 403) else {}
    return JSONResponse({"error": error, "error_description": description}, status_code=status, headers=headers)


async def _json_body(request: Request, media_type: str) -> tuple[dict[str, Any], str | None]:
    """The request's JSON object, or why not (a wrong content type, not a JSON object)."""
    if request.headers.get("content-type", "").split(";")[0].strip() != media_type:
        return {}, f"the content type must be {media_type}"
    try:
        body = await request.json()
    except ValueError:
        return {}, "the body is not JSON"
    return (body, None) if isinstance(body, dict) else ({}, "the body is not a JSON object")


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _lineitem_refusal(body: dict[str, Any]) -> str | None:
    if not isinstance(body.get("label"), str) or not body["label"].strip():
        return "a line item needs a label"
    if not _number(body.get("scoreMaximum")) or body["scoreMaximum"] <= 0:
        return "a line item needs a scoreMaximum above 0"
    return None


def _score_refusal(score: dict[str, Any]) -> str | None:
    """Why a score is refused (the package's score service validates nothing: its own TODO says so)."""
    missing = [k for k in ("userId", "timestamp", "activityProgress", "gradingProgress") if not score.get(k)]
    if missing:
        return f"the score lacks {', '.join(missing)}"
    if score["activityProgress"] not in {p.value for p in ActivityProgress}:
        return f"unknown activityProgress {score['activityProgress']!r}"
    if score["gradingProgress"] not in {p.value for p in GradeProgress}:
        return f"unknown gradingProgress {score['gradingProgress']!r}"
    try:
        datetime.fromisoformat(str(score["timestamp"]))
    except ValueError:
        return "the timestamp is not ISO 8601"
    given, maximum = score.get("scoreGiven"), score.get("scoreMaximum")
    if given is not None:
        if not _number(given) or not _number(maximum):
            return "scoreGiven needs a numeric scoreMaximum"
        if not 0 <= given <= maximum:
            return "scoreGiven must lie within 0..scoreMaximum"
    return None


def _result(lineitem_url: str, score: dict[str, Any]) -> dict[str, Any]:
    result = {"id": f"{lineitem_url}/results/{score['userId']}", "scoreOf": lineitem_url, "userId": score["userId"]}
    if score.get("scoreGiven") is not None:
        result.update(resultScore=score["scoreGiven"], resultMaximum=score.get("scoreMaximum"))
    if score.get("comment"):
        result["comment"] = score["comment"]
    return result


def _member_json(m: Member) -> dict[str, Any]:
    return {
        "user_id": m.sub,
        "roles": m.roles,
        "name": m.name,
        "given_name": m.given_name,
        "family_name": m.family_name,
        "email": m.email,
        "status": Status.ACTIVE.value,
    }


def _page(title: str, body: str) -> str:
    return (
        f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title></head>'
        f"<body>{body}</body></html>"
    )


def auto_post(action: str, fields: dict[str, str], title: str) -> str:
    """A page whose form posts ``fields`` to ``action`` by itself (a button for a browser without scripts)."""
    inputs = "".join(
        f'<input type="hidden" name="{html.escape(k)}" value="{html.escape(v)}">' for k, v in fields.items()
    )
    body = (
        f'<form method="post" action="{html.escape(action)}">{inputs}'
        '<button type="submit">Continue</button></form><script>document.forms[0].submit()</script>'
    )
    return _page(title, body)


def read_form(page: str) -> tuple[str, dict[str, str]]:
    """The action and hidden fields of a page's first form (what a browser would post)."""
    action = re.search(r'<form method="post" action="([^"]*)"', page)
    if action is None:
        raise AssertionError(f"no form on the page: {page[:500]}")
    fields = re.findall(r'<input type="hidden" name="([^"]*)" value="([^"]*)"', page)
    return html.unescape(action.group(1)), {html.unescape(k): html.unescape(v) for k, v in fields}


__all__ = [
    "CONTENT_DEVELOPER",
    "INSTRUCTOR",
    "LEARNER",
    "TAMPERS",
    "TEACHING_ASSISTANT",
    "KeyPair",
    "Member",
    "Platform",
    "ThreadedServer",
    "auto_post",
    "default_members",
    "read_form",
]
