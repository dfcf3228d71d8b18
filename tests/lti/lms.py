"""An LTI 1.3 platform (an LMS stand-in) for the tests, on the independent ``lti1p3platform`` package.

Served over real HTTP by uvicorn in a thread on 127.0.0.1, with an in-memory gradebook. The package signs
the platform's launches (``Registration.platform_encode_and_sign``), grants access tokens from the tool's
signed client assertions (``get_access_token``), checks bearer tokens (``validate_token``) and deep-linking
answers (``validate_deeplinking_resp``), each against the tool's key set fetched from the tool over HTTP;
this module adds the HTTP endpoints, the claims of each launch, and the line items, scores and members.

``tamper`` makes one launch's id_token wrong in one way, for the tool's refusal tests. Where this module
signs with PyJWT directly, it is because the token is meant to be wrong (another key, an old date).
"""

from __future__ import annotations

import html
import secrets
import socket
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

import httpx
import jwt
import uvicorn
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response
from lti1p3platform.ltiplatform import LTI1P3PlatformConfAbstract
from lti1p3platform.registration import Registration

MEMBERSHIP = "http://purl.imsglobal.org/vocab/lis/v2/membership#"
INSTRUCTOR = MEMBERSHIP + "Instructor"
LEARNER = MEMBERSHIP + "Learner"
TEACHING_ASSISTANT = MEMBERSHIP + "Instructor#TeachingAssistant"
CONTENT_DEVELOPER = MEMBERSHIP + "ContentDeveloper"
LTI = "https://purl.imsglobal.org/spec/lti/claim/"
AGS_SCOPES = [
    "https://purl.imsglobal.org/spec/lti-ags/scope/lineitem",
    "https://purl.imsglobal.org/spec/lti-ags/scope/result.readonly",
    "https://purl.imsglobal.org/spec/lti-ags/scope/score",
]
NRPS_SCOPE = "https://purl.imsglobal.org/spec/lti-nrps/scope/contextmembership.readonly"
TAMPERS = ("forged_signature", "unknown_kid", "expired", "wrong_audience", "unknown_deployment")


@dataclass
class Member:
    sub: str
    name: str
    given_name: str
    family_name: str
    email: str
    roles: list[str]


def _key_pair() -> tuple[str, str]:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    public = (
        key.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )
    return private, public


class _Conf(LTI1P3PlatformConfAbstract):
    """The package's platform configuration: one registration (the tool under test)."""

    def init_platform_config(self, **kwargs: Any) -> None:
        self._reg: Registration = kwargs["registration"]

    def get_registration_by_params(self, **kwargs: Any) -> Registration:
        return self._reg


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class _Pending:
    member: Member
    message_type: str
    resource_link_id: str | None
    tamper: str | None
    roles: list[str]
    context_id: str
    used: bool = False


@dataclass
class Platform:
    tool_url: str
    client_id: str = "ringlab-client"
    deployment_id: str = "deployment-1"
    context_id: str = "course-101"
    context_title: str = "Distributed Training 101"
    members: list[Member] = field(default_factory=list)
    lineitems: dict[str, dict[str, Any]] = field(default_factory=dict)
    scores: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    deep_link_items: list[dict[str, Any]] = field(default_factory=list)
    resource_links: dict[str, dict[str, Any]] = field(default_factory=dict)
    token_requests: list[str] = field(default_factory=list)
    jwks_fetches: int = 0

    def __post_init__(self) -> None:
        if not self.members:
            self.members = [
                Member("lms-prof", "Grace Hopper", "Grace", "Hopper", "grace@example.edu", [INSTRUCTOR]),
                Member("lms-ada", "Ada Lovelace", "Ada", "Lovelace", "ada@example.edu", [LEARNER]),
                Member("lms-alan", "Alan Turing", "Alan", "Turing", "alan@example.edu", [LEARNER]),
                Member("lms-edsger", "Edsger Dijkstra", "Edsger", "Dijkstra", "ed@example.edu", [LEARNER]),
                Member("lms-ta", "Barbara Liskov", "Barbara", "Liskov", "bl@example.edu", [TEACHING_ASSISTANT]),
            ]
        self.port = _free_port()
        self.issuer = f"http://127.0.0.1:{self.port}"
        self.auth_login_url = self.issuer + "/auth"
        self.token_url = self.issuer + "/token"
        self.jwks_url = self.issuer + "/jwks"
        self._keys: list[tuple[str, str]] = [_key_pair()]  # newest first: it signs
        self._pending: dict[str, _Pending] = {}
        self._tokens: set[str] = set()
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._app = self._build()

    # -- the package's registration ---------------------------------------------------------------------

    def _registration(self) -> Registration:
        private, public = self._keys[0]
        reg = Registration().set_iss(self.issuer).set_client_id(self.client_id)
        reg.set_deployment_id(self.deployment_id).set_launch_url(self.tool_url + "/lti/launch")
        reg.set_oidc_login_url(self.tool_url + "/lti/login").set_tool_key_set_url(self.tool_url + "/lti/jwks.json")
        return reg.set_platform_private_key(private).set_platform_public_key(public)

    def _conf(self) -> _Conf:
        conf = _Conf(registration=self._registration())
        conf.get_registration()
        return conf

    def rotate_key(self) -> None:
        self._keys.insert(0, _key_pair())

    # -- running ---------------------------------------------------------------------------------------

    def start(self) -> Platform:
        config = uvicorn.Config(self._app, host="127.0.0.1", port=self.port, log_level="warning", lifespan="off")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 20
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the test platform did not start")
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        if self._server is not None and self._thread is not None:
            self._server.should_exit = True
            self._thread.join(timeout=10)
        self._server = self._thread = None

    # -- launches --------------------------------------------------------------------------------------

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
        assert tamper is None or tamper in TAMPERS, tamper
        hint = secrets.token_urlsafe(12)
        self._pending[hint] = _Pending(
            member, message_type, resource_link_id, tamper, roles or member.roles, context_id or self.context_id
        )
        link = self.resource_links.get(resource_link_id or "", {})
        return {
            "iss": self.issuer,
            "login_hint": member.sub,
            "target_link_uri": target_link_uri or link.get("url") or self.tool_url + "/lti/launch",
            "lti_message_hint": hint,
            "client_id": self.client_id,
            "lti_deployment_id": self.deployment_id,
        }

    def authorize(self, auth_url: str) -> tuple[str, dict[str, str]]:
        answer = httpx.get(auth_url, timeout=30)
        assert answer.status_code == 200, answer.text
        return _form(answer.text)

    def latest_score(self, lineitem_id: str, sub: str) -> dict[str, Any] | None:
        mine = [s for s in self.scores.get(lineitem_id, []) if s.get("userId") == sub]
        return mine[-1] if mine else None

    def page_url(self, member: Member, resource_link_id: str) -> str:
        hint = self.login_params(member, resource_link_id=resource_link_id)["lti_message_hint"]
        return f"{self.issuer}/course/{self.context_id}/page?hint={hint}"

    def _claims(self, p: _Pending, nonce: str) -> dict[str, Any]:
        m, now = p.member, int(time.time())
        context_url = f"{self.issuer}/contexts/{p.context_id}"
        link = self.resource_links.get(p.resource_link_id or "", {})
        claims: dict[str, Any] = {
            "iss": self.issuer, "aud": self.client_id, "azp": self.client_id, "sub": m.sub,
            "iat": now, "exp": now + 300, "nonce": nonce,
            "name": m.name, "given_name": m.given_name, "family_name": m.family_name, "email": m.email,
            LTI + "message_type": p.message_type, LTI + "version": "1.3.0",
            LTI + "deployment_id": self.deployment_id, LTI + "roles": p.roles,
            LTI + "target_link_uri": link.get("url") or self.tool_url + "/lti/launch",
            LTI + "context": {"id": p.context_id, "label": "DT101", "title": self.context_title,
                              "type": ["http://purl.imsglobal.org/vocab/lis/v2/course#CourseOffering"]},
            LTI + "launch_presentation": {"document_target": "iframe", "return_url": self.issuer + "/return"},
            "https://purl.imsglobal.org/spec/lti-nrps/claim/namesroleservice": {
                "context_memberships_url": context_url + "/memberships", "service_versions": ["2.0"],
            },
        }  # fmt: skip
        ags: dict[str, Any] = {"scope": AGS_SCOPES, "lineitems": context_url + "/lineitems"}
        if p.message_type == "LtiDeepLinkingRequest":
            claims["https://purl.imsglobal.org/spec/lti-dl/claim/deep_linking_settings"] = {
                "deep_link_return_url": self.issuer + "/deep_link_return",
                "accept_types": ["ltiResourceLink"],
                "accept_presentation_document_targets": ["iframe", "window"],
                "accept_multiple": True,
                "data": "dl-" + p.context_id,
            }
        elif p.resource_link_id:
            claims[LTI + "resource_link"] = {"id": p.resource_link_id, "title": link.get("title", "Ringlab")}
            if link.get("custom"):
                claims[LTI + "custom"] = link["custom"]
            mine = [lid for lid, li in self.lineitems.items() if li.get("resourceLinkId") == p.resource_link_id]
            if mine:
                ags["lineitem"] = self.lineitems[mine[0]]["id"]
        claims["https://purl.imsglobal.org/spec/lti-ags/claim/endpoint"] = ags
        return claims

    def _id_token(self, p: _Pending, nonce: str) -> str:
        claims = self._claims(p, nonce)
        if p.tamper == "expired":
            claims["iat"], claims["exp"] = claims["iat"] - 7200, claims["iat"] - 3600
        elif p.tamper == "wrong_audience":
            claims["aud"] = claims["azp"] = "some-other-tool"
        elif p.tamper == "unknown_deployment":
            claims[LTI + "deployment_id"] = "deployment-unknown"
        reg = self._registration()
        if p.tamper == "forged_signature":  # another key, presented as the platform's
            return jwt.encode(claims, _key_pair()[0], algorithm="RS256", headers={"kid": reg.get_kid()})
        if p.tamper == "unknown_kid":
            return jwt.encode(claims, _key_pair()[0], algorithm="RS256", headers={"kid": "never-published"})
        return reg.platform_encode_and_sign(claims)

    # -- the HTTP side ---------------------------------------------------------------------------------

    def _build(self) -> FastAPI:
        app = FastAPI()

        @app.get("/jwks")
        def jwks() -> dict[str, Any]:
            self.jwks_fetches += 1
            return {"keys": [Registration.get_jwk(public) for _, public in self._keys]}

        @app.get("/auth", response_class=HTMLResponse)
        def auth(request: Request) -> Response:
            q = request.query_params
            if q.get("client_id") != self.client_id:
                return HTMLResponse("unknown client_id", status_code=400)
            if q.get("redirect_uri") != self.tool_url + "/lti/launch":
                return HTMLResponse("redirect_uri is not the registered launch URL", status_code=400)
            pending = self._pending.get(q.get("lti_message_hint") or "")
            if pending is None or pending.used or q.get("login_hint") != pending.member.sub:
                return HTMLResponse("unknown or used lti_message_hint", status_code=400)
            if q.get("response_type") != "id_token" or q.get("scope") != "openid" or not q.get("nonce"):
                return HTMLResponse("not an OIDC id_token request", status_code=400)
            pending.used = True
            token = self._id_token(pending, q["nonce"])
            return HTMLResponse(_auto_post(q["redirect_uri"], {"id_token": token, "state": q.get("state", "")}))

        @app.post("/token")
        async def token(request: Request) -> Response:
            form = {k: v for k, v in (await request.form()).items() if isinstance(v, str)}
            try:
                granted = self._conf().get_access_token(form)
            except Exception as exc:  # the package's refusals: a bad grant, a bad assertion
                return JSONResponse({"error": "invalid_grant", "error_description": str(exc)}, status_code=400)
            self.token_requests.append(form.get("scope", ""))
            self._tokens.add(granted["access_token"])
            return JSONResponse(dict(granted))

        def bearer(request: Request, scopes: list[str]) -> Response | None:
            header = request.headers.get("authorization", "")
            token = header.removeprefix("Bearer ").strip()
            if not header.startswith("Bearer ") or token not in self._tokens:
                return JSONResponse({"error": "no valid bearer token"}, status_code=401)
            if not self._conf().validate_token(token, allowed_scopes=scopes):
                return JSONResponse({"error": "scope not granted"}, status_code=403)
            return None

        @app.get("/contexts/{ctx}/lineitems")
        def list_lineitems(ctx: str, request: Request) -> Response:
            if (refused := bearer(request, AGS_SCOPES[:2])) is not None:
                return refused
            q = request.query_params
            found = [
                li for li in self.lineitems.values()
                if all(q.get(k) in (None, li.get(f)) for k, f in
                       (("resource_link_id", "resourceLinkId"), ("resource_id", "resourceId"), ("tag", "tag")))
            ]  # fmt: skip
            return JSONResponse(found, media_type="application/vnd.ims.lis.v2.lineitemcontainer+json")

        @app.post("/contexts/{ctx}/lineitems")
        async def create_lineitem(ctx: str, request: Request) -> Response:
            if (refused := bearer(request, AGS_SCOPES[:1])) is not None:
                return refused
            body = await request.json()
            return JSONResponse(self._add_lineitem(ctx, body), status_code=201)

        @app.get("/contexts/{ctx}/lineitems/{lid}")
        def get_lineitem(ctx: str, lid: str, request: Request) -> Response:
            if (refused := bearer(request, AGS_SCOPES[:2])) is not None:
                return refused
            item = self.lineitems.get(lid)
            return JSONResponse(item) if item else JSONResponse({"error": "no such line item"}, status_code=404)

        @app.post("/contexts/{ctx}/lineitems/{lid}/scores")
        async def post_score(ctx: str, lid: str, request: Request) -> Response:
            if (refused := bearer(request, AGS_SCOPES[2:])) is not None:
                return refused
            if lid not in self.lineitems:
                return JSONResponse({"error": "no such line item"}, status_code=404)
            if not request.headers.get("content-type", "").startswith("application/vnd.ims.lis.v1.score+json"):
                return JSONResponse({"error": "wrong content type"}, status_code=415)
            score = await request.json()
            missing = [k for k in ("userId", "timestamp", "activityProgress", "gradingProgress") if k not in score]
            if missing:
                return JSONResponse({"error": f"missing {missing}"}, status_code=400)
            given, maximum = score.get("scoreGiven"), score.get("scoreMaximum")
            if given is not None and (maximum is None or given > maximum or given < 0):
                return JSONResponse({"error": "scoreGiven must lie in 0..scoreMaximum"}, status_code=400)
            self.scores.setdefault(lid, []).append(score)
            return Response(status_code=204)

        @app.get("/contexts/{ctx}/memberships")
        def memberships(ctx: str, request: Request) -> Response:
            if (refused := bearer(request, [NRPS_SCOPE])) is not None:
                return refused
            limit = int(request.query_params.get("limit") or 2)  # small pages: paging is exercised
            start = int(request.query_params.get("start") or 0)
            page = self.members[start : start + limit]
            body = {
                "id": str(request.url),
                "context": {"id": ctx, "label": "DT101", "title": self.context_title},
                "members": [
                    {"user_id": m.sub, "roles": m.roles, "name": m.name, "given_name": m.given_name,
                     "family_name": m.family_name, "email": m.email, "status": "Active"}
                    for m in page
                ],
            }  # fmt: skip
            headers = {}
            if start + limit < len(self.members):
                nxt = f"{self.issuer}/contexts/{ctx}/memberships?{urlencode({'limit': limit, 'start': start + limit})}"
                headers["Link"] = f'<{nxt}>; rel="next"'
            return JSONResponse(
                body, headers=headers, media_type="application/vnd.ims.lti-nrps.v2.membershipcontainer+json"
            )

        @app.post("/deep_link_return", response_class=HTMLResponse)
        async def deep_link_return(request: Request) -> Response:
            form = {k: v for k, v in (await request.form()).items() if isinstance(v, str)}
            conf = self._conf()
            try:
                items = conf.validate_deeplinking_resp(form)
                body = jwt.decode(form["JWT"], options={"verify_signature": False})
            except Exception as exc:
                return HTMLResponse(f"refused: {html.escape(str(exc))}", status_code=400)
            if body.get("iss") != self.client_id or self.issuer not in _list(body.get("aud")):
                return HTMLResponse("refused: wrong iss or aud", status_code=400)
            if body.get(LTI + "deployment_id") != self.deployment_id:
                return HTMLResponse("refused: wrong deployment", status_code=400)
            if body.get("https://purl.imsglobal.org/spec/lti-dl/claim/data") != "dl-" + self.context_id:
                return HTMLResponse("refused: data not echoed", status_code=400)
            for item in items:
                self.deep_link_items.append(item)
                link_id = "link-" + uuid.uuid4().hex[:8]
                self.resource_links[link_id] = {"url": item.get("url"), "title": item.get("title"),
                                                "custom": item.get("custom") or {}}  # fmt: skip
                if item.get("lineItem"):
                    self._add_lineitem(self.context_id, {**item["lineItem"], "resourceLinkId": link_id})
            return HTMLResponse(f"<!doctype html><title>Added</title><p>{len(items)} items added</p>")

        @app.get("/course/{ctx}/page", response_class=HTMLResponse)
        def course_page(ctx: str, hint: str) -> Response:
            return HTMLResponse(
                f'<!doctype html><html lang="en"><head><title>{html.escape(self.context_title)}</title></head>'
                f"<body><h1>{html.escape(self.context_title)}</h1>"
                f'<iframe title="Ringlab" src="/course/{ctx}/frame?hint={hint}" width="1000" height="700"></iframe>'
                "</body></html>"
            )

        @app.get("/course/{ctx}/frame", response_class=HTMLResponse)
        def frame(ctx: str, hint: str) -> Response:
            pending = self._pending[hint]
            params = {
                "iss": self.issuer, "login_hint": pending.member.sub, "target_link_uri": self.tool_url + "/lti/launch",
                "lti_message_hint": hint, "client_id": self.client_id, "lti_deployment_id": self.deployment_id,
            }  # fmt: skip
            return HTMLResponse(_auto_post(self.tool_url + "/lti/login", params))

        return app

    def _add_lineitem(self, ctx: str, body: dict[str, Any]) -> dict[str, Any]:
        lid = "li-" + uuid.uuid4().hex[:8]
        item = {**body, "id": f"{self.issuer}/contexts/{ctx}/lineitems/{lid}"}
        self.lineitems[lid] = item
        return item


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _auto_post(action: str, fields: dict[str, str]) -> str:
    inputs = "".join(
        f'<input type="hidden" name="{html.escape(k)}" value="{html.escape(v)}">' for k, v in fields.items()
    )
    return (
        f'<!doctype html><html lang="en"><head><title>Launching</title></head><body>'
        f'<form method="post" action="{html.escape(action)}">{inputs}<button type="submit">Continue</button></form>'
        "<script>document.forms[0].submit()</script></body></html>"
    )


def _form(page: str) -> tuple[str, dict[str, str]]:
    """The action and fields of the auto-submitting form of a page (what the browser would post)."""
    import re

    action = re.search(r'<form method="post" action="([^"]+)"', page)
    assert action, page
    fields = dict(re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)"', page))
    return html.unescape(action.group(1)), {k: html.unescape(v) for k, v in fields.items()}


__all__ = ["CONTENT_DEVELOPER", "INSTRUCTOR", "LEARNER", "TEACHING_ASSISTANT", "Member", "Platform"]
